//! The three image classifiers, built in code as ONNX graphs ([`graph`]), and the engines that
//! run them: tract ([`tract`], pure Rust, compiled in), ONNX Runtime ([`onnxruntime`]) and
//! LiteRT ([`litert`]), both opened at run time from their wheels' C libraries
//! ([`libraries`]). Every engine runs the network of one graph: the same layers and seeded
//! weights, and for int8 the same calibration.

pub mod efficientnet_b0;
pub mod graph;
pub mod libraries;
pub mod litert;
pub mod mobilenet_v2;
pub mod onnxruntime;
pub mod resnet50_v2;
pub mod tract;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use tract_onnx::prelude::{Datum, DatumType};

use graph::{GraphBuilder, Mode};
pub use libraries::Libraries;
pub(crate) use tract::{configure_tract, TractStep};

/// Why a network could not be chosen, built or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model {0:?}: expected mobilenet_v2, efficientnet_b0 or resnet50_v2")]
    UnknownArch(String),
    #[error("unknown precision {0:?}: expected f32, f16 or int8")]
    UnknownPrecision(String),
    #[error("unknown engine {0:?}: expected tract, onnxruntime or litert")]
    UnknownEngine(String),
    #[error(
        "--engine {engine} runs f32 and int8, not {precision}; f16 is tract's (--engine tract)"
    )]
    Unsupported {
        engine: EngineKind,
        precision: Precision,
    },
    #[error("--threads {threads} is outside 1..={cpus} (the CPUs this process may use)")]
    Threads { threads: usize, cpus: usize },
    #[error("--batch must be at least 1")]
    ZeroBatch,
    #[error("--image-size {0} is below 32 pixels")]
    ImageSize(usize),
    #[error("input has {len} values, the model takes {shape:?} = {expected}")]
    InputLength {
        len: usize,
        shape: [usize; 4],
        expected: usize,
    },
    /// tract refused a step; `step` says which (tract's own error is its `source`).
    #[error("{step}")]
    Tract {
        step: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The engine's library could not be opened.
    #[error("{engine}: cannot load {}: {reason}; {}", path.display(), libraries::how_to_get(*engine))]
    Library {
        engine: EngineKind,
        path: PathBuf,
        reason: String,
    },
    /// ONNX Runtime or LiteRT refused a step (its own message is the `source`).
    #[error("{engine}: {step}")]
    Runtime {
        engine: EngineKind,
        step: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Weight seed when none is given: every node and every run of a campaign computes on the
/// same network.
pub const DEFAULT_SEED: u64 = 0x6772_6565_6e70_6970;

/// A network architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    MobileNetV2,
    EfficientNetB0,
    ResNet50V2,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::MobileNetV2, Arch::EfficientNetB0, Arch::ResNet50V2];

    pub fn name(self) -> &'static str {
        match self {
            Arch::MobileNetV2 => "mobilenet_v2",
            Arch::EfficientNetB0 => "efficientnet_b0",
            Arch::ResNet50V2 => "resnet50_v2",
        }
    }

    fn build(self, g: &mut GraphBuilder) -> graph::Value {
        match self {
            Arch::MobileNetV2 => mobilenet_v2::build(g),
            Arch::EfficientNetB0 => efficientnet_b0::build(g),
            Arch::ResNet50V2 => resnet50_v2::build(g),
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Arch {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        Arch::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| ModelError::UnknownArch(s.to_string()))
    }
}

/// Numeric precision of the weights and arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F32,
    F16,
    Int8,
}

impl Precision {
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::F16, Precision::Int8];

    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Int8 => "int8",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| ModelError::UnknownPrecision(s.to_string()))
    }
}

/// The inference engine that runs a network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Tract,
    OnnxRuntime,
    LiteRt,
}

impl EngineKind {
    pub const ALL: [EngineKind; 3] = [
        EngineKind::Tract,
        EngineKind::OnnxRuntime,
        EngineKind::LiteRt,
    ];

    /// The `--engine` value and the `engine` label.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Tract => "tract",
            EngineKind::OnnxRuntime => "onnxruntime",
            EngineKind::LiteRt => "litert",
        }
    }

    /// The precisions this engine computes in. f16: tract converts the typed model; ONNX
    /// Runtime's CPU provider and LiteRT's XNNPACK path on x86-64 have no f16 arithmetic
    /// (LiteRT's f16 models are f16 storage dequantized to f32 at load), so they refuse it
    /// rather than report an f32 run as f16.
    pub fn precisions(self) -> &'static [Precision] {
        match self {
            EngineKind::Tract => &Precision::ALL,
            EngineKind::OnnxRuntime | EngineKind::LiteRt => &[Precision::F32, Precision::Int8],
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EngineKind {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Self, ModelError> {
        EngineKind::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| ModelError::UnknownEngine(s.to_string()))
    }
}

/// Everything that determines a built network.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub arch: Arch,
    pub precision: Precision,
    pub engine: EngineKind,
    pub threads: usize,
    pub batch: usize,
    /// Square input side in pixels (224 for the published models; tests use less).
    pub image_size: usize,
    pub seed: u64,
}

impl ModelSpec {
    pub fn validate(&self) -> Result<(), ModelError> {
        if !self.engine.precisions().contains(&self.precision) {
            return Err(ModelError::Unsupported {
                engine: self.engine,
                precision: self.precision,
            });
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if self.threads == 0 || self.threads > cpus {
            return Err(ModelError::Threads {
                threads: self.threads,
                cpus,
            });
        }
        if self.batch == 0 {
            return Err(ModelError::ZeroBatch);
        }
        // Five stride-2 stages: smaller inputs vanish before the classifier.
        if self.image_size < 32 {
            return Err(ModelError::ImageSize(self.image_size));
        }
        Ok(())
    }

    /// `[batch, 3, size, size]`.
    pub fn input_shape(&self) -> [usize; 4] {
        [self.batch, 3, self.image_size, self.image_size]
    }

    pub fn input_len(&self) -> usize {
        self.input_shape().iter().product()
    }
}

/// Number of classifier outputs.
pub const CLASSES: usize = 1000;

/// A built network ready to run, on the engine its spec names.
#[derive(Debug, Clone)]
pub struct Engine {
    spec: ModelSpec,
    network: Network,
}

#[derive(Debug, Clone)]
enum Network {
    Tract(tract::TractNetwork),
    OnnxRuntime(Arc<onnxruntime::OrtNetwork>),
    LiteRt(Arc<litert::LiteRtNetwork>),
}

impl Engine {
    /// Builds the network with the engine libraries named in the environment
    /// ([`Libraries::from_env`]).
    pub fn build(spec: &ModelSpec, calibration: &[f32]) -> Result<Engine, ModelError> {
        Engine::build_with(spec, calibration, &Libraries::from_env())
    }

    /// Builds the network. int8 first runs the f32 network of the same seed once on
    /// `calibration` (a preprocessed batch) to choose activation ranges, on the engine itself:
    /// every engine quantizes one network from one image batch.
    pub fn build_with(
        spec: &ModelSpec,
        calibration: &[f32],
        libraries: &Libraries,
    ) -> Result<Engine, ModelError> {
        spec.validate()?;
        let int8 = spec.precision == Precision::Int8;
        let network = match spec.engine {
            EngineKind::Tract => {
                let mode = if int8 {
                    Mode::Int8(tract::calibrate(spec, calibration)?)
                } else {
                    Mode::Float
                };
                Network::Tract(tract::TractNetwork::build(spec, mode)?)
            }
            EngineKind::OnnxRuntime => {
                let mode = if int8 {
                    Mode::Int8(onnxruntime::calibrate(spec, calibration, libraries)?)
                } else {
                    Mode::Float
                };
                Network::OnnxRuntime(Arc::new(onnxruntime::OrtNetwork::build(
                    spec, mode, libraries,
                )?))
            }
            EngineKind::LiteRt => Network::LiteRt(Arc::new(litert::LiteRtNetwork::build(
                spec,
                calibration,
                libraries,
            )?)),
        };
        Ok(Engine {
            spec: spec.clone(),
            network,
        })
    }

    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The datum type the network computes its input in: f16 for tract's f16 model, f32
    /// otherwise (int8 quantizes inside the graph).
    pub fn input_datum_type(&self) -> DatumType {
        match &self.network {
            Network::Tract(t) => t.input_datum_type(),
            Network::OnnxRuntime(_) | Network::LiteRt(_) => f32::datum_type(),
        }
    }

    /// Runs one batch (`spec.input_len()` values, NCHW); returns `batch × 1000` logits.
    pub fn infer(&self, input: &[f32]) -> Result<Vec<f32>, ModelError> {
        if input.len() != self.spec.input_len() {
            return Err(ModelError::InputLength {
                len: input.len(),
                shape: self.spec.input_shape(),
                expected: self.spec.input_len(),
            });
        }
        let shape = self.spec.input_shape();
        match &self.network {
            Network::Tract(t) => t.infer(&shape, input),
            Network::OnnxRuntime(o) => o.infer(&shape, input),
            Network::LiteRt(l) => l.infer(input),
        }
    }
}

/// (min, max) of a tensor's values.
fn min_max(values: impl Iterator<Item = f32>) -> (f32, f32) {
    values.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

/// The ONNX graph of `spec` in `mode`, and what it probes (probe mode).
pub fn proto_for(spec: &ModelSpec, mode: Mode) -> (tract_onnx::pb::ModelProto, graph::Probes) {
    let mut g = GraphBuilder::new(spec.seed, mode);
    let logits = spec.arch.build(&mut g);
    let probes = g.probes();
    (
        g.finish(spec.arch.name(), &logits, spec.batch, spec.image_size),
        probes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_and_shapes_say_what_is_accepted() {
        let e = "vgg16".parse::<Arch>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown model \"vgg16\": expected mobilenet_v2, efficientnet_b0 or resnet50_v2"
        );
        let e = "int4".parse::<Precision>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown precision \"int4\": expected f32, f16 or int8"
        );
        let spec = ModelSpec {
            arch: Arch::MobileNetV2,
            precision: Precision::F32,
            engine: EngineKind::Tract,
            threads: 1,
            batch: 0,
            image_size: 224,
            seed: DEFAULT_SEED,
        };
        assert!(matches!(spec.validate(), Err(ModelError::ZeroBatch)));
        let small = ModelSpec {
            batch: 1,
            image_size: 16,
            ..spec
        };
        assert_eq!(
            small.validate().unwrap_err().to_string(),
            "--image-size 16 is below 32 pixels"
        );
        let e = "tensorrt".parse::<EngineKind>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown engine \"tensorrt\": expected tract, onnxruntime or litert"
        );
        let f16_on_ort = ModelSpec {
            batch: 1,
            precision: Precision::F16,
            engine: EngineKind::OnnxRuntime,
            ..spec
        };
        assert_eq!(
            f16_on_ort.validate().unwrap_err().to_string(),
            "--engine onnxruntime runs f32 and int8, not f16; f16 is tract's (--engine tract)"
        );
    }
}
