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

use anyhow::{bail, Context};
use tract_onnx::prelude::*;
use tract_onnx::tract_core::floats::FloatPrecisionTranslator;
use tract_onnx::tract_core::transform::ModelTransform;

use graph::{Calibration, GraphBuilder, Mode};

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
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        Arch::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .with_context(|| {
                format!(
                    "unknown model {s:?}: expected mobilenet_v2, efficientnet_b0 or resnet50_v2"
                )
            })
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
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .with_context(|| format!("unknown precision {s:?}: expected f32, f16 or int8"))
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
    pub fn validate(&self) -> anyhow::Result<()> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if self.threads == 0 || self.threads > cpus {
            bail!(
                "--threads {} is outside 1..={cpus} (the CPUs this process may use)",
                self.threads
            );
        }
        if self.batch == 0 {
            bail!("--batch must be at least 1");
        }
        // Five stride-2 stages: smaller inputs vanish before the classifier.
        if self.image_size < 32 {
            bail!("--image-size {} is below 32 pixels", self.image_size);
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
    pub fn build(spec: &ModelSpec, calibration: &[f32]) -> anyhow::Result<Engine> {
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
            .context("parsing the generated ONNX graph")?
            .into_typed()?
            .into_decluttered()?;
        if spec.precision == Precision::F16 {
            FloatPrecisionTranslator::new(f32::datum_type(), f16::datum_type())
                .transform(&mut typed)
                .context("translating the model to f16")?;
        }
        let input_type = typed.input_fact(0)?.datum_type;
        let plan = runnable(typed.into_optimized()?, spec.threads)?;
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
    pub fn infer(&self, input: &[f32]) -> anyhow::Result<Vec<f32>> {
        if input.len() != self.spec.input_len() {
            bail!(
                "input has {} values, the model takes {:?} = {}",
                input.len(),
                self.spec.input_shape(),
                self.spec.input_len()
            );
        }
        let tensor = Tensor::from_shape(&self.spec.input_shape(), input)?;
        let tensor = if self.input_type == f32::datum_type() {
            tensor
        } else {
            tensor.cast_to_dt(self.input_type)?.into_owned()
        };
        let outputs = self.plan.run(tvec!(tensor.into()))?;
        let logits = outputs[0].cast_to::<f32>()?;
        Ok(logits
            .to_plain_array_view::<f32>()?
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

fn runnable(model: TypedModel, threads: usize) -> anyhow::Result<Plan> {
    let executor = if threads > 1 {
        tract_linalg::multithread::Executor::multithread_with_name(threads, "greenpipe-infer")
    } else {
        tract_linalg::multithread::Executor::SingleThread
    };
    let options = RunOptions {
        executor: Some(executor),
        ..Default::default()
    };
    model.into_runnable_with_options(&options)
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
fn calibrate(spec: &ModelSpec, batch: &[f32]) -> anyhow::Result<Calibration> {
    let (proto, probes) = proto_for(spec, Mode::Probe);
    let model = tract_onnx::onnx()
        .model_for_proto_model(&proto)
        .context("parsing the calibration graph")?
        // The first probe re-exports the graph input as an output, which leaves tract's source
        // node without a fact unless it is given again.
        .with_input_fact(
            0,
            InferenceFact::dt_shape(f32::datum_type(), spec.input_shape()),
        )?
        .into_optimized()?;
    let plan = runnable(model, spec.threads)?;
    let input = Tensor::from_shape(&spec.input_shape(), batch).context("calibration batch")?;
    let outputs = plan.run(tvec!(input.into()))?;
    let mut cal = Calibration::default();
    for (i, layer) in probes.iter().enumerate() {
        let range = |t: &TValue| -> anyhow::Result<(f32, f32)> {
            let v = t.to_plain_array_view::<f32>()?;
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
