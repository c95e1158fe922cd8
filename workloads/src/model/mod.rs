//! The three image classifiers, built in code as ONNX graphs ([`graph`]) and run with tract.
//!
//! Why tract: it is pure Rust (no C++ runtime to cross-compile for a Raspberry Pi), has arm64
//! NEON kernels, real depthwise convolution, int8 `QLinearConv`/`QLinearMatMul`, an f32→f16
//! model translator, and an explicit per-plan thread pool; its ONNX front end accepts a
//! `ModelProto` built in memory, so the published architectures are written once as ONNX and
//! no model file or model hub is needed.

pub mod efficientnet_b0;
pub mod graph;
pub mod mobilenet_v2;
pub mod resnet50_v2;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use tract_onnx::prelude::*;
use tract_onnx::tract_core::floats::FloatPrecisionTranslator;
use tract_onnx::tract_core::transform::ModelTransform;

use graph::{Calibration, GraphBuilder, Mode};

/// Why a network could not be chosen, built or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unknown model {0:?}: expected mobilenet_v2, efficientnet_b0 or resnet50_v2")]
    UnknownArch(String),
    #[error("unknown precision {0:?}: expected f32, f16 or int8")]
    UnknownPrecision(String),
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
}

/// Names the tract step that failed (the kernel benchmarks' one-operator models use it too).
pub(crate) trait TractStep<T> {
    fn step(self, step: &'static str) -> Result<T, ModelError>;
}

impl<T> TractStep<T> for TractResult<T> {
    fn step(self, step: &'static str) -> Result<T, ModelError> {
        self.map_err(|e| ModelError::Tract {
            step,
            source: e.into(),
        })
    }
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

/// Everything that determines a built network.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub arch: Arch,
    pub precision: Precision,
    pub threads: usize,
    pub batch: usize,
    /// Square input side in pixels (224 for the published models; tests use less).
    pub image_size: usize,
    pub seed: u64,
}

impl ModelSpec {
    pub fn validate(&self) -> Result<(), ModelError> {
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

type Plan = Arc<TypedRunnableModel>;

/// A built, optimised network ready to run.
#[derive(Debug, Clone)]
pub struct Engine {
    spec: ModelSpec,
    plan: Plan,
    input_type: DatumType,
}

/// Number of classifier outputs.
pub const CLASSES: usize = 1000;

impl Engine {
    /// Builds the network. int8 first builds the f32 network of the same seed and runs it once
    /// on `calibration` (a preprocessed batch) to choose activation ranges.
    pub fn build(spec: &ModelSpec, calibration: &[f32]) -> Result<Engine, ModelError> {
        spec.validate()?;
        // Before any optimisation: that is where tract picks its kernels.
        configure_tract();
        let mode = match spec.precision {
            Precision::F32 | Precision::F16 => Mode::Float,
            Precision::Int8 => Mode::Int8(calibrate(spec, calibration)?),
        };
        let (proto, _) = proto_for(spec, mode);
        let mut typed = tract_onnx::onnx()
            .model_for_proto_model(&proto)
            .step("parsing the generated ONNX graph")?
            .into_typed()
            .step("typing the generated ONNX graph")?
            .into_decluttered()
            .step("decluttering the model")?;
        if spec.precision == Precision::F16 {
            FloatPrecisionTranslator::new(f32::datum_type(), f16::datum_type())
                .transform(&mut typed)
                .step("translating the model to f16")?;
        }
        let input_type = typed
            .input_fact(0)
            .step("reading the model's input")?
            .datum_type;
        let optimized = typed.into_optimized().step("optimising the model")?;
        let plan = runnable(optimized, spec.threads)?;
        Ok(Engine {
            spec: spec.clone(),
            plan,
            input_type,
        })
    }

    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The datum type the plan takes its input in: f16 for an f16 model (the translator
    /// converts every f32 tensor), f32 otherwise (int8 quantizes inside the graph).
    pub fn input_datum_type(&self) -> DatumType {
        self.input_type
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
        let tensor =
            Tensor::from_shape(&self.spec.input_shape(), input).step("shaping the input")?;
        let tensor = if self.input_type == f32::datum_type() {
            tensor
        } else {
            tensor
                .cast_to_dt(self.input_type)
                .step("converting the input to the model's type")?
                .into_owned()
        };
        let outputs = self
            .plan
            .run(tvec!(tensor.into()))
            .step("running the model")?;
        let logits = outputs[0].cast_to::<f32>().step("reading the logits")?;
        Ok(logits
            .to_plain_array_view::<f32>()
            .step("reading the logits")?
            .iter()
            .copied()
            .collect())
    }
}

/// Keeps tract off its AMX int8 matmul kernel (`avx512amx_mmm_i32_16x16`) unless the operator
/// chose a `TRACT_CPU_ISA` of their own: in tract-linalg 0.23.9 that kernel reads past its B
/// tile and crashed one int8 EfficientNet-B0 run in two on this machine's AMX CPU (SIGSEGV in
/// `tileloaddt1`; none in eight runs without it). Must run before tract first probes the CPU.
pub fn configure_tract() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("TRACT_CPU_ISA").is_none() {
            if let Err(e) =
                tract_onnx::tract_core::knobs::set_config_global("TRACT_CPU_ISA", "-amx-int8")
            {
                tracing::warn!(error = %e, "could not keep tract off its AMX int8 kernel");
            }
        }
    });
}

fn runnable(model: TypedModel, threads: usize) -> Result<Plan, ModelError> {
    let executor = if threads > 1 {
        tract_linalg::multithread::Executor::multithread_with_name(threads, "greenpipe-infer")
    } else {
        tract_linalg::multithread::Executor::SingleThread
    };
    let options = RunOptions {
        executor: Some(executor),
        ..Default::default()
    };
    model
        .into_runnable_with_options(&options)
        .step("preparing the model to run")
}

/// The ONNX graph of `spec` in `mode`, and the probed layer indices (probe mode).
pub fn proto_for(spec: &ModelSpec, mode: Mode) -> (tract_onnx::pb::ModelProto, Vec<usize>) {
    let mut g = GraphBuilder::new(spec.seed, mode);
    let logits = spec.arch.build(&mut g);
    let probes = g.probes();
    (
        g.finish(spec.arch.name(), &logits, spec.batch, spec.image_size),
        probes,
    )
}

/// Runs the f32 graph with every quantizable layer's input and output exposed and records
/// their ranges.
fn calibrate(spec: &ModelSpec, batch: &[f32]) -> Result<Calibration, ModelError> {
    let (proto, probes) = proto_for(spec, Mode::Probe);
    let model = tract_onnx::onnx()
        .model_for_proto_model(&proto)
        .step("parsing the calibration graph")?
        // The first probe re-exports the graph input as an output, which leaves tract's source
        // node without a fact unless it is given again.
        .with_input_fact(
            0,
            InferenceFact::dt_shape(f32::datum_type(), spec.input_shape()),
        )
        .step("typing the calibration graph's input")?
        .into_optimized()
        .step("optimising the calibration graph")?;
    let plan = runnable(model, spec.threads)?;
    let input = Tensor::from_shape(&spec.input_shape(), batch).step("calibration batch")?;
    let outputs = plan
        .run(tvec!(input.into()))
        .step("running the calibration graph")?;
    let mut cal = Calibration::default();
    for (i, layer) in probes.iter().enumerate() {
        let range = |t: &TValue| -> Result<(f32, f32), ModelError> {
            let v = t
                .to_plain_array_view::<f32>()
                .step("reading a calibration range")?;
            Ok(v.iter()
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), x| {
                    (lo.min(*x), hi.max(*x))
                }))
        };
        let r_in = range(&outputs[1 + 2 * i])?;
        let r_out = range(&outputs[2 + 2 * i])?;
        cal.ranges.insert(*layer, (r_in, r_out));
    }
    Ok(cal)
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
    }

    #[test]
    fn a_tract_failure_names_the_step_and_keeps_tract_s_reason_as_source() {
        let failed: TractResult<()> = Err(TractError::msg("shape mismatch"));
        let err = failed.step("optimising the model").unwrap_err();
        assert_eq!(err.to_string(), "optimising the model");
        let source = std::error::Error::source(&err).expect("tract's error is the source");
        assert_eq!(source.to_string(), "shape mismatch");
    }
}
