//! Shared by the LiteRT tests: the library from `GREENPIPE_LITERT_LIB`, a small ONNX graph
//! builder and a naive NCHW reference implementation of the ops the graphs use.

#![allow(dead_code)]

use std::path::PathBuf;

use greenpipe_litert::onnx::tensor_shape_proto::dimension;
use greenpipe_litert::onnx::{
    type_proto, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto, TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};
use greenpipe_litert::LiteRt;

/// The LiteRT library the tests run against. Unset or missing is a failure, not a skip: these
/// tests are the only check that the converted models run.
pub fn lib_path() -> PathBuf {
    let path = std::env::var_os("GREENPIPE_LITERT_LIB").unwrap_or_else(|| {
        panic!(
            "GREENPIPE_LITERT_LIB is not set: point it at libLiteRt.so from the ai-edge-litert \
             wheel (scripts/setup.sh installs it)"
        )
    });
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "GREENPIPE_LITERT_LIB={} does not name a file (scripts/setup.sh installs the ai-edge-litert wheel)",
        path.display()
    );
    path
}

pub fn litert() -> LiteRt {
    LiteRt::open(&lib_path()).unwrap_or_else(|e| panic!("{e}"))
}

/// splitmix64: seeded values without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.unit() * scale).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// ONNX building.

pub struct Onnx {
    pub nodes: Vec<NodeProto>,
    pub inits: Vec<TensorProto>,
    next: usize,
}

/// An attribute; the type codes are AttributeProto.AttributeType's.
pub fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: 7,
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: 2,
        i: v,
        ..Default::default()
    }
}

pub fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: 1,
        f: v,
        ..Default::default()
    }
}

fn value_info(name: &str, dims: Option<&[usize]>) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(TypeProtoTensor {
                elem_type: 1,
                shape: dims.map(|d| TensorShapeProto {
                    dim: d
                        .iter()
                        .map(|&v| Dimension {
                            value: Some(dimension::Value::DimValue(v as i64)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Onnx {
    pub fn new() -> Onnx {
        Onnx {
            nodes: Vec::new(),
            inits: Vec::new(),
            next: 0,
        }
    }

    pub fn constant(&mut self, dims: &[usize], values: &[f32]) -> String {
        self.next += 1;
        let name = format!("c{}", self.next);
        self.inits.push(TensorProto {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: 1,
            name: name.clone(),
            raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ..Default::default()
        });
        name
    }

    pub fn node(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        self.next += 1;
        let out = format!("{}_{}", op.to_ascii_lowercase(), self.next);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            name: out.clone(),
            op_type: op.into(),
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    pub fn finish(self, input_dims: &[usize], logits: &str, classes: usize) -> Vec<u8> {
        let mut nodes = self.nodes;
        nodes.push(NodeProto {
            input: vec![logits.into()],
            output: vec!["logits".into()],
            name: "logits".into(),
            op_type: "Identity".into(),
            ..Default::default()
        });
        let model = ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: 13,
            }],
            graph: Some(GraphProto {
                node: nodes,
                name: "test".into(),
                initializer: self.inits,
                input: vec![value_info("input", Some(input_dims))],
                output: vec![value_info("logits", Some(&[input_dims[0], classes]))],
                ..Default::default()
            }),
            ..Default::default()
        };
        prost::Message::encode_to_vec(&model)
    }
}

// ---------------------------------------------------------------------------------------------
// Reference implementation, NCHW, straight from the ONNX operator definitions.

#[derive(Clone, Debug)]
pub struct T {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl T {
    pub fn new(shape: &[usize], data: Vec<f32>) -> T {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        T {
            shape: shape.to_vec(),
            data,
        }
    }
}

/// Conv with symmetric `pad`, weights OIHW.
#[allow(clippy::too_many_arguments)]
pub fn conv(
    x: &T,
    w: &[f32],
    b: &[f32],
    o: usize,
    k: usize,
    stride: usize,
    pad: usize,
    group: usize,
) -> T {
    let [n, c, h, wd] = x.shape[..] else { panic!() };
    let ipg = c / group;
    let opg = o / group;
    let oh = (h + 2 * pad - k) / stride + 1;
    let ow = (wd + 2 * pad - k) / stride + 1;
    let mut out = vec![0.0; n * o * oh * ow];
    for bn in 0..n {
        for oc in 0..o {
            let g = oc / opg;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = b[oc] as f64;
                    for ic in 0..ipg {
                        let cin = g * ipg + ic;
                        for ky in 0..k {
                            for kx in 0..k {
                                let iy = (y * stride + ky) as isize - pad as isize;
                                let ix = (xx * stride + kx) as isize - pad as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xv =
                                    x.data[((bn * c + cin) * h + iy as usize) * wd + ix as usize];
                                let wv = w[((oc * ipg + ic) * k + ky) * k + kx];
                                acc += (xv * wv) as f64;
                            }
                        }
                    }
                    out[((bn * o + oc) * oh + y) * ow + xx] = acc as f32;
                }
            }
        }
    }
    T::new(&[n, o, oh, ow], out)
}

pub fn map(x: &T, f: impl Fn(f32) -> f32) -> T {
    T::new(&x.shape, x.data.iter().map(|&v| f(v)).collect())
}

pub fn relu6(x: &T) -> T {
    map(x, |v| v.clamp(0.0, 6.0))
}

pub fn relu(x: &T) -> T {
    map(x, |v| v.max(0.0))
}

pub fn sigmoid(x: &T) -> T {
    map(x, |v| 1.0 / (1.0 + (-v).exp()))
}

pub fn add(a: &T, b: &T) -> T {
    assert_eq!(a.shape, b.shape);
    T::new(
        &a.shape,
        a.data.iter().zip(&b.data).map(|(x, y)| x + y).collect(),
    )
}

/// `[N, C, H, W] · [N, C, 1, 1]`.
pub fn mul_gate(x: &T, g: &T) -> T {
    let [n, c, h, w] = x.shape[..] else { panic!() };
    let mut out = x.data.clone();
    for i in 0..n * c {
        for v in &mut out[i * h * w..(i + 1) * h * w] {
            *v *= g.data[i];
        }
    }
    T::new(&x.shape, out)
}

pub fn gap(x: &T) -> T {
    let [n, c, h, w] = x.shape[..] else { panic!() };
    let out = (0..n * c)
        .map(|i| x.data[i * h * w..(i + 1) * h * w].iter().sum::<f32>() / (h * w) as f32)
        .collect();
    T::new(&[n, c, 1, 1], out)
}

pub fn max_pool(x: &T, k: usize, stride: usize, pad: usize) -> T {
    let [n, c, h, w] = x.shape[..] else { panic!() };
    let oh = (h + 2 * pad - k) / stride + 1;
    let ow = (w + 2 * pad - k) / stride + 1;
    let mut out = vec![f32::NEG_INFINITY; n * c * oh * ow];
    for i in 0..n * c {
        for y in 0..oh {
            for xx in 0..ow {
                let o = &mut out[(i * oh + y) * ow + xx];
                for ky in 0..k {
                    for kx in 0..k {
                        let iy = (y * stride + ky) as isize - pad as isize;
                        let ix = (xx * stride + kx) as isize - pad as isize;
                        if iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize {
                            *o = o.max(x.data[(i * h + iy as usize) * w + ix as usize]);
                        }
                    }
                }
            }
        }
    }
    T::new(&[n, c, oh, ow], out)
}

pub fn batch_norm(x: &T, gamma: &[f32], beta: &[f32], mean: &[f32], var: &[f32], eps: f32) -> T {
    let [n, c, h, w] = x.shape[..] else { panic!() };
    let mut out = x.data.clone();
    for b in 0..n {
        for ch in 0..c {
            let k = gamma[ch] / (var[ch] + eps).sqrt();
            for v in &mut out[(b * c + ch) * h * w..(b * c + ch + 1) * h * w] {
                *v = (*v - mean[ch]) * k + beta[ch];
            }
        }
    }
    T::new(&x.shape, out)
}

/// Gemm without transposes: `x [N, K] · w [K, M] + b`.
pub fn gemm(x: &T, w: &[f32], b: &[f32], m: usize) -> T {
    let n = x.shape[0];
    let k = x.data.len() / n;
    let mut out = vec![0.0; n * m];
    for r in 0..n {
        for j in 0..m {
            let mut acc = b[j] as f64;
            for i in 0..k {
                acc += (x.data[r * k + i] * w[i * m + j]) as f64;
            }
            out[r * m + j] = acc as f32;
        }
    }
    T::new(&[n, m], out)
}

pub fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &x)| {
            if x > bv {
                (i, x)
            } else {
                (bi, bv)
            }
        })
        .0
}

pub fn correlation(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len() as f64;
    let ma = a.iter().map(|&v| v as f64).sum::<f64>() / n;
    let mb = b.iter().map(|&v| v as f64).sum::<f64>() / n;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (x as f64 - ma, y as f64 - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    sab / (saa * sbb).sqrt()
}

/// Runs `body` in a process of its own: this test binary again, with only the calling test
/// selected. What the body reads of the whole process (its RSS, its threads) is then its own,
/// not that of another test running beside it in the crate's one integration binary. The
/// calling test fails unless that process ran exactly this test and it passed.
pub fn alone_in_process(module: &str, test: &str, body: fn()) {
    const SELECTED: &str = "GREENPIPE_TEST_ALONE";
    // module_path!() starts with the binary's crate name, which libtest's names leave out.
    let name = format!(
        "{}::{test}",
        module.split_once("::").map_or(module, |(_, m)| m)
    );
    if std::env::var(SELECTED).is_ok_and(|v| v == name) {
        return body();
    }
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(SELECTED, &name)
        .output()
        .expect("re-run the test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} in a process of its own: {} (its output above)",
        out.status
    );
}
