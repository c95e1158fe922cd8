//! From the f32 graph to serializable models: the f32 model itself, the calibration probe (the
//! f32 model with every activation as an output), and the int8 model.
//!
//! int8 follows TFLite's post-training full-integer scheme: weights int8 symmetric per output
//! channel, biases int32 at `input_scale · weight_scale[c]`, activations int8 asymmetric over
//! the calibrated range (widened to hold 0, so zero padding is exact). Ops whose kernels demand
//! fixed output parameters get them: LOGISTIC `1/256, −128`; max pooling, reshape and padding
//! keep their input's. The model's input and output stay f32, behind QUANTIZE and DEQUANTIZE.

use crate::ir::{Data, Graph, OpKind};
use crate::tflite::{Model, Op, Quant, Tensor, TensorType};
use crate::Error;

fn shape_i32(s: &[usize]) -> Vec<i32> {
    s.iter().map(|&d| d as i32).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn ops_of(g: &Graph) -> Vec<Op> {
    g.ops
        .iter()
        .map(|op| Op {
            kind: op.kind.clone(),
            inputs: op.inputs.iter().map(|&i| i as i32).collect(),
            outputs: op.outputs.iter().map(|&i| i as i32).collect(),
        })
        .collect()
}

/// Name of the signature output that carries activation tensor `t` in the probe.
pub fn probe_output_name(t: usize) -> String {
    format!("t{t}")
}

/// The f32 model. With `probe`, every activation except the input is an output too.
pub fn float_model(g: &Graph, probe: bool) -> Model {
    let tensors = g
        .tensors
        .iter()
        .map(|t| {
            let (ty, data) = match &t.data {
                Data::Activation => (TensorType::Float32, None),
                Data::F32(v) => (TensorType::Float32, Some(f32_bytes(v))),
                Data::I32(v) => (TensorType::Int32, Some(i32_bytes(v))),
            };
            Tensor {
                name: t.name.clone(),
                shape: shape_i32(&t.shape),
                ty,
                data,
                quant: None,
            }
        })
        .collect();
    let outputs = if probe {
        (0..g.tensors.len())
            .filter(|&i| i != g.input && g.tensors[i].data == Data::Activation)
            .map(|i| (probe_output_name(i), i))
            .collect()
    } else {
        vec![("logits".to_string(), g.output)]
    };
    Model {
        tensors,
        ops: ops_of(g),
        inputs: vec![("input".to_string(), g.input)],
        outputs,
        int8: false,
    }
}

/// Asymmetric int8 parameters covering `[lo, hi] ∪ {0}`.
pub fn activation_params(lo: f32, hi: f32) -> (f32, i64) {
    let lo = lo.min(0.0);
    let hi = hi.max(0.0);
    let range = hi - lo;
    let scale = if range.is_finite() && range > 1e-12 {
        range / 255.0
    } else {
        1.0 / 255.0
    };
    let zero = (-128.0 - lo / scale).round().clamp(-128.0, 127.0) as i64;
    (scale, zero)
}

fn quantize_value(v: f32, scale: f32, zero: i64) -> i8 {
    ((v / scale).round() + zero as f32).clamp(-128.0, 127.0) as i8
}

/// Symmetric per-channel int8 of `w`, channel `c` of element `i` being `channel(i)`.
/// A constant tensor quantized to int8 with one scale and zero point.
fn per_tensor_constant(name: &str, shape: &[usize], v: &[f32], scale: f32, zero: i64) -> Tensor {
    Tensor {
        name: name.to_string(),
        shape: shape_i32(shape),
        ty: TensorType::Int8,
        data: Some(
            v.iter()
                .map(|&x| quantize_value(x, scale, zero) as u8)
                .collect(),
        ),
        quant: Some(Quant {
            scale: vec![scale],
            zero_point: vec![zero],
            dimension: 0,
        }),
    }
}

fn per_channel(
    w: &[f32],
    channels: usize,
    channel: impl Fn(usize) -> usize,
) -> (Vec<u8>, Vec<f32>) {
    let mut max = vec![0.0f32; channels];
    for (i, v) in w.iter().enumerate() {
        let c = channel(i);
        max[c] = max[c].max(v.abs());
    }
    // An all-zero channel quantizes to zeros at any scale; 1 keeps the requantization finite.
    let scale: Vec<f32> = max
        .iter()
        .map(|&m| if m > 0.0 { m / 127.0 } else { 1.0 })
        .collect();
    let q = w
        .iter()
        .enumerate()
        .map(|(i, v)| (v / scale[channel(i)]).round().clamp(-127.0, 127.0) as i8 as u8)
        .collect();
    (q, scale)
}

/// The int8 model. `ranges[t]` is the calibrated (min, max) of activation tensor `t`.
pub fn int8_model(g: &Graph, ranges: &[Option<(f32, f32)>]) -> Result<Model, Error> {
    let n = g.tensors.len();
    let mut params: Vec<Option<(f32, i64)>> = vec![None; n];
    for (i, t) in g.tensors.iter().enumerate() {
        if t.data == Data::Activation {
            let (lo, hi) = ranges
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| Error::Calibration(format!("no range for tensor {}", t.name)))?;
            params[i] = Some(activation_params(lo, hi));
        }
    }
    // Ops are in dependency order, so an input's parameters are final when its reader is met.
    for op in &g.ops {
        let fixed = match op.kind {
            OpKind::Logistic => Some((1.0 / 256.0, -128)),
            OpKind::MaxPool { .. } | OpKind::Reshape { .. } | OpKind::Pad | OpKind::PadV2 => {
                params[op.inputs[0]]
            }
            _ => None,
        };
        if let Some(p) = fixed {
            params[op.outputs[0]] = Some(p);
        }
    }

    let mut tensors: Vec<Option<Tensor>> = vec![None; n];
    let act_tensor = |i: usize, params: &[Option<(f32, i64)>]| {
        let t = &g.tensors[i];
        let (s, z) = params[i].expect("activation parameters");
        Tensor {
            name: t.name.clone(),
            shape: shape_i32(&t.shape),
            ty: TensorType::Int8,
            data: None,
            quant: Some(Quant {
                scale: vec![s],
                zero_point: vec![z],
                dimension: 0,
            }),
        }
    };
    for (i, t) in g.tensors.iter().enumerate() {
        if t.data == Data::Activation {
            tensors[i] = Some(act_tensor(i, &params));
        }
    }
    // Constants, by the role their reader gives them.
    for op in &g.ops {
        let in_scale = params[op.inputs[0]].map(|p| p.0);
        match &op.kind {
            OpKind::Conv { .. } | OpKind::Depthwise { .. } | OpKind::FullyConnected { .. } => {
                let (wi, bi) = (op.inputs[1], op.inputs[2]);
                let wt = &g.tensors[wi];
                let Data::F32(w) = &wt.data else {
                    return Err(Error::Unsupported("computed weights".into()));
                };
                let channels = match op.kind {
                    OpKind::Depthwise { .. } => wt.shape[3],
                    _ => wt.shape[0],
                };
                let per = w.len() / channels.max(1);
                let (q, wscale) = match op.kind {
                    OpKind::Depthwise { .. } => per_channel(w, channels, |i| i % channels),
                    _ => per_channel(w, channels, |i| i / per),
                };
                let dimension = if matches!(op.kind, OpKind::Depthwise { .. }) {
                    3
                } else {
                    0
                };
                tensors[wi] = Some(Tensor {
                    name: wt.name.clone(),
                    shape: shape_i32(&wt.shape),
                    ty: TensorType::Int8,
                    data: Some(q),
                    quant: Some(Quant {
                        scale: wscale.clone(),
                        zero_point: vec![0; channels],
                        dimension,
                    }),
                });
                let bt = &g.tensors[bi];
                let Data::F32(b) = &bt.data else {
                    return Err(Error::Unsupported("computed bias".into()));
                };
                let sx =
                    in_scale.ok_or_else(|| Error::Unsupported("constant conv input".into()))?;
                let bscale: Vec<f32> = wscale.iter().map(|s| s * sx).collect();
                let bq: Vec<i32> = b
                    .iter()
                    .zip(&bscale)
                    .map(|(v, s)| (v / s).round().clamp(i32::MIN as f32, i32::MAX as f32) as i32)
                    .collect();
                tensors[bi] = Some(Tensor {
                    name: bt.name.clone(),
                    shape: shape_i32(&bt.shape),
                    ty: TensorType::Int32,
                    data: Some(i32_bytes(&bq)),
                    quant: Some(Quant {
                        scale: bscale,
                        zero_point: vec![0; channels],
                        dimension: 0,
                    }),
                });
            }
            OpKind::Add { .. } | OpKind::Mul { .. } => {
                for &ci in &op.inputs {
                    let ct = &g.tensors[ci];
                    if let Data::F32(v) = &ct.data {
                        let lo = v.iter().copied().fold(f32::INFINITY, f32::min);
                        let hi = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let (s, z) = activation_params(lo, hi);
                        tensors[ci] = Some(per_tensor_constant(&ct.name, &ct.shape, v, s, z));
                    }
                }
            }
            OpKind::PadV2 => {
                let ci = op.inputs[2];
                let ct = &g.tensors[ci];
                let (s, z) = params[op.inputs[0]].expect("activation parameters");
                let Data::F32(v) = &ct.data else {
                    return Err(Error::Unsupported("computed pad value".into()));
                };
                tensors[ci] = Some(per_tensor_constant(&ct.name, &ct.shape, v, s, z));
            }
            _ => {}
        }
    }
    // Integer constants (axes, paddings, shapes) stay as they are.
    for (i, t) in g.tensors.iter().enumerate() {
        if tensors[i].is_none() {
            match &t.data {
                Data::I32(v) => {
                    tensors[i] = Some(Tensor {
                        name: t.name.clone(),
                        shape: shape_i32(&t.shape),
                        ty: TensorType::Int32,
                        data: Some(i32_bytes(v)),
                        quant: None,
                    })
                }
                _ => {
                    return Err(Error::Unsupported(format!(
                        "float constant {} has no int8 lowering",
                        t.name
                    )))
                }
            }
        }
    }
    let mut tensors: Vec<Tensor> = tensors
        .into_iter()
        .map(|t| t.expect("every tensor typed"))
        .collect();
    let mut ops = ops_of(g);

    // f32 boundary: input → QUANTIZE → (the int8 input tensor) and logits → DEQUANTIZE.
    let float_in = tensors.len();
    tensors.push(Tensor {
        name: "input".into(),
        shape: shape_i32(&g.tensors[g.input].shape),
        ty: TensorType::Float32,
        data: None,
        quant: None,
    });
    tensors[g.input].name = "input_int8".into();
    let float_out = tensors.len();
    tensors.push(Tensor {
        name: "logits".into(),
        shape: shape_i32(&g.tensors[g.output].shape),
        ty: TensorType::Float32,
        data: None,
        quant: None,
    });
    tensors[g.output].name = "logits_int8".into();
    ops.insert(
        0,
        Op {
            kind: OpKind::Quantize,
            inputs: vec![float_in as i32],
            outputs: vec![g.input as i32],
        },
    );
    ops.push(Op {
        kind: OpKind::Dequantize,
        inputs: vec![g.output as i32],
        outputs: vec![float_out as i32],
    });
    Ok(Model {
        tensors,
        ops,
        inputs: vec![("input".to_string(), float_in)],
        outputs: vec![("logits".to_string(), float_out)],
        int8: true,
    })
}
