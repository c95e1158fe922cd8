//! Each network builds and runs one inference in every precision: outputs are finite, spread
//! (not collapsed to a constant), deterministic for a seed, and int8/f16 stay close to f32 on
//! the same weights. Small inputs (64×64, batch 1) keep the runtime short; the architectures
//! are fully convolutional up to the global pooling, so the layers are the published ones.

use greenpipe_workload::images::ImageSet;
use greenpipe_workload::model::{Arch, Engine, ModelSpec, Precision, CLASSES, DEFAULT_SEED};

fn spec(arch: Arch, precision: Precision) -> ModelSpec {
    ModelSpec {
        arch,
        precision,
        threads: 1,
        batch: 1,
        image_size: 64,
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
    let input = images.batch(0, 1, 64).unwrap();
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
    let other = f32_engine.infer(&images.batch(1, 1, 64).unwrap()).unwrap();
    assert!(
        cosine(&reference, &other) < 0.999999,
        "{arch}: output ignores the input"
    );

    for precision in [Precision::F16, Precision::Int8] {
        let engine = Engine::build(&spec(arch, precision), &input).unwrap();
        eprintln!("{arch} {precision} built {:?}", t0.elapsed());
        let out = engine.infer(&input).unwrap();
        eprintln!("{arch} {precision} inferred {:?}", t0.elapsed());
        assert!(
            out.iter().all(|v| v.is_finite()),
            "{arch} {precision} not finite"
        );
        assert_eq!(
            out,
            engine.infer(&input).unwrap(),
            "{arch} {precision} not deterministic"
        );
        let c = cosine(&reference, &out);
        println!("{arch} {precision}: cosine to f32 {c:.5}");
        assert!(c > 0.95, "{arch} {precision} far from f32: cosine {c}");
    }
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
