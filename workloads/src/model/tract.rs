//! The tract engine.
//!
//! Why tract: it is pure Rust (no C++ runtime to cross-compile for a Raspberry Pi), has arm64
//! NEON kernels, real depthwise convolution, int8 `QLinearConv`/`QLinearMatMul`, an f32→f16
//! model translator, and an explicit per-plan thread pool; its ONNX front end accepts a
//! `ModelProto` built in memory, so the published architectures are written once as ONNX and
//! no model file or model hub is needed.
//!
//! Optional (cargo feature `tract`): without it only [`TractEngine`]'s declaration is compiled, so
//! `--engine tract` still parses and says what the build lacks.

use std::sync::Arc;

#[cfg(feature = "tract")]
use tract_onnx::prelude::*;
#[cfg(feature = "tract")]
use tract_onnx::tract_core::floats::FloatPrecisionTranslator;
#[cfg(feature = "tract")]
use tract_onnx::tract_core::transform::ModelTransform;

#[cfg(feature = "tract")]
use prost::Message as _;

#[cfg(feature = "tract")]
use super::graph::{Calibration, Mode};
use super::{InferenceEngine, Libraries, ModelError, ModelSpec, Network, Precision};
#[cfg(feature = "tract")]
use greenpipe_workload_numeric::min_max;

/// The tract engine.
pub struct TractEngine;

impl InferenceEngine for TractEngine {
    const NAME: &'static str = "tract";
    const TITLE: &'static str = "tract";
    const PLATFORM: &'static str = "tract_onnx";
    /// f16 too: tract converts the typed model.
    const PRECISIONS: &'static [Precision] = &Precision::ALL;
    const FEATURE: Option<&'static str> = Some("tract");
    const BUILT: bool = cfg!(feature = "tract");

    #[cfg(feature = "tract")]
    fn build(
        spec: &ModelSpec,
        calibration: &[f32],
        _: &Libraries,
    ) -> Result<Arc<dyn Network>, ModelError> {
        let mode = if spec.precision == Precision::Int8 {
            Mode::Int8(calibrate(spec, calibration)?)
        } else {
            Mode::Float
        };
        Ok(Arc::new(TractNetwork::build(spec, mode)?))
    }

    /// Not reached: [`EngineKind`](super::EngineKind) refuses an engine this build lacks first.
    #[cfg(not(feature = "tract"))]
    fn build(_: &ModelSpec, _: &[f32], _: &Libraries) -> Result<Arc<dyn Network>, ModelError> {
        Err(ModelError::NotBuilt {
            engine: super::EngineKind::of::<TractEngine>(),
        })
    }
}

/// Names the tract step that failed (the kernel benchmarks' one-operator models use it too).
#[cfg(feature = "tract")]
pub(crate) trait TractStep<T> {
    fn step(self, step: &'static str) -> Result<T, ModelError>;
}

#[cfg(feature = "tract")]
impl<T> TractStep<T> for TractResult<T> {
    fn step(self, step: &'static str) -> Result<T, ModelError> {
        self.map_err(|e| ModelError::Tract {
            step,
            source: e.into(),
        })
    }
}

#[cfg(feature = "tract")]
type Plan = Arc<TypedRunnableModel>;

/// A graph as tract's own ONNX messages. Graphs are written with the workload's messages
/// (`super::onnx`, the same schema), so that builds without tract write them too; one encode and
/// decode carries them across.
#[cfg(feature = "tract")]
pub(crate) fn to_tract(
    proto: &super::onnx::ModelProto,
) -> Result<tract_onnx::pb::ModelProto, ModelError> {
    tract_onnx::pb::ModelProto::decode(proto.encode_to_vec().as_slice()).map_err(|e| {
        ModelError::Tract {
            step: "reading the generated ONNX graph",
            source: e.into(),
        }
    })
}

/// `spec`'s graph in `mode`, for tract, and what it probes.
#[cfg(feature = "tract")]
fn proto_for(
    spec: &ModelSpec,
    mode: Mode,
) -> Result<(tract_onnx::pb::ModelProto, super::graph::Probes), ModelError> {
    let (proto, probes) = super::proto_for(spec, mode);
    Ok((to_tract(&proto)?, probes))
}

/// A network optimised by tract, ready to run.
#[cfg(feature = "tract")]
#[derive(Debug, Clone)]
pub struct TractNetwork {
    plan: Plan,
    input_type: DatumType,
}

#[cfg(feature = "tract")]
impl TractNetwork {
    /// Builds `spec`'s network from the graph in `mode` (float, or int8 with its calibration).
    pub fn build(spec: &ModelSpec, mode: Mode) -> Result<TractNetwork, ModelError> {
        // Before any optimisation: that is where tract picks its kernels.
        configure_tract();
        let (proto, _) = proto_for(spec, mode)?;
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
        Ok(TractNetwork {
            plan: runnable(optimized, spec.threads)?,
            input_type,
        })
    }
}

#[cfg(feature = "tract")]
impl Network for TractNetwork {
    /// f16 for an f16 model (the translator converts every f32 tensor), f32 otherwise (int8
    /// quantizes inside the graph).
    fn input_precision(&self) -> Precision {
        if self.input_type == f16::datum_type() {
            Precision::F16
        } else {
            Precision::F32
        }
    }

    fn infer(&self, shape: &[usize; 4], input: &[f32]) -> Result<Vec<f32>, ModelError> {
        let tensor = Tensor::from_shape(shape, input).step("shaping the input")?;
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
/// x86-64 only: tract refuses (panics on) a token of another architecture's feature set, which
/// is how every inference on aarch64 failed before the ARM workload test existed.
#[cfg(feature = "tract")]
pub fn configure_tract() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if cfg!(target_arch = "x86_64") && std::env::var_os("TRACT_CPU_ISA").is_none() {
            if let Err(e) =
                tract_onnx::tract_core::knobs::set_config_global("TRACT_CPU_ISA", "-amx-int8")
            {
                tracing::warn!(error = %e, "could not keep tract off its AMX int8 kernel");
            }
        }
    });
}

#[cfg(feature = "tract")]
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

/// Runs the f32 graph with every quantizable layer's input and output exposed and records
/// their ranges (ONNX Runtime runs the same probe graph: `onnxruntime::calibrate`).
#[cfg(feature = "tract")]
pub fn calibrate(spec: &ModelSpec, batch: &[f32]) -> Result<Calibration, ModelError> {
    configure_tract();
    let (proto, probes) = proto_for(spec, Mode::Probe)?;
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
    let ranges = outputs[1..]
        .iter()
        .map(|t| -> Result<(f32, f32), ModelError> {
            let v = t
                .to_plain_array_view::<f32>()
                .step("reading a calibration range")?;
            let v = v.as_standard_layout();
            Ok(min_max(
                v.as_slice().expect("a standard layout is contiguous"),
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cal = Calibration::from_ranges(&probes, &ranges);
    Ok(cal)
}

#[cfg(all(test, feature = "tract"))]
mod tests {
    use super::*;

    #[test]
    fn a_tract_failure_names_the_step_and_keeps_tract_s_reason_as_source() {
        let failed: TractResult<()> = Err(TractError::msg("shape mismatch"));
        let err = failed.step("optimising the model").unwrap_err();
        assert_eq!(err.to_string(), "optimising the model");
        let source = std::error::Error::source(&err).expect("tract's error is the source");
        assert_eq!(source.to_string(), "shape mismatch");
    }
}
