//! Kernel benchmarks: DeepBench's inference GEMM and convolution problems ([`super::deepbench`]),
//! f32 and int8, each run by tract as a one-operator ONNX model (`MatMul`, `QLinearMatMul`,
//! `Conv`, `QLinearConv`) — the same kernels the inference workloads use. A worker thread
//! cycles through the problems of the chosen set (`--kernels.set device|server`); problems
//! whose f32 operands exceed `--kernels.max-bytes` are skipped and listed in the window's
//! config. Unit: `flops` (2·M·N·K, 2·N·K·C·R·S·P·Q; int8 multiply-adds count the same).

use super::{BenchError, Benchmark, Group};
#[cfg(feature = "tract")]
use on_tract::{conv, gemm};

#[cfg(feature = "tract")]
mod on_tract;

pub fn benchmarks() -> Vec<Benchmark> {
    let b = |name, prepare| Benchmark {
        name,
        group: Group::Kernels,
        unit: "flops",
        prepare,
    };
    vec![
        b("gemm-f32", |e| gemm(e, false)),
        b("gemm-int8", |e| gemm(e, true)),
        b("conv-f32", |e| conv(e, false)),
        b("conv-int8", |e| conv(e, true)),
    ]
}

/// Which DeepBench table (`--kernels.set`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Set {
    Device,
    Server,
}

impl Set {
    pub fn parse(s: &str) -> Result<Set, BenchError> {
        match s {
            "device" => Ok(Set::Device),
            "server" => Ok(Set::Server),
            _ => Err(BenchError::UnknownKernelSet(s.to_string())),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Set::Device => "device",
            Set::Server => "server",
        }
    }
}

/// Without tract there is nothing to run the kernels on: every kernel benchmark says so.
#[cfg(not(feature = "tract"))]
fn gemm(_: &super::Env, _: bool) -> Result<super::Prepared, BenchError> {
    Err(BenchError::Kernel {
        problem: "every DeepBench problem".into(),
        source: crate::model::ModelError::NotBuilt {
            engine: crate::model::EngineKind::of::<crate::model::tract::TractEngine>(),
        },
    })
}

#[cfg(not(feature = "tract"))]
fn conv(env: &super::Env, int8: bool) -> Result<super::Prepared, BenchError> {
    gemm(env, int8)
}
