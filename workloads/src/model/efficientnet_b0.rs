//! EfficientNet-B0 (Tan & Le, "EfficientNet: Rethinking Model Scaling for Convolutional Neural
//! Networks", ICML 2019, Table 1): a 3×3/2 stem of 32 channels, sixteen MBConv blocks with
//! squeeze-and-excitation (ratio 0.25 of the block's input width) and swish, a 1×1 conv to
//! 1280, global pooling and a 1000-way classifier. Drop-connect and dropout are training-only.

use super::graph::{GraphBuilder, Init, Value};

/// (expansion, kernel, first stride, output channels, repeats), stages 2–8 of the paper's table.
const STAGES: [(usize, usize, usize, usize, usize); 7] = [
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
];

pub fn build(g: &mut GraphBuilder) -> Value {
    let x = g.input();
    let stem = g.conv(&x, 32, 3, 2, 1, Init::Rectified);
    let mut x = g.swish(&stem);
    for (e, k, s, c, n) in STAGES {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            x = mb_conv(g, &x, e, k, stride, c);
        }
    }
    let head = g.conv(&x, 1280, 1, 1, 1, Init::Rectified);
    let head = g.swish(&head);
    let pooled = g.global_avg_pool(&head);
    let flat = g.flatten(&pooled);
    g.dense(&flat, 1000)
}

fn mb_conv(
    g: &mut GraphBuilder,
    x: &Value,
    expansion: usize,
    kernel: usize,
    stride: usize,
    out: usize,
) -> Value {
    let hidden = x.channels * expansion;
    let mut h = x.clone();
    if expansion != 1 {
        h = g.conv(&h, hidden, 1, 1, 1, Init::Rectified);
        h = g.swish(&h);
    }
    h = g.conv(&h, hidden, kernel, stride, hidden, Init::Rectified);
    h = g.swish(&h);
    // Squeeze-and-excitation: the reduced width is a quarter of the block's input width.
    let squeezed = (x.channels / 4).max(1);
    let se = g.global_avg_pool(&h);
    let se = g.conv(&se, squeezed, 1, 1, 1, Init::Rectified);
    let se = g.swish(&se);
    let se = g.conv(&se, hidden, 1, 1, 1, Init::Linear(1.0));
    let gate = g.sigmoid(&se);
    h = g.mul(&h, &gate);
    let residual = stride == 1 && x.channels == out;
    // The gate halves the scale on average and swish shrinks it further: a gain of 2 restores it,
    // damped to 1 where a residual adds to the projection.
    let gain = if residual { 1.0 } else { 2.0 };
    let projected = g.conv(&h, out, 1, 1, 1, Init::Linear(gain));
    if residual {
        g.add(x, &projected)
    } else {
        projected
    }
}
