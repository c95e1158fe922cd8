//! MobileNetV2 (Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks",
//! CVPR 2018, Table 2), width 1.0: a 3×3/2 stem of 32 channels, seventeen inverted-residual
//! bottlenecks, a 1×1 conv to 1280, global pooling and a 1000-way classifier. ReLU6 after every
//! expansion and depthwise conv; the projection is linear; a block keeps its input as a residual
//! when stride is 1 and the widths match.

use super::graph::{GraphBuilder, Init, Value};

/// (expansion t, output channels c, repeats n, first stride s), the paper's table.
const BOTTLENECKS: [(usize, usize, usize, usize); 7] = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
];

pub fn build(g: &mut GraphBuilder) -> Value {
    let x = g.input();
    let stem = g.conv(&x, 32, 3, 2, 1, Init::Rectified);
    let mut x = g.relu6(&stem);
    for (t, c, n, s) in BOTTLENECKS {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            x = inverted_residual(g, &x, t, c, stride);
        }
    }
    let head = g.conv(&x, 1280, 1, 1, 1, Init::Rectified);
    let head = g.relu6(&head);
    let pooled = g.global_avg_pool(&head);
    let flat = g.flatten(&pooled);
    g.dense(&flat, 1000)
}

fn inverted_residual(
    g: &mut GraphBuilder,
    x: &Value,
    expansion: usize,
    out: usize,
    stride: usize,
) -> Value {
    let hidden = x.channels * expansion;
    let mut h = x.clone();
    if expansion != 1 {
        h = g.conv(&h, hidden, 1, 1, 1, Init::Rectified);
        h = g.relu6(&h);
    }
    h = g.conv(&h, hidden, 3, stride, hidden, Init::Rectified);
    h = g.relu6(&h);
    let residual = stride == 1 && x.channels == out;
    // A damped linear projection where a residual adds to it keeps the sum's scale from
    // compounding over the blocks of a stage.
    let gain = if residual { 0.5 } else { 1.0 };
    let projected = g.conv(&h, out, 1, 1, 1, Init::Linear(gain));
    if residual {
        g.add(x, &projected)
    } else {
        projected
    }
}
