//! Builds an ONNX `ModelProto` in memory, layer by layer, with seeded random weights.
//!
//! The architectures ([`super::mobilenet_v2`], [`super::efficientnet_b0`],
//! [`super::resnet50_v2`]) call the layer methods; this file decides how a layer becomes ONNX
//! nodes in each precision:
//!
//! - **f32 / f16**: `Conv` (BatchNorm folded into weights and bias, as inference runtimes do),
//!   `Gemm` for the classifier. f16 is not decided here: the engine converts the whole typed
//!   model with tract's f32→f16 translator.
//! - **int8**: static post-training quantization in the ONNX "QOperator" form that
//!   onnxruntime's quantizer emits: `QuantizeLinear` → `QLinearConv` / `QLinearMatMul` (int8
//!   weights, per-tensor symmetric; uint8 activations, asymmetric; int32 bias) →
//!   `DequantizeLinear`. Activation ranges come from a calibration run of the f32 graph on the
//!   image set ([`Calibration`]). As onnxruntime's quantizer does, a ReLU or ReLU6 right after
//!   a quantized layer is folded into that layer's output quantization (its post-activation
//!   range, zero point 0: the uint8 saturation is the activation), and a quantized layer feeds
//!   the next one in uint8 directly; other element-wise ops (residual adds, swish, SE gates)
//!   stay f32, with a `DequantizeLinear` emitted only for a value a float op reads.
//!
//! Weights are drawn from a ChaCha8 stream seeded by the caller, in the same order for every
//! precision, so f32, f16 and int8 models of one seed share their weights. Scales follow He
//! initialisation (`sqrt(2/fan_in)` before a rectifier, `sqrt(1/fan_in)` before a linear
//! output) with residual branches damped, so activations stay O(1) through 50+ layers in f16
//! too (the tests check the logits' spread).

use std::collections::HashMap;

use super::onnx::{
    attribute_proto::AttributeType, tensor_proto::DataType, type_proto, AttributeProto, GraphProto,
    ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
};
use greenpipe_workload_numeric::{f32_le_bytes, quantize_i32_le, quantize_i8_symmetric, Draws};

/// ONNX opset the graphs are written against (Clip with tensor bounds needs 11+).
const OPSET: i64 = 13;

/// A tensor of the graph being built: its ONNX value name and channel count.
#[derive(Debug, Clone)]
pub struct Value {
    /// The f32 tensor; empty for a quantized layer's output no float op has read yet
    /// ([`GraphBuilder::float`] dequantizes it on first use).
    pub name: String,
    pub channels: usize,
    /// Int8 mode: the uint8 tensor a quantized layer produced.
    quant: Option<Quantized>,
    /// The layer (convolution) whose output this is: an activation reading it may fold into it.
    layer: Option<usize>,
}

impl Value {
    fn float(name: String, channels: usize) -> Value {
        Value {
            name,
            channels,
            quant: None,
            layer: None,
        }
    }
}

/// A quantized layer's uint8 output and its quantization parameters.
#[derive(Debug, Clone)]
struct Quantized {
    name: String,
    scale: String,
    zero: String,
    scale_value: f32,
    /// Index of the producing `QLinearConv` in the builder's nodes.
    node: usize,
}

/// How a convolution's weights are scaled.
#[derive(Debug, Clone, Copy)]
pub enum Init {
    /// Followed by a rectifier (ReLU, ReLU6, swish): He, `sqrt(2/fan_in)`.
    Rectified,
    /// Linear output (projections, residual branches): `gain * sqrt(1/fan_in)`.
    Linear(f32),
}

/// Observed (min, max) of a tensor.
pub type Range = (f32, f32);

/// Observed ranges of every quantized layer's input and output, and of the ReLU / ReLU6 output
/// that directly follows a layer, by layer index.
#[derive(Debug, Clone, Default)]
pub struct Calibration {
    pub ranges: HashMap<usize, (Range, Range)>,
    pub activations: HashMap<usize, Range>,
}

/// What a probe graph exposes: graph outputs `1 + 2i` and `2 + 2i` are the input and output of
/// layer `layers[i]`, then output `1 + 2 * layers.len() + j` is the output of the activation
/// that follows layer `activations[j]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probes {
    pub layers: Vec<usize>,
    pub activations: Vec<usize>,
}

impl Calibration {
    /// From the (min, max) of a probe graph's outputs after the logits, in output order.
    pub fn from_ranges(probes: &Probes, ranges: &[Range]) -> Calibration {
        let mut cal = Calibration::default();
        for (i, layer) in probes.layers.iter().enumerate() {
            cal.ranges
                .insert(*layer, (ranges[2 * i], ranges[2 * i + 1]));
        }
        let base = 2 * probes.layers.len();
        for (j, layer) in probes.activations.iter().enumerate() {
            cal.activations.insert(*layer, ranges[base + j]);
        }
        cal
    }
}

/// What the builder emits.
#[derive(Debug, Clone)]
pub enum Mode {
    /// Plain f32 graph.
    Float,
    /// f32 graph that also outputs every quantizable layer's input and output, for calibration.
    Probe,
    /// Quantized graph with these ranges.
    Int8(Calibration),
}

/// Accumulates nodes and initializers.
pub struct GraphBuilder {
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    outputs: Vec<ValueInfoProto>,
    draws: Draws,
    mode: Mode,
    next_name: usize,
    next_layer: usize,
    /// Probe mode: (layer index, input name, output name).
    probes: Vec<(usize, String, String)>,
    /// Probe mode: (layer index, output name of the activation after it).
    activation_probes: Vec<(usize, String)>,
    /// Int8 mode: the float tensor dequantized from each uint8 tensor, once.
    dequantized: HashMap<String, String>,
}

impl GraphBuilder {
    pub fn new(seed: u64, mode: Mode) -> Self {
        GraphBuilder {
            nodes: Vec::new(),
            initializers: Vec::new(),
            outputs: Vec::new(),
            draws: Draws::seeded(seed),
            mode,
            next_name: 0,
            next_layer: 0,
            probes: Vec::new(),
            activation_probes: Vec::new(),
            dequantized: HashMap::new(),
        }
    }

    /// The probes of a [`Mode::Probe`] graph.
    pub fn probes(&self) -> Probes {
        Probes {
            layers: self.probes.iter().map(|p| p.0).collect(),
            activations: self.activation_probes.iter().map(|p| p.0).collect(),
        }
    }

    /// The f32 tensor of `v`, dequantizing a quantized layer's output on first use.
    pub fn float(&mut self, v: &Value) -> String {
        if !v.name.is_empty() {
            return v.name.clone();
        }
        let q = v
            .quant
            .as_ref()
            .expect("a value without a float tensor is a quantized layer's output");
        if let Some(f) = self.dequantized.get(&q.name) {
            return f.clone();
        }
        let f = self.node("DequantizeLinear", &[&q.name, &q.scale, &q.zero], vec![]);
        self.dequantized.insert(q.name.clone(), f.clone());
        f
    }

    fn fresh(&mut self, what: &str) -> String {
        self.next_name += 1;
        format!("{what}_{}", self.next_name)
    }

    fn node(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        let out = self.fresh(&op.to_ascii_lowercase());
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            name: out.clone(),
            op_type: op.to_string(),
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    fn constant(&mut self, what: &str, dims: &[i64], data_type: DataType, raw: Vec<u8>) -> String {
        let name = self.fresh(what);
        self.initializers.push(TensorProto {
            dims: dims.to_vec(),
            data_type: data_type as i32,
            name: name.clone(),
            raw_data: raw,
            ..Default::default()
        });
        name
    }

    fn constant_f32(&mut self, what: &str, dims: &[i64], values: &[f32]) -> String {
        self.constant(what, dims, DataType::Float, f32_le_bytes(values))
    }

    fn random(&mut self, n: usize, std: f32) -> Vec<f32> {
        self.draws.normal(n, std)
    }

    /// Convolution (BatchNorm folded) with `groups` groups, "same" padding.
    pub fn conv(
        &mut self,
        x: &Value,
        out_channels: usize,
        kernel: usize,
        stride: usize,
        groups: usize,
        init: Init,
    ) -> Value {
        let cin_per_group = x.channels / groups;
        let fan_in = (cin_per_group * kernel * kernel) as f32;
        let std = match init {
            Init::Rectified => (2.0 / fan_in).sqrt(),
            Init::Linear(gain) => gain * (1.0 / fan_in).sqrt(),
        };
        let weights = self.random(out_channels * cin_per_group * kernel * kernel, std);
        let bias = self.random(out_channels, 0.02);
        let dims = [
            out_channels as i64,
            cin_per_group as i64,
            kernel as i64,
            kernel as i64,
        ];
        let pad = (kernel / 2) as i64;
        let attrs = vec![
            ints("kernel_shape", &[kernel as i64, kernel as i64]),
            ints("strides", &[stride as i64, stride as i64]),
            ints("pads", &[pad, pad, pad, pad]),
            int("group", groups as i64),
        ];
        let layer = self.next_layer;
        self.next_layer += 1;
        match self.mode.clone() {
            Mode::Float | Mode::Probe => {
                let w = self.constant_f32("w", &dims, &weights);
                let b = self.constant_f32("b", &[out_channels as i64], &bias);
                let y = self.node("Conv", &[&x.name, &w, &b], attrs);
                self.probe(layer, &x.name, &y);
                Value {
                    layer: Some(layer),
                    ..Value::float(y, out_channels)
                }
            }
            Mode::Int8(cal) => {
                let (in_range, out_range) = cal.ranges[&layer];
                // A quantized layer's output feeds this one in uint8, without a round trip
                // through f32.
                let (xq, sx, zx, x_scale) = match &x.quant {
                    Some(q) => (
                        q.name.clone(),
                        q.scale.clone(),
                        q.zero.clone(),
                        q.scale_value,
                    ),
                    None => {
                        let xf = self.float(x);
                        self.quantize(&xf, in_range)
                    }
                };
                let (wq, sw, zw, w_scale) = self.weights_i8(&dims, &weights);
                let bq = self.bias_i32(&bias, x_scale * w_scale);
                let (y_scale, _) = u8_params(out_range.0, out_range.1);
                let (sy, zy) = self.qparams(out_range);
                let inputs = [xq.as_str(), &sx, &zx, &wq, &sw, &zw, &sy, &zy, &bq];
                let yq = self.node("QLinearConv", &inputs, attrs);
                Value {
                    name: String::new(),
                    channels: out_channels,
                    quant: Some(Quantized {
                        name: yq,
                        scale: sy,
                        zero: zy,
                        scale_value: y_scale,
                        node: self.nodes.len() - 1,
                    }),
                    layer: Some(layer),
                }
            }
        }
    }

    /// Fully connected classifier on `[N, C]`.
    pub fn dense(&mut self, x: &Value, out_features: usize) -> Value {
        let fan_in = x.channels;
        let weights = self.random(fan_in * out_features, (1.0 / fan_in as f32).sqrt());
        let bias = self.random(out_features, 0.02);
        let layer = self.next_layer;
        self.next_layer += 1;
        let name = match self.mode.clone() {
            Mode::Float | Mode::Probe => {
                // Gemm's B is [K, N]: the weights are drawn in that order.
                let w = self.constant_f32("w", &[fan_in as i64, out_features as i64], &weights);
                let b = self.constant_f32("b", &[out_features as i64], &bias);
                let y = self.node("Gemm", &[&x.name, &w, &b], vec![]);
                self.probe(layer, &x.name, &y);
                y
            }
            Mode::Int8(cal) => {
                let (in_range, out_range) = cal.ranges[&layer];
                let xf = self.float(x);
                let (xq, sx, zx, _) = self.quantize(&xf, in_range);
                let (wq, sw, zw, _) =
                    self.weights_i8(&[fan_in as i64, out_features as i64], &weights);
                let (sy, zy) = self.qparams(out_range);
                let yq = self.node(
                    "QLinearMatMul",
                    &[&xq, &sx, &zx, &wq, &sw, &zw, &sy, &zy],
                    vec![],
                );
                let y = self.node("DequantizeLinear", &[&yq, &sy, &zy], vec![]);
                let b = self.constant_f32("b", &[out_features as i64], &bias);
                self.node("Add", &[&y, &b], vec![])
            }
        };
        Value::float(name, out_features)
    }

    fn probe(&mut self, layer: usize, input: &str, output: &str) {
        if matches!(self.mode, Mode::Probe) {
            self.probes
                .push((layer, input.to_string(), output.to_string()));
        }
    }

    /// uint8 scale and zero point covering `range` (and 0, so zero padding is exact).
    fn qparams(&mut self, (lo, hi): (f32, f32)) -> (String, String) {
        let (scale, zero) = u8_params(lo, hi);
        let s = self.constant_f32("scale", &[], &[scale]);
        let z = self.constant("zero", &[], DataType::Uint8, vec![zero]);
        (s, z)
    }

    fn quantize(&mut self, x: &str, range: (f32, f32)) -> (String, String, String, f32) {
        let (scale, _) = u8_params(range.0, range.1);
        let (s, z) = self.qparams(range);
        let q = self.node("QuantizeLinear", &[x, &s, &z], vec![]);
        (q, s, z, scale)
    }

    fn weights_i8(&mut self, dims: &[i64], w: &[f32]) -> (String, String, String, f32) {
        let (raw, scale) = quantize_i8_symmetric(w);
        let q = self.constant("wq", dims, DataType::Int8, raw);
        let s = self.constant_f32("wscale", &[], &[scale]);
        let z = self.constant("wzero", &[], DataType::Int8, vec![0]);
        (q, s, z, scale)
    }

    fn bias_i32(&mut self, b: &[f32], scale: f32) -> String {
        let raw = quantize_i32_le(b, scale);
        self.constant("bq", &[b.len() as i64], DataType::Int32, raw)
    }

    pub fn relu(&mut self, x: &Value) -> Value {
        if let Some(folded) = self.fold_activation(x) {
            return folded;
        }
        let xf = self.float(x);
        let name = self.node("Relu", &[&xf], vec![]);
        self.probe_activation(x, &name);
        Value::float(name, x.channels)
    }

    pub fn relu6(&mut self, x: &Value) -> Value {
        if let Some(folded) = self.fold_activation(x) {
            return folded;
        }
        let xf = self.float(x);
        let lo = self.constant_f32("min", &[], &[0.0]);
        let hi = self.constant_f32("max", &[], &[6.0]);
        let name = self.node("Clip", &[&xf, &lo, &hi], vec![]);
        self.probe_activation(x, &name);
        Value::float(name, x.channels)
    }

    /// Probe mode: records the output of an activation that directly follows a layer.
    fn probe_activation(&mut self, x: &Value, output: &str) {
        if let (Mode::Probe, Some(layer)) = (&self.mode, x.layer) {
            // Through an Identity: the activation's output is usually the next layer's probed
            // input too, and a graph output may not be declared twice.
            let probe = self.node("Identity", &[output], vec![]);
            self.activation_probes.push((layer, probe));
        }
    }

    /// Int8 mode: a ReLU or ReLU6 on a quantized layer's output no float op has read becomes
    /// that layer's output quantization: the post-activation range, whose zero point is 0, so
    /// uint8 saturation clamps below 0 and above the range (at most 6 after ReLU6).
    fn fold_activation(&mut self, x: &Value) -> Option<Value> {
        let Mode::Int8(cal) = &self.mode else {
            return None;
        };
        let q = x.quant.as_ref()?;
        if self.dequantized.contains_key(&q.name) {
            return None;
        }
        let (lo, hi) = *cal.activations.get(&x.layer?)?;
        let (scale, _) = u8_params(lo, hi);
        let (s, z) = self.qparams((lo, hi));
        // QLinearConv's inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
        // y_zero_point, bias. The bias is in x_scale × w_scale, independent of y's.
        let node = &mut self.nodes[q.node];
        let old = [node.input[6].clone(), node.input[7].clone()];
        node.input[6] = s.clone();
        node.input[7] = z.clone();
        self.initializers.retain(|t| !old.contains(&t.name));
        Some(Value {
            name: String::new(),
            channels: x.channels,
            quant: Some(Quantized {
                scale: s,
                zero: z,
                scale_value: scale,
                ..q.clone()
            }),
            layer: None,
        })
    }

    pub fn sigmoid(&mut self, x: &Value) -> Value {
        let xf = self.float(x);
        let name = self.node("Sigmoid", &[&xf], vec![]);
        Value::float(name, x.channels)
    }

    /// Swish / SiLU, `x * sigmoid(x)`.
    pub fn swish(&mut self, x: &Value) -> Value {
        let s = self.sigmoid(x);
        self.mul(x, &s)
    }

    /// Element-wise product; `b` may be `[N, C, 1, 1]` (squeeze-and-excitation gate).
    pub fn mul(&mut self, a: &Value, b: &Value) -> Value {
        let (af, bf) = (self.float(a), self.float(b));
        let name = self.node("Mul", &[&af, &bf], vec![]);
        Value::float(name, a.channels)
    }

    pub fn add(&mut self, a: &Value, b: &Value) -> Value {
        let (af, bf) = (self.float(a), self.float(b));
        let name = self.node("Add", &[&af, &bf], vec![]);
        Value::float(name, a.channels)
    }

    /// Inference-mode BatchNormalization with random affine parameters around identity
    /// (ResNet V2's pre-activations cannot be folded into a convolution: a ReLU separates them).
    pub fn batch_norm(&mut self, x: &Value) -> Value {
        let c = x.channels;
        let gamma: Vec<f32> = self.random(c, 0.05).iter().map(|v| 1.0 + v).collect();
        let beta = self.random(c, 0.05);
        let mean = vec![0.0f32; c];
        let var = vec![1.0f32; c];
        let g = self.constant_f32("gamma", &[c as i64], &gamma);
        let b = self.constant_f32("beta", &[c as i64], &beta);
        let m = self.constant_f32("mean", &[c as i64], &mean);
        let v = self.constant_f32("var", &[c as i64], &var);
        let attrs = vec![float("epsilon", 1e-5)];
        let xf = self.float(x);
        let name = self.node("BatchNormalization", &[&xf, &g, &b, &m, &v], attrs);
        Value::float(name, c)
    }

    pub fn max_pool(&mut self, x: &Value, kernel: usize, stride: usize) -> Value {
        let pad = (kernel / 2) as i64;
        let attrs = vec![
            ints("kernel_shape", &[kernel as i64, kernel as i64]),
            ints("strides", &[stride as i64, stride as i64]),
            ints("pads", &[pad, pad, pad, pad]),
        ];
        let xf = self.float(x);
        let name = self.node("MaxPool", &[&xf], attrs);
        Value::float(name, x.channels)
    }

    /// `[N, C, H, W]` → `[N, C, 1, 1]`.
    pub fn global_avg_pool(&mut self, x: &Value) -> Value {
        let xf = self.float(x);
        let name = self.node("GlobalAveragePool", &[&xf], vec![]);
        Value::float(name, x.channels)
    }

    /// `[N, C, 1, 1]` → `[N, C]`.
    pub fn flatten(&mut self, x: &Value) -> Value {
        let xf = self.float(x);
        let name = self.node("Flatten", &[&xf], vec![int("axis", 1)]);
        Value::float(name, x.channels)
    }

    /// Finishes the graph: input `input` `[batch, 3, size, size]` f32, first output `logits`,
    /// then (probe mode) every probed layer's input and output, then every probed activation's
    /// output ([`Probes`]).
    pub fn finish(mut self, name: &str, logits: &Value, batch: usize, size: usize) -> ModelProto {
        let logits_f = self.float(logits);
        self.nodes.push(NodeProto {
            input: vec![logits_f],
            output: vec!["logits".to_string()],
            name: "logits".to_string(),
            op_type: "Identity".to_string(),
            ..Default::default()
        });
        self.outputs.push(value_info(
            "logits",
            Some(&[batch as i64, logits.channels as i64]),
        ));
        let input_shape = [batch as i64, 3, size as i64, size as i64];
        for (_, input, output) in std::mem::take(&mut self.probes) {
            // The first layer's probed input is the graph input itself: declaring it again as
            // an output without a shape would erase the input's fact.
            let shape = (input == "input").then_some(&input_shape[..]);
            self.outputs.push(value_info(&input, shape));
            self.outputs.push(value_info(&output, None));
        }
        for (_, output) in std::mem::take(&mut self.activation_probes) {
            self.outputs.push(value_info(&output, None));
        }
        let graph = GraphProto {
            node: self.nodes,
            name: name.to_string(),
            initializer: self.initializers,
            input: vec![value_info("input", Some(&input_shape))],
            output: self.outputs,
            ..Default::default()
        };
        ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: OPSET,
            }],
            producer_name: "greenpipe-workload".into(),
            graph: Some(graph),
            ..Default::default()
        }
    }

    /// The graph's input as a [`Value`].
    pub fn input(&self) -> Value {
        Value::float("input".into(), 3)
    }
}

/// Scale and zero point of an asymmetric uint8 quantization of `[lo, hi]` (widened to hold 0).
pub fn u8_params(lo: f32, hi: f32) -> (f32, u8) {
    let lo = lo.min(0.0);
    let hi = hi.max(0.0);
    let scale = ((hi - lo) / 255.0).max(1e-8);
    let zero = (-lo / scale).round().clamp(0.0, 255.0) as u8;
    (scale, zero)
}

fn value_info(name: &str, shape: Option<&[i64]>) -> ValueInfoProto {
    typed_value_info(name, DataType::Float, shape)
}

/// A graph input or output declaration.
pub fn typed_value_info(name: &str, elem: DataType, shape: Option<&[i64]>) -> ValueInfoProto {
    use super::onnx::tensor_shape_proto::{dimension, Dimension};
    let shape = shape.map(|dims| TensorShapeProto {
        dim: dims
            .iter()
            .map(|d| Dimension {
                value: Some(dimension::Value::DimValue(*d)),
                ..Default::default()
            })
            .collect(),
    });
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem as i32,
                shape,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: values.to_vec(),
        ..Default::default()
    }
}

pub fn int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: value,
        ..Default::default()
    }
}

fn float(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Float as i32,
        f: value,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u8_params_keep_zero_exact() {
        let (scale, zero) = u8_params(-1.0, 3.0);
        assert!((scale - 4.0 / 255.0).abs() < 1e-6);
        assert_eq!(zero, 64);
        // An all-positive range still holds 0 (ReLU outputs): zero point 0.
        assert_eq!(u8_params(0.5, 6.0).1, 0);
    }
}
