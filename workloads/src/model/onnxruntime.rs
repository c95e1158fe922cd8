//! The ONNX Runtime engine: the same generated ONNX graph tract runs (f32, or the int8
//! QOperator graph with `QLinearConv`/`QLinearMatMul`), run by ORT's CPU execution provider.

use std::sync::{Arc, Mutex, OnceLock};

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::TensorRef;
use prost::Message;

use super::graph::{Calibration, Mode};
use greenpipe_workload_numeric::min_max;

use super::{proto_for, EngineKind, InferenceEngine, Libraries, Library};
use super::{ModelError, ModelSpec, Network, Precision};

/// The ONNX Runtime engine.
pub struct OnnxRuntimeEngine;

impl InferenceEngine for OnnxRuntimeEngine {
    const NAME: &'static str = "onnxruntime";
    const TITLE: &'static str = "ONNX Runtime";
    const PLATFORM: &'static str = "onnxruntime_onnx";
    /// No f16: the CPU execution provider has no f16 arithmetic, and an f32 run is not reported
    /// as f16.
    const PRECISIONS: &'static [Precision] = &[Precision::F32, Precision::Int8];
    const LIBRARY: Option<Library> = Some(Library {
        env: "GREENPIPE_ONNXRUNTIME_LIB",
        file: "libonnxruntime.so",
        source: "the `onnxruntime` wheel (onnxruntime/capi/; scripts/setup.sh links it as \
                 .venv/engines/libonnxruntime.so)",
    });

    fn build(
        spec: &ModelSpec,
        calibration: &[f32],
        libraries: &Libraries,
    ) -> Result<Arc<dyn Network>, ModelError> {
        let mode = if spec.precision == Precision::Int8 {
            Mode::Int8(calibrate(spec, calibration, libraries)?)
        } else {
            Mode::Float
        };
        Ok(Arc::new(OrtNetwork::build(spec, mode, libraries)?))
    }
}

const ENGINE: EngineKind = EngineKind::of::<OnnxRuntimeEngine>();

/// A session of one network. ORT's `run` takes the session mutably, so concurrent callers
/// (a server with several `--instances`) take turns; ORT parallelises inside one run with
/// `--threads` intra-op threads.
pub struct OrtNetwork {
    session: Mutex<Session>,
}

impl std::fmt::Debug for OrtNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtNetwork").finish_non_exhaustive()
    }
}

fn failed(step: &'static str) -> impl FnOnce(ort::Error) -> ModelError {
    move |e| ModelError::Runtime {
        engine: ENGINE,
        step,
        source: e.to_string().into(),
    }
}

/// The process's one ORT environment, on the library found first; a later build with another
/// path reuses it (ORT can be loaded once per process).
fn environment(libraries: &Libraries) -> Result<&'static Environment, ModelError> {
    static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();
    let path = libraries.path_for(ENGINE)?;
    let env = ENV.get_or_init(|| {
        let builder = ort::init_from(&path).map_err(|e| e.to_string())?;
        builder
            .with_name("greenpipe-workload")
            .with_telemetry(false)
            .build()
            .map_err(|e| e.to_string())
    });
    env.as_ref().map_err(|reason| ModelError::Library {
        engine: ENGINE,
        path: path.clone(),
        reason: reason.clone(),
    })
}

/// A session of `onnx` on `threads` intra-op threads, with every graph optimisation.
fn session(
    libraries: &Libraries,
    threads: usize,
    onnx: &[u8],
    loading: &'static str,
) -> Result<Session, ModelError> {
    Session::builder(environment(libraries)?)
        .map_err(failed("creating the session options"))?
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(|e| failed("setting the graph optimisation level")(e.into()))?
        .with_intra_threads(threads)
        .map_err(|e| failed("setting --threads")(e.into()))?
        // One inference at a time per session: inter-op threads would only compete with the
        // intra-op pool for the same cores.
        .with_inter_threads(1)
        .map_err(|e| failed("setting the inter-op threads")(e.into()))?
        .commit_from_memory(onnx)
        .map_err(failed(loading))
}

impl OrtNetwork {
    /// Builds `spec`'s network from the graph in `mode` with the library of `libraries`.
    pub fn build(
        spec: &ModelSpec,
        mode: Mode,
        libraries: &Libraries,
    ) -> Result<OrtNetwork, ModelError> {
        let (proto, _) = proto_for(spec, mode);
        let session = session(
            libraries,
            spec.threads,
            &proto.encode_to_vec(),
            "loading the generated ONNX graph",
        )?;
        Ok(OrtNetwork {
            session: Mutex::new(session),
        })
    }
}

impl Network for OrtNetwork {
    fn infer(&self, shape: &[usize; 4], input: &[f32]) -> Result<Vec<f32>, ModelError> {
        let tensor = TensorRef::from_array_view((shape.to_vec(), input))
            .map_err(failed("shaping the input"))?;
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        let outputs = session
            .run(ort::inputs!["input" => tensor])
            .map_err(failed("running the model"))?;
        let (_, logits) = outputs["logits"]
            .try_extract_tensor::<f32>()
            .map_err(failed("reading the logits"))?;
        Ok(logits.to_vec())
    }
}

/// [`super::tract::calibrate`] on ONNX Runtime: the same probe graph and the same ranges
/// (within float rounding), without tract's f32 network, so an ONNX Runtime build does not pay
/// tract's optimisation of the calibration graph.
pub fn calibrate(
    spec: &ModelSpec,
    batch: &[f32],
    libraries: &Libraries,
) -> Result<Calibration, ModelError> {
    let (proto, probes) = proto_for(spec, Mode::Probe);
    let mut session = session(
        libraries,
        spec.threads,
        &proto.encode_to_vec(),
        "loading the calibration graph",
    )?;
    let names: Vec<String> = session
        .outputs()
        .iter()
        .map(|o| o.name().to_string())
        .collect();
    let shape = spec.input_shape();
    let tensor =
        TensorRef::from_array_view((shape.to_vec(), batch)).map_err(failed("calibration batch"))?;
    let outputs = session
        .run(ort::inputs!["input" => tensor])
        .map_err(failed("running the calibration graph"))?;
    let ranges = names[1..]
        .iter()
        .map(|name| -> Result<(f32, f32), ModelError> {
            let (_, v) = outputs[name.as_str()]
                .try_extract_tensor::<f32>()
                .map_err(failed("reading a calibration range"))?;
            Ok(min_max(v))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cal = Calibration::from_ranges(&probes, &ranges);
    Ok(cal)
}
