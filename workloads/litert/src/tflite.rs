//! Serializes a graph as a `.tflite` FlatBuffer (schema v3, `TFL3`) through the tables planus
//! generates from TensorFlow Lite's own schema (`schema/schema.fbs`, build.rs): field slots,
//! enum values and defaults come from the schema, not from this file.

use planus::{Builder, Offset};

use crate::ir::{Act, OpKind, Padding};

/// The generated tables (namespace `tflite`).
pub mod schema {
    #![allow(clippy::all, dead_code, missing_docs, unused_imports)]
    include!(concat!(env!("OUT_DIR"), "/tflite.rs"));
}

pub use schema::tflite::TensorType;
use schema::tflite::{
    ActivationFunctionType, AddOptions, Buffer, BuiltinOperator, BuiltinOptions, Conv2DOptions,
    DepthwiseConv2DOptions, FullyConnectedOptions, MulOptions, Operator, OperatorCode,
    Pool2DOptions, QuantizationParameters, ReducerOptions, ReshapeOptions, SignatureDef, SubGraph,
    TensorMap,
};

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
    pub ty: TensorType,
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

fn activation(a: Act) -> ActivationFunctionType {
    match a {
        Act::None => ActivationFunctionType::None,
        Act::Relu => ActivationFunctionType::Relu,
        Act::Relu6 => ActivationFunctionType::Relu6,
    }
}

fn padding(p: Padding) -> schema::tflite::Padding {
    match p {
        Padding::Same => schema::tflite::Padding::Same,
        Padding::Valid => schema::tflite::Padding::Valid,
    }
}

/// (builtin operator, operator version). The versions are the ones TFLite's converter writes
/// for these ops on float and on int8 (per-channel) tensors.
fn code_and_version(kind: &OpKind, int8: bool) -> (BuiltinOperator, i32) {
    let v = |f: i32, q: i32| if int8 { q } else { f };
    match kind {
        OpKind::Conv { .. } => (BuiltinOperator::Conv2d, v(1, 3)),
        OpKind::Depthwise { multiplier, .. } => (
            BuiltinOperator::DepthwiseConv2d,
            if int8 {
                3
            } else if *multiplier > 1 {
                2
            } else {
                1
            },
        ),
        OpKind::FullyConnected { .. } => (BuiltinOperator::FullyConnected, v(1, 4)),
        OpKind::MaxPool { .. } => (BuiltinOperator::MaxPool2d, v(1, 2)),
        OpKind::Mean => (BuiltinOperator::Mean, v(1, 2)),
        OpKind::Add { .. } => (BuiltinOperator::Add, v(1, 2)),
        OpKind::Mul { .. } => (BuiltinOperator::Mul, v(1, 2)),
        OpKind::Logistic => (BuiltinOperator::Logistic, v(1, 2)),
        OpKind::Relu => (BuiltinOperator::Relu, v(1, 2)),
        OpKind::Relu6 => (BuiltinOperator::Relu6, v(1, 2)),
        OpKind::Reshape { .. } => (BuiltinOperator::Reshape, 1),
        OpKind::Pad => (BuiltinOperator::Pad, v(1, 3)),
        OpKind::PadV2 => (BuiltinOperator::Padv2, v(1, 2)),
        OpKind::Quantize => (BuiltinOperator::Quantize, 2),
        OpKind::Dequantize => (BuiltinOperator::Dequantize, 2),
    }
}

fn builtin_options(kind: &OpKind) -> Option<BuiltinOptions> {
    Some(match kind {
        OpKind::Conv {
            stride,
            padding: p,
            act,
        } => BuiltinOptions::Conv2DOptions(Box::new(Conv2DOptions {
            padding: padding(*p),
            stride_w: stride[1] as i32,
            stride_h: stride[0] as i32,
            fused_activation_function: activation(*act),
            ..Default::default()
        })),
        OpKind::Depthwise {
            stride,
            padding: p,
            multiplier,
            act,
        } => BuiltinOptions::DepthwiseConv2DOptions(Box::new(DepthwiseConv2DOptions {
            padding: padding(*p),
            stride_w: stride[1] as i32,
            stride_h: stride[0] as i32,
            depth_multiplier: *multiplier as i32,
            fused_activation_function: activation(*act),
            ..Default::default()
        })),
        OpKind::FullyConnected { act } => {
            BuiltinOptions::FullyConnectedOptions(Box::new(FullyConnectedOptions {
                fused_activation_function: activation(*act),
                ..Default::default()
            }))
        }
        OpKind::MaxPool {
            stride,
            filter,
            padding: p,
        } => BuiltinOptions::Pool2DOptions(Box::new(Pool2DOptions {
            padding: padding(*p),
            stride_w: stride[1] as i32,
            stride_h: stride[0] as i32,
            filter_width: filter[1] as i32,
            filter_height: filter[0] as i32,
            ..Default::default()
        })),
        OpKind::Mean => {
            BuiltinOptions::ReducerOptions(Box::new(ReducerOptions { keep_dims: true }))
        }
        OpKind::Add { act } => BuiltinOptions::AddOptions(Box::new(AddOptions {
            fused_activation_function: activation(*act),
            ..Default::default()
        })),
        OpKind::Mul { act } => BuiltinOptions::MulOptions(Box::new(MulOptions {
            fused_activation_function: activation(*act),
        })),
        OpKind::Reshape { shape } => BuiltinOptions::ReshapeOptions(Box::new(ReshapeOptions {
            new_shape: Some(shape.clone()),
        })),
        OpKind::Pad => BuiltinOptions::PadOptions(Box::default()),
        OpKind::PadV2 => BuiltinOptions::PadV2Options(Box::default()),
        OpKind::Quantize => BuiltinOptions::QuantizeOptions(Box::default()),
        OpKind::Dequantize => BuiltinOptions::DequantizeOptions(Box::default()),
        OpKind::Logistic | OpKind::Relu | OpKind::Relu6 => return None,
    })
}

/// A `[ubyte]` vector whose first byte is 16-byte aligned in the finished buffer, as the
/// schema's `Buffer.data (force_align: 16)` asks (TFLite's converter aligns buffers so; kernels
/// read weights in place). planus's vectors are only 4-byte aligned, so this writes the vector
/// as its own `[T]` impl does, with the larger alignment; `write_with` and `current_offset` are
/// the builder calls that generated code makes, so they hold for the planus version it needs.
fn aligned_bytes(builder: &mut Builder, data: &[u8]) -> Offset<[u8]> {
    // SAFETY: each closure initialises every byte of the slice it is handed (`data.len()` bytes,
    // then the 4-byte length prefix, which lands 4-byte aligned just before the data).
    unsafe {
        builder.write_with(data.len(), 15, |_, bytes| {
            for (b, &v) in bytes.iter_mut().zip(data) {
                b.write(v);
            }
        });
        let len = u32::try_from(data.len()).expect("a FlatBuffer vector below 4 GiB");
        builder.write_with(4, 0, |_, bytes| {
            for (b, v) in bytes.iter_mut().zip(len.to_le_bytes()) {
                b.write(v);
            }
        });
    }
    builder.current_offset()
}

fn tensor_maps(list: &[(String, usize)]) -> Vec<TensorMap> {
    list.iter()
        .map(|(name, t)| TensorMap {
            name: Some(name.clone()),
            tensor_index: *t as u32,
        })
        .collect()
}

pub fn serialize(m: &Model) -> Vec<u8> {
    let data_bytes: usize = m
        .tensors
        .iter()
        .filter_map(|t| t.data.as_ref())
        .map(Vec::len)
        .sum();
    let mut builder = Builder::with_capacity(data_bytes + 64 * m.tensors.len() + 4096);

    // Buffers: 0 is the empty sentinel every activation points at. Written first and by
    // offset, so that the weights are copied once, into the FlatBuffer.
    let mut buffer_of = vec![0u32; m.tensors.len()];
    let mut buffers = vec![Buffer::create(&mut builder, ())];
    for (i, t) in m.tensors.iter().enumerate() {
        if let Some(d) = &t.data {
            let data = aligned_bytes(&mut builder, d);
            buffers.push(Buffer::create(&mut builder, data));
            buffer_of[i] = (buffers.len() - 1) as u32;
        }
    }
    let buffers = builder.create_vector(&buffers);

    let tensors = m
        .tensors
        .iter()
        .zip(&buffer_of)
        .map(|(t, &buffer)| schema::tflite::Tensor {
            shape: Some(t.shape.clone()),
            type_: t.ty,
            buffer,
            name: Some(t.name.clone()),
            quantization: t.quant.as_ref().map(|q| {
                Box::new(QuantizationParameters {
                    scale: Some(q.scale.clone()),
                    zero_point: Some(q.zero_point.clone()),
                    quantized_dimension: q.dimension,
                    ..Default::default()
                })
            }),
            ..Default::default()
        })
        .collect();

    let mut codes: Vec<(BuiltinOperator, i32)> = Vec::new();
    let operators = m
        .ops
        .iter()
        .map(|op| {
            let cv = code_and_version(&op.kind, m.int8);
            let opcode_index = codes.iter().position(|c| *c == cv).unwrap_or_else(|| {
                codes.push(cv);
                codes.len() - 1
            }) as u32;
            Operator {
                opcode_index,
                inputs: Some(op.inputs.clone()),
                outputs: Some(op.outputs.clone()),
                builtin_options: builtin_options(&op.kind),
                ..Default::default()
            }
        })
        .collect();
    let operator_codes: Vec<OperatorCode> = codes
        .iter()
        .map(|&(code, version)| OperatorCode {
            // Codes above 127 live in builtin_code only; the deprecated int8 field then holds
            // PLACEHOLDER_FOR_GREATER_OP_CODES (127).
            deprecated_builtin_code: (code as i32)
                .min(BuiltinOperator::PlaceholderForGreaterOpCodes as i32)
                as i8,
            version,
            builtin_code: code,
            ..Default::default()
        })
        .collect();

    let subgraph = SubGraph {
        tensors: Some(tensors),
        inputs: Some(m.inputs.iter().map(|(_, t)| *t as i32).collect()),
        outputs: Some(m.outputs.iter().map(|(_, t)| *t as i32).collect()),
        operators: Some(operators),
        name: Some("main".into()),
    };
    let signature = SignatureDef {
        inputs: Some(tensor_maps(&m.inputs)),
        outputs: Some(tensor_maps(&m.outputs)),
        signature_key: Some("serving_default".into()),
        subgraph_index: 0,
    };
    let model = schema::tflite::Model::builder()
        .version(3)
        .operator_codes(operator_codes)
        .subgraphs(vec![subgraph])
        .description("greenpipe-litert")
        .buffers(buffers)
        .metadata_buffer_as_null()
        .metadata_as_null()
        .signature_defs(vec![signature]);
    header_in_order(builder.finish(model, Some(IDENTIFIER)).to_vec())
}

const IDENTIFIER: [u8; 4] = *b"TFL3";

/// planus 1.3's `Builder::finish` writes the file identifier before the root offset, where
/// FlatBuffers (and LiteRT) expect it after (planus-org/planus#377, "the two were previously
/// swapped"): this swaps them back, the offset becoming relative to byte 0 (4 more). A planus
/// that writes them in order leaves `TFL3` at bytes 4..8, and nothing is done.
fn header_in_order(mut buf: Vec<u8>) -> Vec<u8> {
    if buf[0..4] == IDENTIFIER && buf[4..8] != IDENTIFIER {
        let from_4 = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
        buf[0..4].copy_from_slice(&(from_4 + 4).to_le_bytes());
        buf[4..8].copy_from_slice(&IDENTIFIER);
    }
    buf
}

#[cfg(test)]
mod tests {
    use planus::ReadAsRoot;

    use super::*;

    fn tensor(name: &str, shape: Vec<i32>, ty: TensorType, data: Option<Vec<u8>>) -> Tensor {
        Tensor {
            name: name.into(),
            shape,
            ty,
            data,
            quant: None,
        }
    }

    /// The header is FlatBuffers' (root offset, then `TFL3`), the model reads back through the
    /// generated readers, and each constant's bytes start 16-byte aligned in the buffer.
    #[test]
    fn header_tables_and_aligned_constants() {
        let m = Model {
            tensors: vec![
                tensor("a", vec![3], TensorType::Int8, Some(vec![7; 3])),
                tensor("b", vec![21], TensorType::Int8, Some(vec![9; 21])),
                tensor("x", vec![1, 3], TensorType::Float32, None),
            ],
            ops: vec![Op {
                kind: OpKind::Relu,
                inputs: vec![2],
                outputs: vec![2],
            }],
            inputs: vec![("x".into(), 2)],
            outputs: vec![("y".into(), 2)],
            int8: false,
        };
        let buf = serialize(&m);
        assert_eq!(&buf[4..8], b"TFL3");
        let model = schema::tflite::ModelRef::read_as_root(&buf).expect("a TFLite model");
        assert_eq!(model.version().unwrap(), 3);
        let codes = model.operator_codes().unwrap().unwrap();
        let code = codes.first().unwrap().unwrap();
        assert_eq!(code.builtin_code().unwrap(), BuiltinOperator::Relu);
        let subgraph = model
            .subgraphs()
            .unwrap()
            .unwrap()
            .first()
            .unwrap()
            .unwrap();
        let x = subgraph
            .tensors()
            .unwrap()
            .unwrap()
            .get(2)
            .unwrap()
            .unwrap();
        assert_eq!(x.name().unwrap(), Some("x"));
        assert_eq!(x.buffer().unwrap(), 0);
        let buffers = model.buffers().unwrap().unwrap();
        assert_eq!(buffers.len(), 3);
        for (b, want) in buffers.iter().skip(1).zip([&[7u8; 3][..], &[9; 21]]) {
            let data = b.unwrap().data().unwrap().unwrap();
            assert_eq!(data, want);
            assert_eq!((data.as_ptr() as usize - buf.as_ptr() as usize) % 16, 0);
        }
    }
}
