//! ResNet-50 V2 (He et al., "Identity Mappings in Deep Residual Networks", ECCV 2016): the
//! pre-activation ResNet-50, as in the ONNX model zoo's `resnet50-v2` (exported from MXNet
//! Gluon): a 7×7/2 stem of 64 channels and 3×3/2 max pooling, then 3, 4, 6 and 3 bottleneck
//! blocks of 256, 512, 1024 and 2048 output channels (stride 2 in the 3×3 conv of each stage's
//! first block from the second stage on), each `BN → ReLU → 1×1 → BN → ReLU → 3×3 → BN → ReLU →
//! 1×1` plus the identity (or a 1×1 projection of the pre-activated input where the shape
//! changes), and a final BN → ReLU → global pooling → 1000-way classifier.

use super::graph::{GraphBuilder, Init, Value};

/// (output channels, blocks, first stride).
const STAGES: [(usize, usize, usize); 4] = [(256, 3, 1), (512, 4, 2), (1024, 6, 2), (2048, 3, 2)];

pub fn build(g: &mut GraphBuilder) -> Value {
    let x = g.input();
    let stem = g.conv(&x, 64, 7, 2, 1, Init::Rectified);
    let stem = g.batch_norm(&stem);
    let stem = g.relu(&stem);
    let mut x = g.max_pool(&stem, 3, 2);
    for (c, n, s) in STAGES {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            x = bottleneck(g, &x, c, stride);
        }
    }
    let x = g.batch_norm(&x);
    let x = g.relu(&x);
    let pooled = g.global_avg_pool(&x);
    let flat = g.flatten(&pooled);
    g.dense(&flat, 1000)
}

fn bottleneck(g: &mut GraphBuilder, x: &Value, out: usize, stride: usize) -> Value {
    let mid = out / 4;
    let pre = g.batch_norm(x);
    let pre = g.relu(&pre);
    let shortcut = if stride != 1 || x.channels != out {
        g.conv(&pre, out, 1, stride, 1, Init::Linear(1.0))
    } else {
        x.clone()
    };
    let h = g.conv(&pre, mid, 1, 1, 1, Init::Rectified);
    let h = g.batch_norm(&h);
    let h = g.relu(&h);
    let h = g.conv(&h, mid, 3, stride, 1, Init::Rectified);
    let h = g.batch_norm(&h);
    let h = g.relu(&h);
    // Damped last conv: sixteen identity additions would otherwise grow the scale 2^16-fold.
    let h = g.conv(&h, out, 1, 1, 1, Init::Linear(0.3));
    g.add(&shortcut, &h)
}
