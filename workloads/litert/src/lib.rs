//! LiteRT as a second inference engine for GreenPipe's DNN workload.
//!
//! [`convert`] turns the workload's in-memory ONNX image classifiers (messages of [`onnx`], the
//! schema the workload builds them with; f32, opset 13: Conv, Clip/Relu, Sigmoid, Mul, Add,
//! GlobalAveragePool, Flatten, Gemm, MaxPool, BatchNormalization, Identity) into `.tflite`
//! FlatBuffers computing the same network, in f32 or int8; [`LiteRt`] opens LiteRT's `libLiteRt.so` at run time and [`CompiledModel`] runs a
//! model on its CPU accelerator (XNNPACK).
//!
//! int8 models quantize weights per output channel (symmetric) and activations per tensor
//! (asymmetric) over ranges observed by running the f32 model, through LiteRT, on a
//! calibration batch; their input and output stay f32.

mod ir;
pub mod onnx;
mod quant;
mod runtime;
mod tflite;

use std::borrow::Cow;
use std::path::PathBuf;

pub use runtime::{nchw_to_nhwc, CompiledModel, LiteRt};

/// Numeric precision of a converted model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F32,
    Int8,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot open the LiteRT library {}: {message} (scripts/setup.sh installs the ai-edge-litert wheel, which ships libLiteRt.so)",
        path.display()
    )]
    Library { path: PathBuf, message: String },
    #[error("the LiteRT library {} lacks {symbol}: {message}", path.display())]
    Symbol {
        path: PathBuf,
        symbol: &'static str,
        message: String,
    },
    #[error("LiteRT {step} failed: {status} ({code})")]
    LiteRt {
        step: &'static str,
        code: i32,
        status: &'static str,
    },
    #[error("ONNX model: {0}")]
    Onnx(String),
    #[error("unsupported ONNX graph: {0}")]
    Unsupported(String),
    #[error("{op} node {name}: {source}")]
    Node {
        op: String,
        name: String,
        source: Box<Error>,
    },
    #[error("invalid model: {0}")]
    InvalidModel(String),
    #[error("input has {got} values; the model takes {expected}")]
    InputLength { got: usize, expected: usize },
    #[error("calibration: {0}")]
    Calibration(String),
}

impl Error {
    fn in_node(self, op: &str, name: &str) -> Error {
        Error::Node {
            op: op.to_string(),
            name: name.to_string(),
            source: Box::new(self),
        }
    }
}

/// What [`convert`] reads: an ONNX model as the message itself (the workload's graph, read as
/// it is) or as its encoding (a `.onnx` file's bytes, decoded once).
pub trait OnnxModel {
    fn model(&self) -> Result<Cow<'_, onnx::ModelProto>, Error>;
}

impl OnnxModel for onnx::ModelProto {
    fn model(&self) -> Result<Cow<'_, onnx::ModelProto>, Error> {
        Ok(Cow::Borrowed(self))
    }
}

impl OnnxModel for [u8] {
    fn model(&self) -> Result<Cow<'_, onnx::ModelProto>, Error> {
        onnx::decode(self).map(Cow::Owned)
    }
}

impl OnnxModel for Vec<u8> {
    fn model(&self) -> Result<Cow<'_, onnx::ModelProto>, Error> {
        self.as_slice().model()
    }
}

impl<const N: usize> OnnxModel for [u8; N] {
    fn model(&self) -> Result<Cow<'_, onnx::ModelProto>, Error> {
        self.as_slice().model()
    }
}

/// An ONNX model (an f32 graph) → `.tflite` bytes.
///
/// [`Precision::Int8`] needs `calibration`, an NCHW f32 batch of the model's input shape: the
/// f32 model runs on it (through `runtime`) to observe every activation's range.
pub fn convert<M: OnnxModel + ?Sized>(
    onnx: &M,
    precision: Precision,
    calibration: Option<&[f32]>,
    runtime: &LiteRt,
) -> Result<Vec<u8>, Error> {
    let graph = ir::lower(&*onnx.model()?)?;
    match precision {
        Precision::F32 => Ok(tflite::serialize(&quant::float_model(&graph, false))),
        Precision::Int8 => {
            let batch = calibration.ok_or_else(|| {
                Error::Calibration("int8 conversion needs a calibration batch".into())
            })?;
            let ranges = calibrate(&graph, batch, runtime)?;
            Ok(tflite::serialize(&quant::int8_model(&graph, &ranges)?))
        }
    }
}

/// (min, max) of every activation tensor of `graph` on `batch` (NCHW).
fn calibrate(
    graph: &ir::Graph,
    batch: &[f32],
    runtime: &LiteRt,
) -> Result<Vec<Option<(f32, f32)>>, Error> {
    let shape = graph.input_nchw();
    let expected: usize = shape.iter().product();
    if batch.len() != expected {
        return Err(Error::Calibration(format!(
            "the batch has {} values; the model's input {shape:?} takes {expected}",
            batch.len()
        )));
    }
    if batch.iter().any(|v| !v.is_finite()) {
        return Err(Error::Calibration(
            "the batch holds non-finite values".into(),
        ));
    }
    let probe = tflite::serialize(&quant::float_model(graph, true));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let compiled = runtime.compile(&probe, threads)?;
    let outputs = compiled.run_nhwc_all(&nchw_to_nhwc(batch, shape))?;
    let mut ranges = vec![None; graph.tensors.len()];
    let min_max = |v: &[f32]| {
        v.iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            })
    };
    ranges[graph.input] = Some(min_max(batch));
    for (name, values) in outputs {
        let t = name
            .strip_prefix('t')
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|&t| t < graph.tensors.len())
            .ok_or_else(|| Error::Calibration(format!("unexpected probe output {name}")))?;
        let (lo, hi) = min_max(&values);
        if !(lo.is_finite() && hi.is_finite()) {
            return Err(Error::Calibration(format!(
                "tensor {} is not finite on the calibration batch",
                graph.tensors[t].name
            )));
        }
        ranges[t] = Some((lo, hi));
    }
    Ok(ranges)
}
