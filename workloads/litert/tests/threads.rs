//! The thread count reaches LiteRT's CPU accelerator: a model compiled for 2 threads owns one
//! more thread of this process (XNNPACK's pool worker) than one compiled for 1. It runs in a
//! process of its own, so no other test's threads come and go while it counts.

use std::time::Instant;

use crate::common::*;
use greenpipe_litert::{convert, CompiledModel, Precision};

fn tasks() -> Vec<u32> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

fn threads_of_process() -> usize {
    tasks().len()
}

/// User + system CPU time of thread `tid`, in clock ticks (fields 14 and 15 of its stat, after
/// the parenthesised command name).
fn cpu_ticks(tid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).expect("task stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// Four 3×3 convs of 64 channels at 56×56: about 1 GFLOP per inference.
fn heavy_model() -> Vec<u8> {
    let mut rng = Rng::new(42);
    let mut g = Onnx::new();
    let mut x = "input".to_string();
    let mut cin = 3;
    for _ in 0..4 {
        let w = g.constant(&[64, cin, 3, 3], &rng.vec(64 * cin * 9, 0.1));
        let b = g.constant(&[64], &rng.vec(64, 0.1));
        let y = g.node(
            "Conv",
            &[&x, &w, &b],
            vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
        );
        x = g.node("Relu", &[&y], vec![]);
        cin = 64;
    }
    let p = g.node("GlobalAveragePool", &[&x], vec![]);
    let f = g.node("Flatten", &[&p], vec![]);
    let w = g.constant(&[64, 10], &rng.vec(640, 0.1));
    let b = g.constant(&[10], &rng.vec(10, 0.1));
    let y = g.node("Gemm", &[&f, &w, &b], vec![]);
    g.finish(&[1, 3, 56, 56], &y, 10)
}

fn per_second(model: &CompiledModel, input: &[f32]) -> f64 {
    model.run(input).expect("warm-up run");
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed().as_secs_f64() < 1.0 {
        model.run(input).expect("run");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

#[test]
fn threads_reach_the_cpu_accelerator() {
    crate::common::alone_in_process(
        module_path!(),
        "threads_reach_the_cpu_accelerator",
        threads_reach_the_cpu_accelerator_alone,
    );
}

fn threads_reach_the_cpu_accelerator_alone() {
    let rt = litert();
    let tflite =
        convert(&heavy_model(), Precision::F32, None, &rt).unwrap_or_else(|e| panic!("{e}"));
    let input = Rng::new(1).vec(3 * 56 * 56, 1.0);

    let before = threads_of_process();
    let one = rt.compile(&tflite, 1).unwrap_or_else(|e| panic!("{e}"));
    let with_one = threads_of_process();
    let old = tasks();
    let two = rt.compile(&tflite, 2).unwrap_or_else(|e| panic!("{e}"));
    let with_two = threads_of_process();
    let workers: Vec<u32> = tasks().into_iter().filter(|t| !old.contains(t)).collect();
    let three = rt.compile(&tflite, 3).unwrap_or_else(|e| panic!("{e}"));
    let with_three = threads_of_process();
    let default = rt.compile(&tflite, 0).unwrap_or_else(|e| panic!("{e}"));
    let with_default = threads_of_process();
    eprintln!(
        "process threads: {before} before, {with_one} after compiling for 1 thread, \
         {with_two} after 2, {with_three} after 3, {with_default} after LiteRT's default (0)"
    );
    assert_eq!(with_one, before, "a 1-thread model started threads");
    assert_eq!(
        with_two,
        with_one + 1,
        "a 2-thread model did not start one pool worker"
    );
    assert_eq!(
        with_three,
        with_two + 2,
        "a 3-thread model did not start two pool workers"
    );

    let idle: u64 = workers.iter().map(|&t| cpu_ticks(t)).sum();
    let (r1, r2) = (per_second(&one, &input), per_second(&two, &input));
    let busy: u64 = workers.iter().map(|&t| cpu_ticks(t)).sum();
    eprintln!(
        "inferences/s: {r1:.1} with 1 thread, {r2:.1} with 2; the 2-thread model's pool worker \
         computed for {} clock ticks",
        busy - idle
    );
    // Wall-clock speed-up depends on idle cores; the worker's CPU time shows it shares the work.
    assert!(
        busy > idle,
        "the pool worker did no work during the 2-thread runs"
    );
    // Outputs agree whatever the thread count.
    let (a, b) = (one.run(&input).expect("run"), two.run(&input).expect("run"));
    let diff = a
        .iter()
        .zip(&b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(diff < 1e-5, "1- and 2-thread outputs differ by {diff}");
    drop((three, default));
}
