//! The part of `onnx.proto` the converter reads, as prost messages (field numbers from the
//! official schema, onnx/onnx.proto). Declared by hand so that building this crate needs no
//! `protoc`; fields the converter never looks at are left out and skipped by the decoder.

use prost::Message;

use crate::Error;

#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct OperatorSetIdProto {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(string, tag = "7")]
    pub domain: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int32, tag = "20")]
    pub r#type: i32,
    #[prost(float, tag = "2")]
    pub f: f32,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueInfoProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeProtoTensor>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TypeProtoTensor {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Dimension {
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
}

/// `TensorProto.DataType.FLOAT`.
pub const FLOAT: i32 = 1;

pub fn decode(bytes: &[u8]) -> Result<ModelProto, Error> {
    ModelProto::decode(bytes).map_err(|e| Error::Onnx(format!("not an ONNX ModelProto: {e}")))
}

impl TensorProto {
    /// The values of a FLOAT tensor, from `raw_data` (little-endian) or `float_data`.
    pub fn f32_values(&self) -> Result<Vec<f32>, Error> {
        if self.data_type != FLOAT {
            return Err(Error::Unsupported(format!(
                "initializer {} has ONNX data type {}, only FLOAT (1) is read",
                self.name, self.data_type
            )));
        }
        let values: Vec<f32> = if !self.raw_data.is_empty() {
            if !self.raw_data.len().is_multiple_of(4) {
                return Err(Error::Onnx(format!(
                    "initializer {}: raw_data of {} bytes is not a whole number of f32",
                    self.name,
                    self.raw_data.len()
                )));
            }
            self.raw_data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        } else {
            self.float_data.clone()
        };
        let expected = self.element_count()?;
        if values.len() != expected {
            return Err(Error::Onnx(format!(
                "initializer {}: {} values for dims {:?}",
                self.name,
                values.len(),
                self.dims
            )));
        }
        Ok(values)
    }

    pub fn element_count(&self) -> Result<usize, Error> {
        self.dims.iter().try_fold(1usize, |n, &d| {
            usize::try_from(d)
                .ok()
                .and_then(|d| n.checked_mul(d))
                .ok_or_else(|| {
                    Error::Onnx(format!(
                        "initializer {}: bad dims {:?}",
                        self.name, self.dims
                    ))
                })
        })
    }
}

impl ValueInfoProto {
    /// The fixed shape of a FLOAT tensor declaration, if it has one.
    pub fn fixed_shape(&self) -> Result<Vec<usize>, Error> {
        let tensor = self
            .r#type
            .as_ref()
            .and_then(|t| t.tensor_type.as_ref())
            .ok_or_else(|| Error::Onnx(format!("value {} is not a tensor", self.name)))?;
        if tensor.elem_type != FLOAT {
            return Err(Error::Unsupported(format!(
                "value {} has element type {}, only FLOAT (1) is supported",
                self.name, tensor.elem_type
            )));
        }
        let shape = tensor
            .shape
            .as_ref()
            .ok_or_else(|| Error::Onnx(format!("value {} has no shape", self.name)))?;
        shape
            .dim
            .iter()
            .map(|d| match d.dim_value {
                Some(v) if v > 0 => Ok(v as usize),
                _ => Err(Error::Unsupported(format!(
                    "value {} has a symbolic or empty dimension; the converter needs fixed shapes",
                    self.name
                ))),
            })
            .collect()
    }
}

impl NodeProto {
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attribute.iter().find(|a| a.name == name)
    }

    pub fn attr_ints(&self, name: &str) -> Option<&[i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }

    pub fn attr_int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i)
    }

    pub fn attr_float(&self, name: &str, default: f32) -> f32 {
        self.attr(name).map_or(default, |a| a.f)
    }
}
