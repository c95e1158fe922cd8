//! Each network builds and runs one inference in every precision: outputs are finite, spread
//! (not collapsed to a constant), deterministic for a seed, and int8/f16 stay close to f32 on
//! the same weights without being equal to it. Small inputs (batch 1, 64×64; 32×32 for
//! ResNet-50) keep the runtime short; the architectures are fully convolutional up to the
//! global pooling, so the layers are the published ones.
//!
//! f16 on x86-64 runs tract's generic (emulated) f16 matmul kernel, about 100× slower than f32:
//! one ResNet-50 f16 inference at 32×32 takes tens of seconds in this build, so its f16
//! determinism is shown by identical graphs for one seed rather than by a second inference.

#![cfg(feature = "tract")]

use greenpipe_workload::images::ImageSet;
use greenpipe_workload::model::graph::Mode;
use greenpipe_workload::model::{
    Arch, Engine, EngineKind, ModelSpec, Precision, CLASSES, DEFAULT_SEED,
};

use tract_onnx::prelude::DatumType;

fn size(arch: Arch) -> usize {
    match arch {
        Arch::ResNet50V2 => 32,
        _ => 64,
    }
}

fn spec(arch: Arch, precision: Precision) -> ModelSpec {
    ModelSpec {
        arch,
        precision,
        engine: EngineKind::of::<greenpipe_workload::model::tract::TractEngine>(),
        threads: 1,
        batch: 1,
        image_size: size(arch),
        seed: DEFAULT_SEED,
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

fn std_dev(v: &[f32]) -> f32 {
    let mean = v.iter().sum::<f32>() / v.len() as f32;
    (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / v.len() as f32).sqrt()
}

fn check(arch: Arch) {
    let t0 = std::time::Instant::now();
    let images = ImageSet::generated(2);
    let input = images.batch(0, 1, size(arch)).unwrap();
    let f32_engine = Engine::build(&spec(arch, Precision::F32), &input).unwrap();
    eprintln!("{arch} f32 built {:?}", t0.elapsed());
    let reference = f32_engine.infer(&input).unwrap();
    eprintln!("{arch} f32 inferred {:?}", t0.elapsed());
    assert_eq!(reference.len(), CLASSES);
    assert!(
        reference.iter().all(|v| v.is_finite()),
        "{arch} f32 not finite"
    );
    let spread = std_dev(&reference);
    assert!(
        spread > 1e-3 && spread < 1e3,
        "{arch} f32 logits spread {spread}: activations collapsed or exploded"
    );
    // Deterministic: a second engine of the same seed gives the same logits.
    let again = Engine::build(&spec(arch, Precision::F32), &input).unwrap();
    assert_eq!(
        reference,
        again.infer(&input).unwrap(),
        "{arch} f32 not deterministic"
    );
    // Another image gives other logits (the input reaches the output).
    let other = f32_engine
        .infer(&images.batch(1, 1, size(arch)).unwrap())
        .unwrap();
    assert!(
        cosine(&reference, &other) < 0.999999,
        "{arch}: output ignores the input"
    );

    for precision in [Precision::F16, Precision::Int8] {
        let engine = Engine::build(&spec(arch, precision), &input).unwrap();
        let expected_type = match precision {
            Precision::F16 => DatumType::F16,
            _ => DatumType::F32,
        };
        assert_eq!(
            engine.input_datum_type(),
            expected_type,
            "{arch} {precision}"
        );
        eprintln!("{arch} {precision} built {:?}", t0.elapsed());
        let out = engine.infer(&input).unwrap();
        eprintln!("{arch} {precision} inferred {:?}", t0.elapsed());
        assert_eq!(out.len(), CLASSES);
        assert!(
            out.iter().all(|v| v.is_finite()),
            "{arch} {precision} not finite"
        );
        if precision == Precision::F16 && arch == Arch::ResNet50V2 {
            // Same seed, same graph: the f16 model is the translation of this graph.
            let a = greenpipe_workload::model::proto_for(&spec(arch, precision), Mode::Float).0;
            let b = greenpipe_workload::model::proto_for(&spec(arch, precision), Mode::Float).0;
            assert!(a == b, "{arch}: one seed built two different graphs");
        } else {
            assert_eq!(
                out,
                engine.infer(&input).unwrap(),
                "{arch} {precision} not deterministic"
            );
        }
        // Computed in the other precision, not a copy of the f32 path.
        assert_ne!(out, reference, "{arch} {precision} equals f32 bit for bit");
        let c = cosine(&reference, &out);
        let rel = max_rel_diff(&reference, &out);
        println!("{arch} {precision}: cosine to f32 {c:.6}, max |diff| / max |f32| {rel:.4}");
        assert!(c > 0.95, "{arch} {precision} far from f32: cosine {c}");
        // The class a classifier would answer survives: f32's top-1 is in the top 5 here.
        let top1 = argmax(&reference);
        let rank = out.iter().filter(|v| **v > out[top1]).count();
        println!("{arch} {precision}: f32's top-1 class ranks {rank} (0 = first)");
        assert!(rank < 5, "{arch} {precision}: f32's top-1 ranks {rank}");
    }
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
        .unwrap()
}

fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
    let scale = a.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn mobilenet_v2_all_precisions() {
    check(Arch::MobileNetV2);
}

#[test]
fn efficientnet_b0_all_precisions() {
    check(Arch::EfficientNetB0);
}

#[test]
fn resnet50_v2_all_precisions() {
    check(Arch::ResNet50V2);
}
