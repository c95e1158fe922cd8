//! Every engine computes the same network: on one image, each architecture's f32 logits from
//! ONNX Runtime and from LiteRT match tract's within a stated tolerance, and each engine's int8
//! network stays close to its f32 one without being a copy of it.
//!
//! The C++ engines' libraries come from `GREENPIPE_ONNXRUNTIME_LIB` and `GREENPIPE_LITERT_LIB`
//! (`scripts/test.sh` sets them to what `scripts/setup.sh` installs). A missing library fails
//! the test: it is part of what CI checks, not optional.

use std::path::PathBuf;

use greenpipe_workload::images::ImageSet;
use greenpipe_workload::model::litert::LiteRtEngine;
use greenpipe_workload::model::onnxruntime::OnnxRuntimeEngine;
use greenpipe_workload::model::tract::TractEngine;
use greenpipe_workload::model::{
    Arch, Engine, EngineKind, Libraries, ModelSpec, Precision, CLASSES, DEFAULT_SEED, ENGINES,
};

/// f32 against f32: the largest logit difference over the largest logit magnitude. Engines
/// order their sums differently (im2col vs direct vs Winograd-free XNNPACK kernels, fused
/// multiply-add or not), so they agree to float rounding through 50+ layers, not bit for bit.
const F32_TOLERANCE: f32 = 1e-3;

fn library(var: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: run scripts/setup.sh and export it (scripts/test.sh does)")
    });
    assert!(
        path.is_file(),
        "{var}={} does not exist: scripts/setup.sh installs it",
        path.display()
    );
    path
}

/// Every engine's library, from its environment variable.
fn libraries() -> Libraries {
    ENGINES
        .iter()
        .filter_map(|e| Some((*e, e.library()?)))
        .fold(Libraries::default(), |libs, (e, l)| {
            libs.with(e, library(l.env))
        })
}

fn size(arch: Arch) -> usize {
    match arch {
        Arch::ResNet50V2 => 32,
        _ => 64,
    }
}

fn spec(arch: Arch, precision: Precision, engine: EngineKind) -> ModelSpec {
    ModelSpec {
        arch,
        precision,
        engine,
        threads: 1,
        batch: 1,
        image_size: size(arch),
        seed: DEFAULT_SEED,
    }
}

fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
    let scale = a.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let diff = a
        .iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    diff / scale
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

fn run(arch: Arch, precision: Precision, engine: EngineKind, input: &[f32]) -> Vec<f32> {
    let built = Engine::build_with(&spec(arch, precision, engine), input, &libraries())
        .unwrap_or_else(|e| panic!("{arch} {engine} {precision}: {e:#}"));
    let out = built.infer(input).unwrap();
    assert_eq!(out.len(), CLASSES, "{arch} {engine} {precision}");
    assert!(
        out.iter().all(|v| v.is_finite()),
        "{arch} {engine} {precision} not finite"
    );
    out
}

fn check(arch: Arch, engine: EngineKind) {
    let images = ImageSet::generated(2);
    let input = images.batch(0, 1, size(arch)).unwrap();
    let reference = run(
        arch,
        Precision::F32,
        EngineKind::of::<TractEngine>(),
        &input,
    );
    let f32_out = run(arch, Precision::F32, engine, &input);
    let rel = max_rel_diff(&reference, &f32_out);
    println!("{arch} {engine} f32 vs tract f32: max |diff| / max |logit| {rel:.2e}");
    assert!(
        rel < F32_TOLERANCE,
        "{arch}: {engine} f32 differs from tract f32 by {rel:.2e} of the logit scale"
    );
    let int8 = run(arch, Precision::Int8, engine, &input);
    assert_ne!(
        int8, f32_out,
        "{arch} {engine}: int8 equals f32 bit for bit"
    );
    let c = cosine(&f32_out, &int8);
    println!("{arch} {engine} int8 vs its f32: cosine {c:.4}");
    assert!(c > 0.95, "{arch} {engine} int8 far from f32: cosine {c}");
}

#[test]
fn onnxruntime_computes_tract_s_networks() {
    for arch in Arch::ALL {
        check(arch, EngineKind::of::<OnnxRuntimeEngine>());
    }
}

#[test]
fn litert_computes_tract_s_networks() {
    for arch in Arch::ALL {
        check(arch, EngineKind::of::<LiteRtEngine>());
    }
}

#[test]
fn a_missing_engine_library_is_one_clear_error() {
    let with_library: Vec<EngineKind> = ENGINES
        .iter()
        .copied()
        .filter(|e| e.library().is_some())
        .collect();
    let libs = with_library.iter().fold(Libraries::default(), |libs, e| {
        let file = e.library().map_or("", |l| l.file);
        libs.with(*e, format!("/nonexistent/{file}"))
    });
    let images = ImageSet::generated(1);
    let input = images.batch(0, 1, 64).unwrap();
    assert!(!with_library.is_empty());
    for engine in with_library {
        let err = Engine::build_with(
            &spec(Arch::MobileNetV2, Precision::F32, engine),
            &input,
            &libs,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/nonexistent/"), "{err}");
        assert!(err.contains("scripts/setup.sh"), "{err}");
    }
}
