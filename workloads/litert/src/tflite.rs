//! Serializes a graph as a `.tflite` FlatBuffer (schema v3, `TFL3`), table by table with the
//! low-level builder. Slot numbers and enum values are the TFLite schema's
//! (`tensorflow/compiler/mlir/lite/schema/schema.fbs`); a field's vtable offset is `4 + 2·slot`.

use flatbuffers::{FlatBufferBuilder, Push, PushAlignment, WIPOffset};

use crate::ir::{Act, OpKind, Padding};

/// `TensorType`.
pub mod tensor_type {
    pub const FLOAT32: u8 = 0;
    pub const INT32: u8 = 2;
    pub const INT8: u8 = 9;
}

/// Per-tensor or per-axis affine quantization: `real = scale · (q − zero_point)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quant {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i64>,
    pub dimension: i32,
}

#[derive(Debug, Clone)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<i32>,
    pub ty: u8,
    /// Constant contents, little-endian.
    pub data: Option<Vec<u8>>,
    pub quant: Option<Quant>,
}

#[derive(Debug, Clone)]
pub struct Op {
    pub kind: OpKind,
    pub inputs: Vec<i32>,
    pub outputs: Vec<i32>,
}

/// A single-subgraph model with one signature (`serving_default`).
#[derive(Debug, Clone)]
pub struct Model {
    pub tensors: Vec<Tensor>,
    pub ops: Vec<Op>,
    /// (signature name, tensor).
    pub inputs: Vec<(String, usize)>,
    pub outputs: Vec<(String, usize)>,
    /// Whether the ops compute on int8 (selects the operator versions).
    pub int8: bool,
}

const fn slot(n: u16) -> flatbuffers::VOffsetT {
    4 + 2 * n
}

mod builtin {
    pub const ADD: i32 = 0;
    pub const CONV_2D: i32 = 3;
    pub const DEPTHWISE_CONV_2D: i32 = 4;
    pub const DEQUANTIZE: i32 = 6;
    pub const FULLY_CONNECTED: i32 = 9;
    pub const LOGISTIC: i32 = 14;
    pub const MAX_POOL_2D: i32 = 17;
    pub const MUL: i32 = 18;
    pub const RELU: i32 = 19;
    pub const RELU6: i32 = 21;
    pub const RESHAPE: i32 = 22;
    pub const PAD: i32 = 34;
    pub const MEAN: i32 = 40;
    pub const PADV2: i32 = 60;
    pub const QUANTIZE: i32 = 114;
}

/// `BuiltinOptions` union members.
mod options {
    pub const NONE: u8 = 0;
    pub const CONV_2D: u8 = 1;
    pub const DEPTHWISE_CONV_2D: u8 = 2;
    pub const POOL_2D: u8 = 5;
    pub const FULLY_CONNECTED: u8 = 8;
    pub const ADD: u8 = 11;
    pub const RESHAPE: u8 = 17;
    pub const MUL: u8 = 21;
    pub const PAD: u8 = 22;
    pub const REDUCER: u8 = 27;
    pub const DEQUANTIZE: u8 = 38;
    pub const PADV2: u8 = 43;
    pub const QUANTIZE: u8 = 89;
}

fn act_code(a: Act) -> u8 {
    match a {
        Act::None => 0,
        Act::Relu => 1,
        Act::Relu6 => 3,
    }
}

fn padding_code(p: Padding) -> u8 {
    match p {
        Padding::Same => 0,
        Padding::Valid => 1,
    }
}

/// (builtin code, operator version). The versions are the ones TFLite's converter writes for
/// these ops on float and on int8 (per-channel) tensors.
fn code_and_version(kind: &OpKind, int8: bool) -> (i32, i32) {
    let v = |f: i32, q: i32| if int8 { q } else { f };
    match kind {
        OpKind::Conv { .. } => (builtin::CONV_2D, v(1, 3)),
        OpKind::Depthwise { multiplier, .. } => (
            builtin::DEPTHWISE_CONV_2D,
            if int8 {
                3
            } else if *multiplier > 1 {
                2
            } else {
                1
            },
        ),
        OpKind::FullyConnected { .. } => (builtin::FULLY_CONNECTED, v(1, 4)),
        OpKind::MaxPool { .. } => (builtin::MAX_POOL_2D, v(1, 2)),
        OpKind::Mean => (builtin::MEAN, v(1, 2)),
        OpKind::Add { .. } => (builtin::ADD, v(1, 2)),
        OpKind::Mul { .. } => (builtin::MUL, v(1, 2)),
        OpKind::Logistic => (builtin::LOGISTIC, v(1, 2)),
        OpKind::Relu => (builtin::RELU, v(1, 2)),
        OpKind::Relu6 => (builtin::RELU6, v(1, 2)),
        OpKind::Reshape { .. } => (builtin::RESHAPE, 1),
        OpKind::Pad => (builtin::PAD, v(1, 3)),
        OpKind::PadV2 => (builtin::PADV2, v(1, 2)),
        OpKind::Quantize => (builtin::QUANTIZE, 2),
        OpKind::Dequantize => (builtin::DEQUANTIZE, 2),
    }
}

/// Pushing one of these raises the buffer's alignment to 16 bytes, so constant data placed at
/// a 16-byte distance from the end lands 16-byte aligned in the finished buffer.
#[derive(Clone, Copy)]
struct Align16;

impl Push for Align16 {
    type Output = Align16;
    unsafe fn push(&self, dst: &mut [u8], _written_len: usize) {
        dst[..16].fill(0);
    }
    fn size() -> usize {
        16
    }
    fn alignment() -> PushAlignment {
        PushAlignment::new(16)
    }
}

/// A byte vector whose first byte is 16-byte aligned (TFLite's converter aligns buffers so;
/// kernels read weights in place).
fn aligned_bytes<'a>(
    fbb: &mut FlatBufferBuilder<'a>,
    data: &[u8],
) -> WIPOffset<flatbuffers::Vector<'a, u8>> {
    let used = fbb.unfinished_data().len();
    // The length prefix (4 bytes) follows the data; create_vector aligns (used + len) to 4, so
    // padding `used + len` to 16 first leaves that alignment as it is.
    let pad = (16 - (used + data.len()) % 16) % 16;
    for _ in 0..pad {
        fbb.push(0u8);
    }
    fbb.create_vector(data)
}

pub fn serialize(m: &Model) -> Vec<u8> {
    let data_bytes: usize = m
        .tensors
        .iter()
        .filter_map(|t| t.data.as_ref())
        .map(Vec::len)
        .sum();
    let mut fbb = FlatBufferBuilder::with_capacity(data_bytes + 64 * m.tensors.len() + 4096);
    fbb.push(Align16);

    // Buffers: 0 is the empty sentinel every activation points at.
    let mut buffer_of = vec![0u32; m.tensors.len()];
    let mut buffers = Vec::new();
    let empty = fbb.start_table();
    buffers.push(fbb.end_table(empty));
    for (i, t) in m.tensors.iter().enumerate() {
        if let Some(d) = &t.data {
            let v = aligned_bytes(&mut fbb, d);
            let b = fbb.start_table();
            fbb.push_slot_always(slot(0), v);
            buffers.push(fbb.end_table(b));
            buffer_of[i] = (buffers.len() - 1) as u32;
        }
    }

    let mut tensors = Vec::with_capacity(m.tensors.len());
    for (i, t) in m.tensors.iter().enumerate() {
        let shape = fbb.create_vector(&t.shape);
        let name = fbb.create_string(&t.name);
        let quant = t.quant.as_ref().map(|q| {
            let scale = fbb.create_vector(&q.scale);
            let zero = fbb.create_vector(&q.zero_point);
            let qt = fbb.start_table();
            fbb.push_slot_always(slot(2), scale);
            fbb.push_slot_always(slot(3), zero);
            fbb.push_slot(slot(6), q.dimension, 0);
            fbb.end_table(qt)
        });
        let tt = fbb.start_table();
        fbb.push_slot_always(slot(0), shape);
        fbb.push_slot_always(slot(1), t.ty);
        fbb.push_slot_always(slot(2), buffer_of[i]);
        fbb.push_slot_always(slot(3), name);
        if let Some(q) = quant {
            fbb.push_slot_always(slot(4), q);
        }
        tensors.push(fbb.end_table(tt));
    }

    let mut codes: Vec<(i32, i32)> = Vec::new();
    let mut operators = Vec::with_capacity(m.ops.len());
    for op in &m.ops {
        let cv = code_and_version(&op.kind, m.int8);
        let opcode_index = match codes.iter().position(|c| *c == cv) {
            Some(i) => i,
            None => {
                codes.push(cv);
                codes.len() - 1
            }
        } as u32;
        let inputs = fbb.create_vector(&op.inputs);
        let outputs = fbb.create_vector(&op.outputs);
        let (options_type, options) = builtin_options(&mut fbb, &op.kind);
        let ot = fbb.start_table();
        fbb.push_slot_always(slot(0), opcode_index);
        fbb.push_slot_always(slot(1), inputs);
        fbb.push_slot_always(slot(2), outputs);
        if let Some(o) = options {
            fbb.push_slot_always(slot(3), options_type);
            fbb.push_slot_always(slot(4), o);
        }
        operators.push(fbb.end_table(ot));
    }

    let opcodes: Vec<_> = codes
        .iter()
        .map(|&(code, version)| {
            let t = fbb.start_table();
            // Codes above 127 live in builtin_code only; the deprecated int8 field then holds
            // PLACEHOLDER_FOR_GREATER_OP_CODES (127).
            fbb.push_slot_always(slot(0), code.min(127) as i8);
            fbb.push_slot_always(slot(2), version);
            fbb.push_slot_always(slot(3), code);
            fbb.end_table(t)
        })
        .collect();

    let tensors = fbb.create_vector(&tensors);
    let sg_inputs: Vec<i32> = m.inputs.iter().map(|(_, t)| *t as i32).collect();
    let sg_outputs: Vec<i32> = m.outputs.iter().map(|(_, t)| *t as i32).collect();
    let sg_inputs = fbb.create_vector(&sg_inputs);
    let sg_outputs = fbb.create_vector(&sg_outputs);
    let operators = fbb.create_vector(&operators);
    let sg_name = fbb.create_string("main");
    let sg = fbb.start_table();
    fbb.push_slot_always(slot(0), tensors);
    fbb.push_slot_always(slot(1), sg_inputs);
    fbb.push_slot_always(slot(2), sg_outputs);
    fbb.push_slot_always(slot(3), operators);
    fbb.push_slot_always(slot(4), sg_name);
    let sg = fbb.end_table(sg);

    let sig_inputs = tensor_maps(&mut fbb, &m.inputs);
    let sig_outputs = tensor_maps(&mut fbb, &m.outputs);
    let key = fbb.create_string("serving_default");
    let sd = fbb.start_table();
    fbb.push_slot_always(slot(0), sig_inputs);
    fbb.push_slot_always(slot(1), sig_outputs);
    fbb.push_slot_always(slot(2), key);
    fbb.push_slot_always(slot(4), 0u32);
    let sd = fbb.end_table(sd);

    let opcodes = fbb.create_vector(&opcodes);
    let subgraphs = fbb.create_vector(&[sg]);
    let description = fbb.create_string("greenpipe-litert");
    let buffers = fbb.create_vector(&buffers);
    let signatures = fbb.create_vector(&[sd]);
    let model = fbb.start_table();
    fbb.push_slot_always(slot(0), 3u32);
    fbb.push_slot_always(slot(1), opcodes);
    fbb.push_slot_always(slot(2), subgraphs);
    fbb.push_slot_always(slot(3), description);
    fbb.push_slot_always(slot(4), buffers);
    fbb.push_slot_always(slot(7), signatures);
    let model = fbb.end_table(model);
    fbb.finish(model, Some("TFL3"));
    fbb.finished_data().to_vec()
}

type Tables<'a> =
    flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<flatbuffers::TableFinishedWIPOffset>>;

/// Signature `TensorMap`s.
fn tensor_maps<'a>(
    fbb: &mut FlatBufferBuilder<'a>,
    list: &[(String, usize)],
) -> WIPOffset<Tables<'a>> {
    let items: Vec<_> = list
        .iter()
        .map(|(name, t)| {
            let name = fbb.create_string(name);
            let tm = fbb.start_table();
            fbb.push_slot_always(slot(0), name);
            fbb.push_slot_always(slot(1), *t as u32);
            fbb.end_table(tm)
        })
        .collect();
    fbb.create_vector(&items)
}

fn builtin_options(
    fbb: &mut FlatBufferBuilder,
    kind: &OpKind,
) -> (u8, Option<WIPOffset<flatbuffers::TableFinishedWIPOffset>>) {
    let empty = |fbb: &mut FlatBufferBuilder, ty: u8| {
        let t = fbb.start_table();
        (ty, Some(fbb.end_table(t)))
    };
    match kind {
        OpKind::Conv {
            stride,
            padding,
            act,
        } => {
            let t = fbb.start_table();
            fbb.push_slot_always(slot(0), padding_code(*padding));
            fbb.push_slot_always(slot(1), stride[1] as i32);
            fbb.push_slot_always(slot(2), stride[0] as i32);
            fbb.push_slot_always(slot(3), act_code(*act));
            fbb.push_slot_always(slot(4), 1i32);
            fbb.push_slot_always(slot(5), 1i32);
            (options::CONV_2D, Some(fbb.end_table(t)))
        }
        OpKind::Depthwise {
            stride,
            padding,
            multiplier,
            act,
        } => {
            let t = fbb.start_table();
            fbb.push_slot_always(slot(0), padding_code(*padding));
            fbb.push_slot_always(slot(1), stride[1] as i32);
            fbb.push_slot_always(slot(2), stride[0] as i32);
            fbb.push_slot_always(slot(3), *multiplier as i32);
            fbb.push_slot_always(slot(4), act_code(*act));
            fbb.push_slot_always(slot(5), 1i32);
            fbb.push_slot_always(slot(6), 1i32);
            (options::DEPTHWISE_CONV_2D, Some(fbb.end_table(t)))
        }
        OpKind::FullyConnected { act } => {
            let t = fbb.start_table();
            fbb.push_slot_always(slot(0), act_code(*act));
            fbb.push_slot_always(slot(2), false);
            (options::FULLY_CONNECTED, Some(fbb.end_table(t)))
        }
        OpKind::MaxPool {
            stride,
            filter,
            padding,
        } => {
            let t = fbb.start_table();
            fbb.push_slot_always(slot(0), padding_code(*padding));
            fbb.push_slot_always(slot(1), stride[1] as i32);
            fbb.push_slot_always(slot(2), stride[0] as i32);
            fbb.push_slot_always(slot(3), filter[1] as i32);
            fbb.push_slot_always(slot(4), filter[0] as i32);
            fbb.push_slot_always(slot(5), 0u8);
            (options::POOL_2D, Some(fbb.end_table(t)))
        }
        OpKind::Mean => {
            let t = fbb.start_table();
            fbb.push_slot_always(slot(0), true);
            (options::REDUCER, Some(fbb.end_table(t)))
        }
        OpKind::Add { act } => {
            let t = fbb.start_table();
            fbb.push_slot_always(slot(0), act_code(*act));
            (options::ADD, Some(fbb.end_table(t)))
        }
        OpKind::Mul { act } => {
            let t = fbb.start_table();
            fbb.push_slot_always(slot(0), act_code(*act));
            (options::MUL, Some(fbb.end_table(t)))
        }
        OpKind::Reshape { shape } => {
            let v = fbb.create_vector(shape);
            let t = fbb.start_table();
            fbb.push_slot_always(slot(0), v);
            (options::RESHAPE, Some(fbb.end_table(t)))
        }
        OpKind::Pad => empty(fbb, options::PAD),
        OpKind::PadV2 => empty(fbb, options::PADV2),
        OpKind::Quantize => empty(fbb, options::QUANTIZE),
        OpKind::Dequantize => empty(fbb, options::DEQUANTIZE),
        OpKind::Logistic | OpKind::Relu | OpKind::Relu6 => (options::NONE, None),
    }
}
