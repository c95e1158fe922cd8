//! Idle power and the non-negative per-feature weights that split dynamic power over containers.
//!
//! `power ≈ idle + Σ w[f]·x[f]` with every `w[f] >= 0` and `idle >= 0`, fitted by non-negative
//! least squares on the raw features. Negative weights would hand a container negative watts for
//! doing more work, so they are constrained away rather than clipped after the fact.

use greenpipe_common::features::Feature;
use greenpipe_common::model::AttributionWeight;

use crate::samples::Matrix;

/// Non-negative least squares `min |A w - b|²`, `w >= 0`, by cyclic coordinate descent on the
/// normal equations (few columns: the Gram matrix is tiny and every step is exact).
pub fn nnls(a: &Matrix, b: &[f64]) -> Vec<f64> {
    let p = a.cols;
    let mut gram = vec![0.0; p * p];
    let mut atb = vec![0.0; p];
    for (i, bi) in b.iter().enumerate().take(a.rows) {
        let row = a.row(i);
        for j in 0..p {
            atb[j] += row[j] * bi;
            for k in 0..p {
                gram[j * p + k] += row[j] * row[k];
            }
        }
    }
    let mut w = vec![0.0; p];
    for _ in 0..10_000 {
        let mut change = 0.0f64;
        for j in 0..p {
            let g = gram[j * p + j];
            if g <= 0.0 {
                continue;
            }
            let grad: f64 = (0..p).map(|k| gram[j * p + k] * w[k]).sum::<f64>() - atb[j];
            let next = (w[j] - grad / g).max(0.0);
            change = change.max((next - w[j]).abs() * g.sqrt());
            w[j] = next;
        }
        if change < 1e-10 {
            break;
        }
    }
    w
}

/// Idle watts and per-feature weights (watts per raw unit) from raw inputs `x` and power `y`.
pub fn fit(features: &[Feature], x: &Matrix, y: &[f64]) -> (f64, Vec<AttributionWeight>) {
    // Scale columns to unit RMS so the coordinate steps are well conditioned; the last column is
    // the idle term.
    let rms: Vec<f64> = (0..x.cols)
        .map(|c| {
            let s = (0..x.rows).map(|i| x.row(i)[c].powi(2)).sum::<f64>() / x.rows.max(1) as f64;
            if s > 0.0 {
                s.sqrt()
            } else {
                1.0
            }
        })
        .collect();
    let mut data = Vec::with_capacity(x.rows * (x.cols + 1));
    for i in 0..x.rows {
        data.extend(x.row(i).iter().zip(&rms).map(|(v, s)| v / s));
        data.push(1.0);
    }
    let a = Matrix {
        rows: x.rows,
        cols: x.cols + 1,
        data,
    };
    let w = nnls(&a, y);
    let weights = features
        .iter()
        .zip(&w)
        .zip(&rms)
        .map(|((&feature, &w), &s)| AttributionWeight {
            feature,
            watts_per_unit: w / s,
        })
        .collect();
    (w[x.cols], weights)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_non_negative_weights_and_idle() {
        // power = 50 + 20·cpu + 1e-8·disk; a third column is anti-correlated noise that plain
        // least squares would give a negative weight.
        let mut data = Vec::new();
        let mut y = Vec::new();
        for i in 0..200 {
            let cpu = (i % 17) as f64 / 4.0;
            let disk = ((i * 7) % 23) as f64 * 1e7;
            let other = 10.0 - cpu;
            data.extend([cpu, disk, other]);
            y.push(50.0 + 20.0 * cpu + 1e-8 * disk);
        }
        let x = Matrix {
            rows: 200,
            cols: 3,
            data,
        };
        let features = [
            Feature::CpuSecondsPerSecond,
            Feature::DiskBytesPerSecond,
            Feature::MemoryUsedBytes,
        ];
        let (idle, w) = fit(&features, &x, &y);
        assert!(w.iter().all(|w| w.watts_per_unit >= 0.0));
        let predicted = |i: usize| {
            idle + w
                .iter()
                .zip(x.row(i))
                .map(|(w, v)| w.watts_per_unit * v)
                .sum::<f64>()
        };
        for i in [0, 50, 199] {
            assert!(
                (predicted(i) - y[i]).abs() < 1e-3,
                "{} vs {}",
                predicted(i),
                y[i]
            );
        }
    }
}
