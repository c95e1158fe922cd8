//! The f32 TFLite graph the ONNX model lowers to, before serialization or quantization.
//!
//! Activations are NHWC (`[N, H, W, C]`) or `[N, C]`; the caller's NCHW input is transposed
//! outside the model ([`crate::CompiledModel::run`]), so the graph starts in NHWC.
//!
//! Every lowering keeps the network the ONNX graph computes: ONNX's explicit symmetric pads become
//! TFLite `SAME` padding only where that pads the same rows and columns (stride 1, odd kernel);
//! elsewhere (stride 2 on even sizes, where `SAME` pads 0 before and 1 after) an explicit `PAD`
//! (`PADV2` with the lowest float for max pooling, whose padding never wins) precedes a `VALID`
//! op. BatchNormalization folds into the convolution it follows when nothing else reads the
//! convolution's output (as inference runtimes do), and otherwise becomes a per-channel
//! `MUL` + `ADD`.

use std::collections::{HashMap, HashSet};

use crate::onnx::{ModelProto, NodeProto, TensorProto};
use crate::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    None,
    Relu,
    Relu6,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    Same,
    Valid,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    /// Inputs: x, weights OHWI, bias `[O]`.
    Conv {
        stride: [usize; 2],
        padding: Padding,
        act: Act,
    },
    /// Inputs: x, weights `[1, KH, KW, C * multiplier]`, bias.
    Depthwise {
        stride: [usize; 2],
        padding: Padding,
        multiplier: usize,
        act: Act,
    },
    /// Inputs: x `[N, K]`, weights `[M, K]`, bias `[M]`.
    FullyConnected {
        act: Act,
    },
    MaxPool {
        stride: [usize; 2],
        filter: [usize; 2],
        padding: Padding,
    },
    /// Inputs: x, axes (i32). Keeps the reduced dimensions.
    Mean,
    Add {
        act: Act,
    },
    Mul {
        act: Act,
    },
    Logistic,
    Relu,
    Relu6,
    /// Inputs: x, new shape (i32).
    Reshape {
        shape: Vec<i32>,
    },
    /// Inputs: x, paddings `[rank, 2]` (i32). Pads with zero (the zero point when quantized).
    Pad,
    /// Inputs: x, paddings, a one-element constant of x's type.
    PadV2,
    Quantize,
    Dequantize,
}

impl OpKind {
    pub fn act_mut(&mut self) -> Option<&mut Act> {
        match self {
            OpKind::Conv { act, .. }
            | OpKind::Depthwise { act, .. }
            | OpKind::FullyConnected { act }
            | OpKind::Add { act }
            | OpKind::Mul { act } => Some(act),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// Computed at run time.
    Activation,
    F32(Vec<f32>),
    I32(Vec<i32>),
}

#[derive(Debug, Clone)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Data,
}

#[derive(Debug, Clone)]
pub struct Op {
    pub kind: OpKind,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct Graph {
    pub tensors: Vec<Tensor>,
    pub ops: Vec<Op>,
    /// The NHWC input.
    pub input: usize,
    pub output: usize,
}

impl Graph {
    fn add_tensor(&mut self, name: impl Into<String>, shape: Vec<usize>, data: Data) -> usize {
        self.tensors.push(Tensor {
            name: name.into(),
            shape,
            data,
        });
        self.tensors.len() - 1
    }

    fn add_op(&mut self, kind: OpKind, inputs: Vec<usize>, outputs: Vec<usize>) -> usize {
        self.ops.push(Op {
            kind,
            inputs,
            outputs,
        });
        self.ops.len() - 1
    }

    /// The NCHW shape of the input the model takes.
    pub fn input_nchw(&self) -> [usize; 4] {
        let s = &self.tensors[self.input].shape;
        [s[0], s[3], s[1], s[2]]
    }
}

/// Lowers an f32 ONNX image classifier.
pub fn lower(model: &ModelProto) -> Result<Graph, Error> {
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| Error::Onnx("the ModelProto has no graph".into()))?;
    let inits: HashMap<&str, &TensorProto> = graph
        .initializer
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let inputs: Vec<_> = graph
        .input
        .iter()
        .filter(|i| !inits.contains_key(i.name.as_str()))
        .collect();
    let [input] = inputs[..] else {
        return Err(Error::Unsupported(format!(
            "the graph has {} runtime inputs; the converter takes exactly one image batch",
            inputs.len()
        )));
    };
    let shape = input.fixed_shape()?;
    let &[n, c, h, w] = &shape[..] else {
        return Err(Error::Unsupported(format!(
            "input {} has shape {shape:?}; expected NCHW",
            input.name
        )));
    };
    let output_name = graph
        .output
        .first()
        .map(|o| o.name.clone())
        .ok_or_else(|| Error::Onnx("the graph has no output".into()))?;
    if graph.output.len() > 1 {
        tracing::debug!(
            extra = graph.output.len() - 1,
            "only the first ONNX graph output is converted"
        );
    }

    let mut consumers: HashMap<&str, usize> = HashMap::new();
    for node in &graph.node {
        for i in &node.input {
            *consumers.entry(i.as_str()).or_default() += 1;
        }
    }
    let graph_outputs: HashSet<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();

    let mut lw = Lowering {
        g: Graph {
            tensors: Vec::new(),
            ops: Vec::new(),
            input: 0,
            output: 0,
        },
        values: HashMap::new(),
        producer: HashMap::new(),
        inits,
    };
    let t =
        lw.g.add_tensor(input.name.clone(), vec![n, h, w, c], Data::Activation);
    lw.g.input = t;
    lw.values.insert(input.name.clone(), t);

    for node in &graph.node {
        // Only the value a node reads is fusable into its producer, and only when nothing else
        // reads it: otherwise the other readers would see the activated value.
        let sole_reader =
            |name: &str| consumers.get(name).copied() == Some(1) && !graph_outputs.contains(name);
        lw.node(node, &sole_reader)
            .map_err(|e| e.in_node(&node.op_type, &node.name))?;
    }
    let out = *lw.values.get(&output_name).ok_or_else(|| {
        Error::Onnx(format!(
            "graph output {output_name} is not computed by any node"
        ))
    })?;
    if lw.g.tensors[out].data != Data::Activation {
        return Err(Error::Unsupported("the graph output is a constant".into()));
    }
    lw.g.tensors[out].name = output_name;
    lw.g.output = out;
    Ok(lw.g)
}

struct Lowering<'a> {
    g: Graph,
    /// ONNX value name → tensor.
    values: HashMap<String, usize>,
    /// Activation tensor → the op that writes it.
    producer: HashMap<usize, usize>,
    inits: HashMap<&'a str, &'a TensorProto>,
}

impl Lowering<'_> {
    fn value(&self, name: &str) -> Result<usize, Error> {
        if self.inits.contains_key(name) {
            return Err(Error::Unsupported(format!(
                "{name} is a constant where the converter expects a computed value"
            )));
        }
        self.values
            .get(name)
            .copied()
            .ok_or_else(|| Error::Onnx(format!("value {name} is read before it is computed")))
    }

    fn init(&self, name: &str) -> Result<&TensorProto, Error> {
        self.inits
            .get(name)
            .copied()
            .ok_or_else(|| Error::Unsupported(format!("{name} must be an initializer")))
    }

    fn shape(&self, t: usize) -> &[usize] {
        &self.g.tensors[t].shape
    }

    fn emit(
        &mut self,
        node: &NodeProto,
        kind: OpKind,
        inputs: Vec<usize>,
        shape: Vec<usize>,
    ) -> Result<usize, Error> {
        let name = node
            .output
            .first()
            .ok_or_else(|| Error::Onnx("node has no output".into()))?
            .clone();
        let t = self.g.add_tensor(name.clone(), shape, Data::Activation);
        let op = self.g.add_op(kind, inputs, vec![t]);
        self.producer.insert(t, op);
        self.values.insert(name, t);
        Ok(t)
    }

    fn alias(&mut self, node: &NodeProto, t: usize) -> Result<(), Error> {
        let name = node
            .output
            .first()
            .ok_or_else(|| Error::Onnx("node has no output".into()))?;
        self.values.insert(name.clone(), t);
        Ok(())
    }

    fn node(&mut self, node: &NodeProto, sole_reader: &dyn Fn(&str) -> bool) -> Result<(), Error> {
        if !node.domain.is_empty() && node.domain != "ai.onnx" {
            return Err(Error::Unsupported(format!(
                "operator domain {}",
                node.domain
            )));
        }
        // Every lowered operator reads a value and writes one; the code below relies on both.
        if node.input.first().is_none_or(String::is_empty)
            || node.output.first().is_none_or(String::is_empty)
        {
            return Err(Error::Onnx("node without a first input or output".into()));
        }
        let input = |i: usize| -> Result<&str, Error> {
            node.input
                .get(i)
                .map(String::as_str)
                .ok_or_else(|| Error::Onnx(format!("missing input {i}")))
        };
        match node.op_type.as_str() {
            "Conv" => self.conv(node),
            "Relu" | "Clip" => {
                let x_name = input(0)?;
                let act = if node.op_type == "Relu" {
                    Act::Relu
                } else {
                    self.clip_act(node)?
                };
                let x = self.value(x_name)?;
                if sole_reader(x_name) {
                    if let Some(&op) = self.producer.get(&x) {
                        if let Some(slot) = self.g.ops[op].kind.act_mut() {
                            if *slot == Act::None {
                                *slot = act;
                                self.g.tensors[x].name = node.output[0].clone();
                                return self.alias(node, x);
                            }
                        }
                    }
                }
                let kind = if act == Act::Relu {
                    OpKind::Relu
                } else {
                    OpKind::Relu6
                };
                let shape = self.shape(x).to_vec();
                self.emit(node, kind, vec![x], shape).map(drop)
            }
            "Sigmoid" => {
                let x = self.value(input(0)?)?;
                let shape = self.shape(x).to_vec();
                self.emit(node, OpKind::Logistic, vec![x], shape).map(drop)
            }
            "Add" | "Mul" => self.binary(node),
            "BatchNormalization" => self.batch_norm(node, sole_reader(input(0)?)),
            "GlobalAveragePool" => {
                let x = self.value(input(0)?)?;
                let &[n, _, _, c] = self.shape(x) else {
                    return Err(Error::Unsupported(
                        "GlobalAveragePool of a non-4D tensor".into(),
                    ));
                };
                let axes = self.g.add_tensor(
                    format!("{}_axes", node.output[0]),
                    vec![2],
                    Data::I32(vec![1, 2]),
                );
                self.emit(node, OpKind::Mean, vec![x, axes], vec![n, 1, 1, c])
                    .map(drop)
            }
            "Flatten" => {
                let x = self.value(input(0)?)?;
                let axis = node.attr_int("axis", 1);
                if axis != 1 {
                    return Err(Error::Unsupported(format!("Flatten axis {axis}")));
                }
                match *self.shape(x) {
                    [_, _] => self.alias(node, x),
                    // NHWC and NCHW flatten to the same order only when H = W = 1.
                    [n, 1, 1, c] => {
                        let shape = vec![n as i32, c as i32];
                        let st = self.g.add_tensor(
                            format!("{}_shape", node.output[0]),
                            vec![2],
                            Data::I32(shape.clone()),
                        );
                        self.emit(node, OpKind::Reshape { shape }, vec![x, st], vec![n, c])
                            .map(drop)
                    }
                    ref s => Err(Error::Unsupported(format!(
                        "Flatten of NHWC shape {s:?}: only [N, 1, 1, C] flattens in ONNX order"
                    ))),
                }
            }
            "Gemm" => self.gemm(node),
            "MaxPool" => self.max_pool(node),
            "Identity" | "Dropout" => {
                let x = self.value(input(0)?)?;
                self.alias(node, x)
            }
            other => Err(Error::Unsupported(format!("operator {other}"))),
        }
    }

    fn clip_act(&self, node: &NodeProto) -> Result<Act, Error> {
        let bound = |i: usize, attr: &str, default: f32| -> Result<f32, Error> {
            match node.input.get(i).map(String::as_str) {
                Some(name) if !name.is_empty() => {
                    let v = self.init(name)?.f32_values()?;
                    match v[..] {
                        [x] => Ok(x),
                        _ => Err(Error::Unsupported("Clip bound is not a scalar".into())),
                    }
                }
                _ => Ok(node.attr_float(attr, default)),
            }
        };
        let lo = bound(1, "min", f32::NEG_INFINITY)?;
        let hi = bound(2, "max", f32::INFINITY)?;
        match (lo, hi) {
            (0.0, 6.0) => Ok(Act::Relu6),
            (0.0, h) if h == f32::INFINITY => Ok(Act::Relu),
            _ => Err(Error::Unsupported(format!(
                "Clip({lo}, {hi}): only ReLU6 (0, 6) and ReLU (0, inf) are lowered"
            ))),
        }
    }

    /// ONNX's 2-D pads `[top, left, bottom, right]` as TFLite padding, plus the pads an
    /// explicit `PAD` has to add first (`[top, bottom, left, right]`), and the output size.
    fn padding(
        &self,
        node: &NodeProto,
        hw: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
    ) -> Result<Resolved, Error> {
        if let Some(a) = node.attr("auto_pad") {
            let mode = String::from_utf8_lossy(&a.s);
            if !(mode.is_empty() || mode == "NOTSET") {
                return Err(Error::Unsupported(format!("auto_pad {mode}")));
            }
        }
        if let Some(d) = node.attr_ints("dilations") {
            if d.iter().any(|&d| d != 1) {
                return Err(Error::Unsupported(format!("dilations {d:?}")));
            }
        }
        let pads = match node.attr_ints("pads") {
            None => [0; 4],
            Some(&[t, l, b, r]) if [t, l, b, r].iter().all(|&p| p >= 0) => {
                [t as usize, l as usize, b as usize, r as usize]
            }
            Some(p) => return Err(Error::Unsupported(format!("pads {p:?}"))),
        };
        let mut out = [0; 2];
        let mut same = true;
        for d in 0..2 {
            let (before, after) = (pads[d], pads[d + 2]);
            let total = hw[d] + before + after;
            if total < kernel[d] || stride[d] == 0 {
                return Err(Error::Onnx(format!(
                    "kernel {:?} / stride {:?} do not fit the padded input {hw:?}",
                    kernel, stride
                )));
            }
            out[d] = (total - kernel[d]) / stride[d] + 1;
            let same_out = hw[d].div_ceil(stride[d]);
            let same_total = ((same_out - 1) * stride[d] + kernel[d]).saturating_sub(hw[d]);
            same &= out[d] == same_out && before == same_total / 2;
        }
        if pads == [0; 4] {
            Ok((Padding::Valid, None, out))
        } else if same {
            Ok((Padding::Same, None, out))
        } else {
            Ok((
                Padding::Valid,
                Some([pads[0], pads[2], pads[1], pads[3]]),
                out,
            ))
        }
    }

    fn pad_first(&mut self, x: usize, pads: [usize; 4], value: Option<f32>) -> usize {
        let [n, h, w, c] = self.shape(x)[..] else {
            unreachable!("pads apply to 4-D tensors")
        };
        let [t, b, l, r] = pads;
        let name = format!("{}_padded", self.g.tensors[x].name);
        let paddings = self.g.add_tensor(
            format!("{name}_pads"),
            vec![4, 2],
            Data::I32(vec![0, 0, t as i32, b as i32, l as i32, r as i32, 0, 0]),
        );
        let y = self.g.add_tensor(
            name.clone(),
            vec![n, h + t + b, w + l + r, c],
            Data::Activation,
        );
        let op = match value {
            None => self.g.add_op(OpKind::Pad, vec![x, paddings], vec![y]),
            Some(v) => {
                let cv = self
                    .g
                    .add_tensor(format!("{name}_value"), vec![1], Data::F32(vec![v]));
                self.g.add_op(OpKind::PadV2, vec![x, paddings, cv], vec![y])
            }
        };
        self.producer.insert(y, op);
        y
    }

    fn strides(node: &NodeProto) -> Result<[usize; 2], Error> {
        match node.attr_ints("strides") {
            None => Ok([1, 1]),
            Some(&[a, b]) if a > 0 && b > 0 => Ok([a as usize, b as usize]),
            Some(s) => Err(Error::Unsupported(format!("strides {s:?}"))),
        }
    }

    fn conv(&mut self, node: &NodeProto) -> Result<(), Error> {
        let x = self.value(&node.input[0])?;
        let wp = self.init(node.input.get(1).map_or("", String::as_str))?;
        let w = wp.f32_values()?;
        let &[o, ipg, kh, kw] = &wp.dims[..] else {
            return Err(Error::Unsupported(format!(
                "Conv weights of dims {:?}",
                wp.dims
            )));
        };
        let (o, ipg, kh, kw) = (o as usize, ipg as usize, kh as usize, kw as usize);
        let bias = match node.input.get(2).map(String::as_str) {
            Some(b) if !b.is_empty() => {
                let b = self.init(b)?.f32_values()?;
                if b.len() != o {
                    return Err(Error::Onnx(format!(
                        "Conv bias has {} values for {o} outputs",
                        b.len()
                    )));
                }
                b
            }
            _ => vec![0.0; o],
        };
        let &[n, h, wd, c] = self.shape(x) else {
            return Err(Error::Unsupported("Conv of a non-4D tensor".into()));
        };
        let group = node.attr_int("group", 1) as usize;
        if group == 0 || c != ipg * group || o % group != 0 {
            return Err(Error::Onnx(format!(
                "Conv of {c} channels with weights {:?} and group {group}",
                wp.dims
            )));
        }
        if let Some(k) = node.attr_ints("kernel_shape") {
            if k != [kh as i64, kw as i64] {
                return Err(Error::Onnx(format!(
                    "kernel_shape {k:?} disagrees with the weights"
                )));
            }
        }
        let stride = Self::strides(node)?;
        let (padding, explicit, [oh, ow]) = self.padding(node, [h, wd], [kh, kw], stride)?;
        let x = match explicit {
            Some(p) => self.pad_first(x, p, None),
            None => x,
        };
        let base = node.output[0].clone();
        let (kind, weights, wshape) = if group == 1 {
            // OIHW → OHWI.
            let mut t = vec![0.0; w.len()];
            for oo in 0..o {
                for ii in 0..ipg {
                    for y in 0..kh {
                        for xx in 0..kw {
                            t[((oo * kh + y) * kw + xx) * ipg + ii] =
                                w[((oo * ipg + ii) * kh + y) * kw + xx];
                        }
                    }
                }
            }
            (
                OpKind::Conv {
                    stride,
                    padding,
                    act: Act::None,
                },
                t,
                vec![o, kh, kw, ipg],
            )
        } else if ipg == 1 && group == c {
            // [C·M, 1, KH, KW] → [1, KH, KW, C·M].
            let mut t = vec![0.0; w.len()];
            for oo in 0..o {
                for y in 0..kh {
                    for xx in 0..kw {
                        t[(y * kw + xx) * o + oo] = w[(oo * kh + y) * kw + xx];
                    }
                }
            }
            let kind = OpKind::Depthwise {
                stride,
                padding,
                multiplier: o / c,
                act: Act::None,
            };
            (kind, t, vec![1, kh, kw, o])
        } else {
            return Err(Error::Unsupported(format!(
                "grouped Conv with {group} groups of {ipg} channels (only dense and depthwise)"
            )));
        };
        let wt = self
            .g
            .add_tensor(format!("{base}_weights"), wshape, Data::F32(weights));
        let bt = self
            .g
            .add_tensor(format!("{base}_bias"), vec![o], Data::F32(bias));
        self.emit(node, kind, vec![x, wt, bt], vec![n, oh, ow, o])
            .map(drop)
    }

    /// A constant operand of an element-wise op, in the layout of the activation it meets.
    fn broadcast_constant(&mut self, name: &str, other_rank: usize) -> Result<usize, Error> {
        let t = self.init(name)?;
        let v = t.f32_values()?;
        let dims: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
        let (shape, data) = match (other_rank, &dims[..]) {
            (_, []) => (vec![1], v),
            (_, &[1]) => (vec![1], v),
            (2, &[m]) => (vec![m], v),
            (2, &[a, b]) => (vec![a, b], v),
            (4, &[cc, hh, ww]) | (4, &[1, cc, hh, ww]) => {
                let mut out = vec![0.0; v.len()];
                for ci in 0..cc {
                    for y in 0..hh {
                        for xx in 0..ww {
                            out[(y * ww + xx) * cc + ci] = v[(ci * hh + y) * ww + xx];
                        }
                    }
                }
                let shape = if dims.len() == 3 {
                    vec![hh, ww, cc]
                } else {
                    vec![1, hh, ww, cc]
                };
                (shape, out)
            }
            _ => {
                return Err(Error::Unsupported(format!(
                    "constant {name} of dims {dims:?} broadcast against a rank-{other_rank} value"
                )))
            }
        };
        Ok(self.g.add_tensor(name.to_string(), shape, Data::F32(data)))
    }

    fn binary(&mut self, node: &NodeProto) -> Result<(), Error> {
        let (a_name, b_name) = match &node.input[..] {
            [a, b] => (a.as_str(), b.as_str()),
            _ => return Err(Error::Onnx("element-wise op without two inputs".into())),
        };
        let a_const = self.inits.contains_key(a_name);
        let b_const = self.inits.contains_key(b_name);
        let (a, b) = match (a_const, b_const) {
            (false, false) => (self.value(a_name)?, self.value(b_name)?),
            (false, true) => {
                let a = self.value(a_name)?;
                let r = self.shape(a).len();
                (a, self.broadcast_constant(b_name, r)?)
            }
            (true, false) => {
                let b = self.value(b_name)?;
                let r = self.shape(b).len();
                (self.broadcast_constant(a_name, r)?, b)
            }
            (true, true) => {
                return Err(Error::Unsupported(
                    "element-wise op of two constants".into(),
                ))
            }
        };
        let shape = broadcast(self.shape(a), self.shape(b)).ok_or_else(|| {
            Error::Onnx(format!(
                "shapes {:?} and {:?} do not broadcast",
                self.shape(a),
                self.shape(b)
            ))
        })?;
        let kind = if node.op_type == "Add" {
            OpKind::Add { act: Act::None }
        } else {
            OpKind::Mul { act: Act::None }
        };
        self.emit(node, kind, vec![a, b], shape).map(drop)
    }

    fn batch_norm(&mut self, node: &NodeProto, sole_reader: bool) -> Result<(), Error> {
        let x = self.value(&node.input[0])?;
        let param = |i: usize| -> Result<Vec<f32>, Error> {
            self.init(node.input.get(i).map_or("", String::as_str))?
                .f32_values()
        };
        let (gamma, beta, mean, var) = (param(1)?, param(2)?, param(3)?, param(4)?);
        let eps = node.attr_float("epsilon", 1e-5);
        let c = *self.shape(x).last().unwrap_or(&0);
        if [&gamma, &beta, &mean, &var].iter().any(|v| v.len() != c) {
            return Err(Error::Onnx(format!(
                "BatchNormalization parameters for {c} channels"
            )));
        }
        let k: Vec<f32> = gamma
            .iter()
            .zip(&var)
            .map(|(g, v)| g / (v + eps).sqrt())
            .collect();
        let s: Vec<f32> = beta
            .iter()
            .zip(&mean)
            .zip(&k)
            .map(|((b, m), k)| b - m * k)
            .collect();
        if sole_reader {
            if let Some(&op) = self.producer.get(&x) {
                let foldable = matches!(
                    self.g.ops[op].kind,
                    OpKind::Conv { act: Act::None, .. } | OpKind::Depthwise { act: Act::None, .. }
                );
                if foldable {
                    let (wt, bt) = (self.g.ops[op].inputs[1], self.g.ops[op].inputs[2]);
                    let depthwise = matches!(self.g.ops[op].kind, OpKind::Depthwise { .. });
                    if let Data::F32(w) = &mut self.g.tensors[wt].data {
                        let per_out = w.len() / c;
                        for (i, v) in w.iter_mut().enumerate() {
                            // OHWI: output channel outermost; depthwise [1, H, W, O]: innermost.
                            let o = if depthwise { i % c } else { i / per_out };
                            *v *= k[o];
                        }
                    }
                    if let Data::F32(b) = &mut self.g.tensors[bt].data {
                        for (o, v) in b.iter_mut().enumerate() {
                            *v = *v * k[o] + s[o];
                        }
                    }
                    self.g.tensors[x].name = node.output[0].clone();
                    return self.alias(node, x);
                }
            }
        }
        let base = node.output[0].clone();
        let shape = self.shape(x).to_vec();
        let kt = self
            .g
            .add_tensor(format!("{base}_scale"), vec![c], Data::F32(k));
        let st = self
            .g
            .add_tensor(format!("{base}_shift"), vec![c], Data::F32(s));
        let scaled = self
            .g
            .add_tensor(format!("{base}_scaled"), shape.clone(), Data::Activation);
        let op = self
            .g
            .add_op(OpKind::Mul { act: Act::None }, vec![x, kt], vec![scaled]);
        self.producer.insert(scaled, op);
        self.emit(
            node,
            OpKind::Add { act: Act::None },
            vec![scaled, st],
            shape,
        )
        .map(drop)
    }

    fn gemm(&mut self, node: &NodeProto) -> Result<(), Error> {
        let x = self.value(&node.input[0])?;
        let &[n, k] = self.shape(x) else {
            return Err(Error::Unsupported(format!(
                "Gemm of shape {:?}",
                self.shape(x)
            )));
        };
        if node.attr_int("transA", 0) != 0 {
            return Err(Error::Unsupported("Gemm transA".into()));
        }
        let (alpha, beta) = (node.attr_float("alpha", 1.0), node.attr_float("beta", 1.0));
        let bp = self.init(node.input.get(1).map_or("", String::as_str))?;
        let b = bp.f32_values()?;
        let trans_b = node.attr_int("transB", 0) != 0;
        let &[d0, d1] = &bp.dims[..] else {
            return Err(Error::Onnx(format!("Gemm B of dims {:?}", bp.dims)));
        };
        let (kk, m) = if trans_b {
            (d1 as usize, d0 as usize)
        } else {
            (d0 as usize, d1 as usize)
        };
        if kk != k {
            return Err(Error::Onnx(format!(
                "Gemm of [{n}, {k}] by B of dims {:?}",
                bp.dims
            )));
        }
        // FULLY_CONNECTED takes [out, in]; alpha scales the weights.
        let mut w = vec![0.0; m * k];
        for i in 0..k {
            for j in 0..m {
                let v = if trans_b { b[j * k + i] } else { b[i * m + j] };
                w[j * k + i] = alpha * v;
            }
        }
        let bias = match node.input.get(2).map(String::as_str) {
            Some(c) if !c.is_empty() => {
                let c = self.init(c)?.f32_values()?;
                if c.len() != m {
                    return Err(Error::Unsupported(format!(
                        "Gemm C of {} values for {m} outputs",
                        c.len()
                    )));
                }
                c.iter().map(|v| beta * v).collect()
            }
            _ => vec![0.0; m],
        };
        let base = node.output[0].clone();
        let wt = self
            .g
            .add_tensor(format!("{base}_weights"), vec![m, k], Data::F32(w));
        let bt = self
            .g
            .add_tensor(format!("{base}_bias"), vec![m], Data::F32(bias));
        self.emit(
            node,
            OpKind::FullyConnected { act: Act::None },
            vec![x, wt, bt],
            vec![n, m],
        )
        .map(drop)
    }

    fn max_pool(&mut self, node: &NodeProto) -> Result<(), Error> {
        let x = self.value(&node.input[0])?;
        let &[n, h, w, c] = self.shape(x) else {
            return Err(Error::Unsupported("MaxPool of a non-4D tensor".into()));
        };
        if node.attr_int("ceil_mode", 0) != 0 || node.attr_int("storage_order", 0) != 0 {
            return Err(Error::Unsupported(
                "MaxPool ceil_mode / storage_order".into(),
            ));
        }
        if node.output.len() > 1 {
            return Err(Error::Unsupported("MaxPool indices output".into()));
        }
        let filter = match node.attr_ints("kernel_shape") {
            Some(&[a, b]) if a > 0 && b > 0 => [a as usize, b as usize],
            k => return Err(Error::Unsupported(format!("MaxPool kernel_shape {k:?}"))),
        };
        let stride = Self::strides(node)?;
        let (padding, explicit, [oh, ow]) = self.padding(node, [h, w], filter, stride)?;
        let x = match explicit {
            // ONNX max pooling never picks a padded element: pad with the lowest float.
            Some(p) => self.pad_first(x, p, Some(f32::MIN)),
            None => x,
        };
        self.emit(
            node,
            OpKind::MaxPool {
                stride,
                filter,
                padding,
            },
            vec![x],
            vec![n, oh, ow, c],
        )
        .map(drop)
    }
}

/// TFLite padding, the pads an explicit `PAD` adds first (`[top, bottom, left, right]`),
/// and the output size.
type Resolved = (Padding, Option<[usize; 4]>, [usize; 2]);

/// Numpy broadcasting of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= r {
            s[i + s.len() - r]
        } else {
            1
        }
    };
    (0..r)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}
