//! The LiteRT engine: the same generated graph, written as a `.tflite` FlatBuffer by
//! `greenpipe-litert` (NHWC, explicit padding where TFLite's SAME would pad differently;
//! int8 with per-channel weights and activations calibrated on the same image batch) and run
//! on LiteRT's default CPU path, XNNPACK.

use std::sync::{Arc, OnceLock};

use greenpipe_litert::{CompiledModel, LiteRt};

use super::graph::Mode;
use super::{proto_for, EngineKind, InferenceEngine, Libraries, Library};
use super::{ModelError, ModelSpec, Network, Precision};

/// The LiteRT engine.
pub struct LiteRtEngine;

impl InferenceEngine for LiteRtEngine {
    const NAME: &'static str = "litert";
    const TITLE: &'static str = "LiteRT";
    const PLATFORM: &'static str = "litert_tflite";
    /// No f16: XNNPACK on x86-64 has no f16 arithmetic (LiteRT's f16 models are f16 storage
    /// dequantized to f32 at load), and an f32 run is not reported as f16.
    const PRECISIONS: &'static [Precision] = &[Precision::F32, Precision::Int8];
    const LIBRARY: Option<Library> = Some(Library {
        env: "GREENPIPE_LITERT_LIB",
        file: "libLiteRt.so",
        source: "the `ai-edge-litert` wheel (scripts/setup.sh links it as \
                 .venv/engines/libLiteRt.so)",
    });

    fn build(
        spec: &ModelSpec,
        calibration: &[f32],
        libraries: &Libraries,
    ) -> Result<Arc<dyn Network>, ModelError> {
        Ok(Arc::new(LiteRtNetwork::build(
            spec,
            calibration,
            libraries,
        )?))
    }
}

const ENGINE: EngineKind = EngineKind::of::<LiteRtEngine>();

/// A compiled network.
pub struct LiteRtNetwork {
    model: CompiledModel,
}

impl std::fmt::Debug for LiteRtNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiteRtNetwork").finish_non_exhaustive()
    }
}

fn failed(step: &'static str) -> impl FnOnce(greenpipe_litert::Error) -> ModelError {
    move |e| ModelError::Runtime {
        engine: ENGINE,
        step,
        source: Box::new(e),
    }
}

/// The process's one LiteRT library and environment, on the library found first.
fn runtime(libraries: &Libraries) -> Result<&'static LiteRt, ModelError> {
    static RUNTIME: OnceLock<Result<LiteRt, String>> = OnceLock::new();
    let path = libraries.path_for(ENGINE)?;
    RUNTIME
        .get_or_init(|| LiteRt::open(&path).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|reason| ModelError::Library {
            engine: ENGINE,
            path: path.clone(),
            reason: reason.clone(),
        })
}

impl LiteRtNetwork {
    /// Converts `spec`'s f32 graph (int8: quantized against `calibration`) and compiles it.
    pub fn build(
        spec: &ModelSpec,
        calibration: &[f32],
        libraries: &Libraries,
    ) -> Result<LiteRtNetwork, ModelError> {
        let runtime = runtime(libraries)?;
        let precision = match spec.precision {
            Precision::F32 => greenpipe_litert::Precision::F32,
            Precision::Int8 => greenpipe_litert::Precision::Int8,
            Precision::F16 => {
                return Err(ModelError::Unsupported {
                    engine: ENGINE,
                    precision: spec.precision,
                })
            }
        };
        let (proto, _) = proto_for(spec, Mode::Float);
        let tflite = greenpipe_litert::convert(&proto, precision, Some(calibration), runtime)
            .map_err(failed("writing the .tflite model"))?;
        let model = runtime
            .compile(&tflite, spec.threads)
            .map_err(failed("compiling the model"))?;
        Ok(LiteRtNetwork { model })
    }
}

impl Network for LiteRtNetwork {
    /// The compiled model knows its shape.
    fn infer(&self, _: &[usize; 4], input: &[f32]) -> Result<Vec<f32>, ModelError> {
        self.model.run(input).map_err(failed("running the model"))
    }
}
