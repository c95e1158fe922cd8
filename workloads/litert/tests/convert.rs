//! Converts a small hand-made ONNX classifier (the layer kinds of MobileNetV2, EfficientNet-B0
//! and ResNet-50 v2: stride-2 and depthwise convs, ReLU6, residual add, squeeze-excite gate,
//! batch norm, max pooling, global pooling, Gemm) and runs it through LiteRT's C API, against a
//! naive NCHW reference of the same network.
//!
//! Tolerances: f32 logits within 1e-4 of the logits' scale (max(1, max |logit|)) of the
//! reference; int8 logits correlated above 0.99 with f32 ones and the same top-1 per image.

use crate::common::*;
use greenpipe_litert::{convert, Error, LiteRt, Precision};

const N: usize = 2;
const SIZE: usize = 16;
const CLASSES: usize = 32;

/// The network's seeded weights; [`Net::onnx`] and [`Net::reference`] compute the same thing.
struct Net {
    stem_w: Vec<f32>,
    stem_b: Vec<f32>,
    dw_w: Vec<f32>,
    dw_b: Vec<f32>,
    proj_w: Vec<f32>,
    proj_b: Vec<f32>,
    se1_w: Vec<f32>,
    se1_b: Vec<f32>,
    se2_w: Vec<f32>,
    se2_b: Vec<f32>,
    dw2_w: Vec<f32>,
    dw2_b: Vec<f32>,
    bn1: [Vec<f32>; 4],
    bn2: [Vec<f32>; 4],
    fc_w: Vec<f32>,
    fc_b: Vec<f32>,
}

fn bn_params(rng: &mut Rng, c: usize) -> [Vec<f32>; 4] {
    [
        rng.vec(c, 0.3).iter().map(|v| 1.0 + v).collect(),
        rng.vec(c, 0.2),
        rng.vec(c, 0.2),
        rng.vec(c, 0.3).iter().map(|v| 1.0 + v).collect(),
    ]
}

impl Net {
    fn new(seed: u64) -> Net {
        let mut r = Rng::new(seed);
        Net {
            stem_w: r.vec(8 * 3 * 9, 0.5),
            stem_b: r.vec(8, 0.1),
            dw_w: r.vec(8 * 9, 0.5),
            dw_b: r.vec(8, 0.1),
            proj_w: r.vec(8 * 8, 0.4),
            proj_b: r.vec(8, 0.1),
            se1_w: r.vec(4 * 8, 0.5),
            se1_b: r.vec(4, 0.1),
            se2_w: r.vec(8 * 4, 0.5),
            se2_b: r.vec(8, 0.1),
            dw2_w: r.vec(16 * 9, 0.5),
            dw2_b: r.vec(16, 0.1),
            bn1: bn_params(&mut r, 16),
            bn2: bn_params(&mut r, 16),
            fc_w: r.vec(16 * CLASSES, 0.5),
            fc_b: r.vec(CLASSES, 0.1),
        }
    }

    fn onnx(&self) -> Vec<u8> {
        let mut g = Onnx::new();
        let conv = |g: &mut Onnx,
                    x: &str,
                    w: &[f32],
                    b: &[f32],
                    o: usize,
                    i: usize,
                    k: usize,
                    s: usize,
                    group: usize| {
            let wn = g.constant(&[o, i, k, k], w);
            let bn = g.constant(&[o], b);
            let p = (k / 2) as i64;
            g.node(
                "Conv",
                &[x, &wn, &bn],
                vec![
                    ints("kernel_shape", &[k as i64, k as i64]),
                    ints("strides", &[s as i64, s as i64]),
                    ints("pads", &[p, p, p, p]),
                    int("group", group as i64),
                ],
            )
        };
        let relu6 = |g: &mut Onnx, x: &str| {
            let lo = g.constant(&[], &[0.0]);
            let hi = g.constant(&[], &[6.0]);
            g.node("Clip", &[x, &lo, &hi], vec![])
        };
        let bn = |g: &mut Onnx, x: &str, p: &[Vec<f32>; 4]| {
            let c = p[0].len();
            let names: Vec<String> = p.iter().map(|v| g.constant(&[c], v)).collect();
            g.node(
                "BatchNormalization",
                &[x, &names[0], &names[1], &names[2], &names[3]],
                vec![float("epsilon", 1e-3)],
            )
        };
        // Stem: 3×3 stride 2 (explicit PAD in TFLite), ReLU6 fused.
        let stem = conv(&mut g, "input", &self.stem_w, &self.stem_b, 8, 3, 3, 2, 1);
        let stem = relu6(&mut g, &stem);
        // Depthwise 3×3 stride 1 (SAME), ReLU6, linear 1×1 projection, residual.
        let h = conv(&mut g, &stem, &self.dw_w, &self.dw_b, 8, 1, 3, 1, 8);
        let h = relu6(&mut g, &h);
        let h = conv(&mut g, &h, &self.proj_w, &self.proj_b, 8, 8, 1, 1, 1);
        let x = g.node("Add", &[&stem, &h], vec![]);
        // Squeeze-and-excitation gate.
        let se = g.node("GlobalAveragePool", &[&x], vec![]);
        // Nothing to fuse into (MEAN has no activation): a standalone RELU.
        let se = g.node("Relu", &[&se], vec![]);
        let se = conv(&mut g, &se, &self.se1_w, &self.se1_b, 4, 8, 1, 1, 1);
        let se = g.node("Relu", &[&se], vec![]);
        let se = conv(&mut g, &se, &self.se2_w, &self.se2_b, 8, 4, 1, 1, 1);
        let gate = g.node("Sigmoid", &[&se], vec![]);
        let x = g.node("Mul", &[&x, &gate], vec![]);
        // Depthwise ×2 stride 2, BatchNorm (folds into it), ReLU.
        let h = conv(&mut g, &x, &self.dw2_w, &self.dw2_b, 16, 1, 3, 2, 8);
        let h = bn(&mut g, &h, &self.bn1);
        let h = g.node("Relu", &[&h], vec![]);
        // Max pooling 3×3 stride 2 pad 1 (padding never wins), a standalone BatchNorm.
        let h = g.node(
            "MaxPool",
            &[&h],
            vec![
                ints("kernel_shape", &[3, 3]),
                ints("strides", &[2, 2]),
                ints("pads", &[1, 1, 1, 1]),
            ],
        );
        // ResNet v2's pre-activation: BatchNorm (MUL + ADD) and ReLU (fused into the ADD).
        let h = bn(&mut g, &h, &self.bn2);
        let h = g.node("Relu", &[&h], vec![]);
        let p = g.node("GlobalAveragePool", &[&h], vec![]);
        let f = g.node("Flatten", &[&p], vec![int("axis", 1)]);
        let w = g.constant(&[16, CLASSES], &self.fc_w);
        let b = g.constant(&[CLASSES], &self.fc_b);
        let logits = g.node("Gemm", &[&f, &w, &b], vec![]);
        g.finish(&[N, 3, SIZE, SIZE], &logits, CLASSES)
    }

    fn reference(&self, input: &[f32]) -> Vec<f32> {
        let x = T::new(&[N, 3, SIZE, SIZE], input.to_vec());
        let stem = relu6(&conv(&x, &self.stem_w, &self.stem_b, 8, 3, 2, 1, 1));
        let h = relu6(&conv(&stem, &self.dw_w, &self.dw_b, 8, 3, 1, 1, 8));
        let h = conv(&h, &self.proj_w, &self.proj_b, 8, 1, 1, 0, 1);
        let x = add(&stem, &h);
        let se = relu(&gap(&x));
        let se = relu(&conv(&se, &self.se1_w, &self.se1_b, 4, 1, 1, 0, 1));
        let gate = sigmoid(&conv(&se, &self.se2_w, &self.se2_b, 8, 1, 1, 0, 1));
        let x = mul_gate(&x, &gate);
        let h = conv(&x, &self.dw2_w, &self.dw2_b, 16, 3, 2, 1, 8);
        let [g1, b1, m1, v1] = &self.bn1;
        let h = relu(&batch_norm(&h, g1, b1, m1, v1, 1e-3));
        let h = max_pool(&h, 3, 2, 1);
        let [g2, b2, m2, v2] = &self.bn2;
        let h = relu(&batch_norm(&h, g2, b2, m2, v2, 1e-3));
        let p = gap(&h);
        let f = T::new(&[N, 16], p.data);
        gemm(&f, &self.fc_w, &self.fc_b, CLASSES).data
    }
}

fn image(seed: u64) -> Vec<f32> {
    Rng::new(seed).vec(N * 3 * SIZE * SIZE, 1.0)
}

fn run(rt: &LiteRt, tflite: &[u8], input: &[f32]) -> Vec<f32> {
    let model = rt
        .compile(tflite, 1)
        .unwrap_or_else(|e| panic!("compile: {e}"));
    model.run(input).unwrap_or_else(|e| panic!("run: {e}"))
}

/// f32: LiteRT's logits equal the reference's within 1e-4 of the logits' scale.
#[test]
fn f32_matches_reference() {
    let rt = litert();
    let net = Net::new(7);
    let tflite = convert(&net.onnx(), Precision::F32, None, &rt).unwrap_or_else(|e| panic!("{e}"));
    for seed in [1, 2, 3] {
        let input = image(seed);
        let want = net.reference(&input);
        let got = run(&rt, &tflite, &input);
        assert_eq!(got.len(), N * CLASSES);
        let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let diff = got
            .iter()
            .zip(&want)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        eprintln!("seed {seed}: max |LiteRT − reference| = {diff:e}, logit scale {scale}");
        assert!(diff <= 1e-4 * scale, "max abs diff {diff} > 1e-4 × {scale}");
    }
}

/// int8 (calibrated on one batch, evaluated on another): same top-1 and logits correlated
/// above 0.99 with f32.
#[test]
fn int8_agrees_with_f32() {
    let rt = litert();
    let net = Net::new(11);
    let onnx = net.onnx();
    let calibration = image(100);
    let int8 =
        convert(&onnx, Precision::Int8, Some(&calibration), &rt).unwrap_or_else(|e| panic!("{e}"));
    let f32m = convert(&onnx, Precision::F32, None, &rt).unwrap_or_else(|e| panic!("{e}"));
    for seed in [5, 6] {
        let input = image(seed);
        let want = run(&rt, &f32m, &input);
        let got = run(&rt, &int8, &input);
        let r = correlation(&got, &want);
        eprintln!("seed {seed}: int8 vs f32 correlation {r:.5}");
        assert!(r > 0.99, "correlation {r}");
        for b in 0..N {
            let (g, w) = (
                &got[b * CLASSES..(b + 1) * CLASSES],
                &want[b * CLASSES..(b + 1) * CLASSES],
            );
            assert_eq!(
                argmax(g),
                argmax(w),
                "top-1 of image {b}: int8 {g:?} vs f32 {w:?}"
            );
        }
    }
}

#[test]
fn bad_inputs_are_errors() {
    let rt = litert();
    let net = Net::new(3);
    let onnx = net.onnx();
    let tflite = convert(&onnx, Precision::F32, None, &rt).unwrap_or_else(|e| panic!("{e}"));
    let model = rt.compile(&tflite, 1).unwrap_or_else(|e| panic!("{e}"));

    let e = model.run(&[0.0; 10]).unwrap_err();
    assert!(
        matches!(e, Error::InputLength { got: 10, expected } if expected == N * 3 * SIZE * SIZE),
        "{e}"
    );
    assert!(model.run(&[]).is_err());

    for junk in [&b""[..], b"not a model at all", &onnx[..], &[0u8; 64][..]] {
        let e = rt.compile(junk, 1).unwrap_err();
        eprintln!("{} junk bytes: {e}", junk.len());
    }
    // A TFLite identifier on garbage: LiteRT's own verification has to refuse it.
    let mut fake = vec![0xA5u8; 256];
    fake[4..8].copy_from_slice(b"TFL3");
    let e = rt.compile(&fake, 1).unwrap_err();
    eprintln!("fake TFL3: {e}");
    // A truncated model.
    assert!(rt.compile(&tflite[..tflite.len() / 2], 1).is_err());

    assert!(convert(b"\x08\x01garbage", Precision::F32, None, &rt).is_err());
    assert!(matches!(
        convert(&onnx, Precision::Int8, None, &rt),
        Err(Error::Calibration(_))
    ));
    assert!(matches!(
        convert(&onnx, Precision::Int8, Some(&[0.0; 7]), &rt),
        Err(Error::Calibration(_))
    ));
}

#[test]
fn missing_library_is_one_line_error() {
    let path = std::path::Path::new("/nonexistent/libLiteRt.so");
    let e = LiteRt::open(path).unwrap_err();
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(matches!(e, Error::Library { .. }));
    assert!(msg.contains("/nonexistent/libLiteRt.so"), "{msg}");
    assert!(msg.contains("scripts/setup.sh"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
}

#[test]
fn malformed_graphs_are_errors() {
    let rt = litert();
    // A Conv without inputs, one reading a value nothing computes, one whose weights are absent.
    for inputs in [&[][..], &["nowhere"][..], &["input", "missing_w"][..]] {
        let mut g = Onnx::new();
        let y = g.node("Conv", inputs, vec![]);
        let onnx = g.finish(&[1, 3, 4, 4], &y, 48);
        let e = convert(&onnx, Precision::F32, None, &rt).unwrap_err();
        eprintln!("{inputs:?}: {e}");
    }
    // Weights whose raw data disagrees with their dims.
    let mut g = Onnx::new();
    let w = g.constant(&[4, 3, 3, 3], &[0.5; 10]);
    let y = g.node("Conv", &["input", &w], vec![]);
    let onnx = g.finish(&[1, 3, 4, 4], &y, 16);
    assert!(convert(&onnx, Precision::F32, None, &rt).is_err());
}

#[test]
fn unsupported_ops_are_errors() {
    let rt = litert();
    let mut g = Onnx::new();
    let y = g.node("Softmax", &["input"], vec![]);
    let onnx = g.finish(&[1, 3, 4, 4], &y, 48);
    let e = convert(&onnx, Precision::F32, None, &rt).unwrap_err();
    assert!(e.to_string().contains("Softmax"), "{e}");
}

/// Corrupted ONNX bytes give errors or working models, never a panic.
#[test]
fn corrupted_onnx_never_panics() {
    let rt = litert();
    let onnx = Net::new(5).onnx();
    let mut rng = Rng::new(77);
    let (mut converted, mut ran) = (0, 0);
    for _ in 0..300 {
        let mut bytes = onnx.clone();
        for _ in 0..3 {
            let i = ((rng.unit() + 1.0) * 0.5 * bytes.len() as f32) as usize % bytes.len();
            bytes[i] ^= 1 << (((rng.unit() + 1.0) * 4.0) as u32 % 8);
        }
        let Ok(tflite) = convert(&bytes, Precision::F32, None, &rt) else {
            continue;
        };
        converted += 1;
        if let Ok(model) = rt.compile(&tflite, 1) {
            let input = vec![0.5; model.input_len()];
            if model.run(&input).is_ok() {
                ran += 1;
            }
        }
    }
    eprintln!("{converted} of 300 corrupted graphs converted, {ran} ran");
}
