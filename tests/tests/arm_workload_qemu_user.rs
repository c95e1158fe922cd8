//! The aarch64 workload, cross-built by `scripts/test-arm.sh`, classifies one image under
//! qemu-user, every model in f32 and int8 on tract, and its logits match the x86-64 workload's.
//! This checks tract's aarch64 kernels (NEON f32 and int8 matmul, its arm64 assembly) against
//! its x86-64 ones on the same network, same seeded weights and same image, on two emulated
//! cores: the Raspberry Pi 4's Cortex-A72 (Armv8.0, NEON only) and the Pi 5's Cortex-A76
//! (Armv8.2: dot product and f16 arithmetic, which tract dispatches on from the auxiliary
//! vector qemu fills in for that core). Under qemu-user it is emulation: the latencies it logs
//! are not a board's.

use std::process::Command;
use std::time::Instant;

use greenpipe_tests::arm::{cross_binary, qemu_user, AARCH64};
use greenpipe_tests::workspace_binary;

/// f32: the largest logit difference over the largest logit magnitude. The two builds sum in a
/// different order (NEON 8×8 tiles against AVX2 16×6 ones, fused multiply-add on both), so
/// they agree to float rounding through 50+ layers, not bit for bit: the same bound the
/// engines test allows between engines.
const F32_TOLERANCE: f64 = 1e-3;

/// int8 runs the f32 network once to calibrate each activation's scale. The scales come out a
/// few ulps apart on the two builds, which moves some quantized activations by one step, and
/// the steps add up through the layers: a looser bound, but the same top class. Measured
/// (2026-12-02): 1.45e-2 for EfficientNet-B0 (swish and squeeze-excitation requantize most),
/// 2.3e-7 for MobileNetV2; f32 at most 1.4e-6.
const INT8_TOLERANCE: f64 = 0.05;

struct Classified {
    top_class: u64,
    logits: Vec<f64>,
}

/// The emulated cores: (qemu's name, the board it stands for).
const CORES: [(&str, &str); 2] = [
    ("cortex-a72", "Raspberry Pi 4"),
    ("cortex-a76", "Raspberry Pi 5"),
];

fn classify(program: &str, pre: &[&str], model: &str, precision: &str, size: &str) -> Classified {
    classify_on(program, pre, None, model, precision, size)
}

fn classify_on(
    program: &str,
    pre: &[&str],
    core: Option<&str>,
    model: &str,
    precision: &str,
    size: &str,
) -> Classified {
    let started = Instant::now();
    let mut command = Command::new(program);
    if let Some(core) = core {
        command.env("QEMU_CPU", core);
    }
    let out = command
        .args(pre)
        .args(["classify", "--model", model, "--precision", precision])
        .args(["--engine", "tract", "--image-size", size, "--image", "3"])
        .args(["--logits", "--top", "1"])
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {pre:?} classify {model} {precision}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{program} printed no JSON line ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    eprintln!(
        "{model} {precision} on {} {}: {:.1} s (build + one inference{})",
        line["host_arch"],
        core.unwrap_or("native"),
        started.elapsed().as_secs_f64(),
        if core.is_some() {
            ", emulated by qemu-user"
        } else {
            ""
        }
    );
    let logits: Vec<f64> = line["logits"]
        .as_array()
        .expect("--logits prints them")
        .iter()
        .map(|v| v.as_f64().expect("a logit is a number"))
        .collect();
    assert_eq!(logits.len(), 1000, "{model} {precision}");
    Classified {
        top_class: line["top"][0]["class"].as_u64().expect("a top class"),
        logits,
    }
}

fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = a
        .iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    diff / scale
}

fn compare(model: &str, size: &str) {
    let x86 = workspace_binary("greenpipe-workload");
    let x86 = x86.to_str().unwrap();
    let arm = cross_binary(AARCH64, "greenpipe-workload");
    let arm = arm.to_str().unwrap();
    let mut f32_logits = None;
    for (precision, tolerance) in [("f32", F32_TOLERANCE), ("int8", INT8_TOLERANCE)] {
        let native = classify(x86, &[], model, precision, size);
        for (core, board) in CORES {
            let emulated = classify_on(
                qemu_user(AARCH64),
                &[arm],
                Some(core),
                model,
                precision,
                size,
            );
            let diff = max_rel_diff(&native.logits, &emulated.logits);
            eprintln!(
                "{model} {precision}: aarch64 {core} ({board}) against x86-64, max relative difference {diff:.2e}"
            );
            assert!(
                diff <= tolerance,
                "{model} {precision}: aarch64 {core} logits differ from x86-64's by {diff:.2e} (> {tolerance:.0e})"
            );
            assert_eq!(
                native.top_class, emulated.top_class,
                "{model} {precision}: aarch64 {core} and x86-64 pick different classes"
            );
        }
        // Not a copy of the f32 network: int8 really ran its own quantized graph.
        match precision {
            "f32" => f32_logits = Some(native.logits),
            _ => assert_ne!(
                f32_logits.as_deref(),
                Some(&native.logits[..]),
                "{model}: int8 logits equal f32's, the quantized graph did not run"
            ),
        }
    }
}

#[test]
#[ignore = "needs the aarch64 cross builds: scripts/test-arm.sh runs it"]
fn mobilenet_v2_on_aarch64_matches_x86_64() {
    compare("mobilenet_v2", "64");
}

#[test]
#[ignore = "needs the aarch64 cross builds: scripts/test-arm.sh runs it"]
fn efficientnet_b0_on_aarch64_matches_x86_64() {
    compare("efficientnet_b0", "64");
}

#[test]
#[ignore = "needs the aarch64 cross builds: scripts/test-arm.sh runs it"]
fn resnet50_v2_on_aarch64_matches_x86_64() {
    compare("resnet50_v2", "32");
}
