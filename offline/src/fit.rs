//! Fitting one candidate on chosen rows and columns of a node's samples, and predicting.
//!
//! Standardisation is computed on the training rows only (never on the rows being scored), and
//! prediction goes through `ModelKind::predict_scaled`, the code the online estimator runs.
//!
//! No fit gets an unbounded weight: an input that is constant in the fit's own training rows is
//! left out of that fit (its coefficient would be arbitrary, and it meets real values only at
//! prediction time), and so, for unpenalised least squares, is an input that the inputs before it
//! explain almost entirely (collinear: the coefficients of the pair would cancel on training rows
//! and explode elsewhere). Predictions are then clamped into the training power range widened by
//! its width ([`PowerBounds`]), and every clamped row is counted.

use greenpipe_common::model::{FeatureScaling, ModelKind, PowerBounds};

use crate::models::{Candidate, FitError, Fits};
use crate::samples::NodeSamples;

/// A fitted model: inputs, their scaling and the regressor.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// Columns of [`NodeSamples::x`] used, in model order.
    pub columns: Vec<usize>,
    /// Standardisation of those columns.
    pub scaling: Vec<FeatureScaling>,
    /// The regressor.
    pub kind: ModelKind,
    /// Columns asked for but left out: constant or collinear in the training rows.
    pub dropped: Vec<usize>,
    /// Predictions are clamped into these.
    pub bounds: PowerBounds,
}

/// Share of an input's variance that the inputs before it must leave unexplained for an
/// unpenalised linear fit to keep it (R² > 0.999 against them, a variance inflation above 1000,
/// drops it).
const COLLINEAR_RESIDUAL: f64 = 1e-3;

/// Whether a column of this mean and standard deviation is constant (its spread vanishes next to
/// its level: 8 significant digits in the trace format).
fn is_constant(mean: f64, sd: f64) -> bool {
    !(sd > 1e-9 * mean.abs() && sd > 0.0)
}

/// Columns (positions in `z`, standardised) that the columns before them do not explain: a
/// pivoted Cholesky of the correlation matrix in column order.
fn independent_columns(z: &crate::samples::Matrix) -> Vec<usize> {
    let (n, p) = (z.rows.max(1) as f64, z.cols);
    let mut gram = vec![0.0; p * p];
    for i in 0..z.rows {
        let r = z.row(i);
        for j in 0..p {
            for k in j..p {
                gram[j * p + k] += r[j] * r[k] / n;
            }
        }
    }
    let mut kept: Vec<usize> = Vec::new();
    // Rows of the Cholesky factor of the kept columns' Gram matrix, in kept order.
    let mut factor: Vec<Vec<f64>> = Vec::new();
    for j in 0..p {
        let g = |a: usize, b: usize| gram[a.min(b) * p + a.max(b)];
        let mut row = Vec::with_capacity(kept.len() + 1);
        for (t, &k) in kept.iter().enumerate() {
            let dot: f64 = (0..t).map(|u| factor[t][u] * row[u]).sum();
            row.push((g(j, k) - dot) / factor[t][t]);
        }
        let residual = g(j, j) - row.iter().map(|v| v * v).sum::<f64>();
        if residual > COLLINEAR_RESIDUAL * g(j, j) && residual > 0.0 {
            row.push(residual.sqrt());
            factor.push(row);
            kept.push(j);
        }
    }
    kept
}

/// Fits `candidate` on `rows`, reading the columns `columns`.
pub fn fit(
    s: &NodeSamples,
    rows: &[usize],
    columns: &[usize],
    candidate: &Candidate,
) -> Result<Fitted, FitError> {
    fit_reusing(s, rows, columns, candidate, &mut Fits::default())
}

/// As [`fit`], reusing models in `fits`, which must come from the same rows and columns.
pub fn fit_reusing(
    s: &NodeSamples,
    rows: &[usize],
    columns: &[usize],
    candidate: &Candidate,
    fits: &mut Fits,
) -> Result<Fitted, FitError> {
    let selected = s.x.select(rows);
    let raw = selected.columns(columns);
    let features: Vec<_> = columns.iter().map(|&c| s.features[c]).collect();
    let scaling = raw.standardisation(&features);
    // standardisation() puts scale 1 on a zero spread; the raw spread tells them apart.
    let mut keep: Vec<usize> = (0..columns.len())
        .filter(|&i| !is_constant(scaling[i].mean, column_sd(&raw, i)))
        .collect();
    if candidate.drops_collinear_inputs() && !keep.is_empty() {
        let z = raw
            .columns(&keep)
            .standardised(&keep.iter().map(|&i| scaling[i].clone()).collect::<Vec<_>>());
        keep = independent_columns(&z)
            .into_iter()
            .map(|t| keep[t])
            .collect();
    }
    if keep.is_empty() {
        return Err(FitError::ConstantInputs {
            candidate: candidate.name(),
        });
    }
    let dropped: Vec<usize> = (0..columns.len())
        .filter(|i| !keep.contains(i))
        .map(|i| columns[i])
        .collect();
    let y: Vec<f64> = rows.iter().map(|&i| s.y[i]).collect();
    let (lo, hi) = y
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let bounds = PowerBounds::from_training(lo, hi);
    let (columns, scaling): (Vec<usize>, Vec<FeatureScaling>) = keep
        .iter()
        .map(|&i| (columns[i], scaling[i].clone()))
        .unzip();
    let kind = if dropped.is_empty() {
        candidate.fit_reusing(&raw.standardised(&scaling), &y, fits)?
    } else {
        // Another column set: the cache of this training set's models does not apply.
        let fewer = selected.columns(&columns);
        candidate.fit(&fewer.standardised(&scaling), &y)?
    };
    Ok(Fitted {
        columns,
        scaling,
        kind,
        dropped,
        bounds,
    })
}

fn column_sd(m: &crate::samples::Matrix, c: usize) -> f64 {
    let n = m.rows.max(1) as f64;
    let mean = (0..m.rows).map(|i| m.row(i)[c]).sum::<f64>() / n;
    ((0..m.rows)
        .map(|i| (m.row(i)[c] - mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt()
}

/// Predicted watts for `rows`, floored at 0 and clamped into the power bounds as the online
/// estimator does, and how many rows the bounds clamped.
pub fn predict(f: &Fitted, s: &NodeSamples, rows: &[usize]) -> (Vec<f64>, usize) {
    let mut x = vec![0.0; f.columns.len()];
    let mut clamped = 0;
    let watts = rows
        .iter()
        .map(|&i| {
            let row = s.x.row(i);
            for ((v, &c), sc) in x.iter_mut().zip(&f.columns).zip(&f.scaling) {
                *v = (row[c] - sc.mean) / sc.scale;
            }
            let (w, hit) = f
                .bounds
                .clamp(f.kind.predict_scaled(&x).unwrap_or_default().max(0.0));
            clamped += usize::from(hit);
            w
        })
        .collect();
    (watts, clamped)
}

/// Runs `job` over `items` on every core, keeping the order of `items`; `tick` is called after
/// each item (progress bars).
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    job: impl Fn(&T) -> R + Sync,
    tick: impl Fn() + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = job(item);
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                tick();
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every item was processed"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ols::Ols;
    use crate::models::ridge::Ridge;
    use crate::samples::TraceInfo;
    use greenpipe_common::features::Feature;

    /// cpu varies, cycles = 2e9·cpu exactly, frequency constant: only cpu can carry a weight.
    fn samples() -> NodeSamples {
        let features = vec![
            Feature::CpuSecondsPerSecond,
            Feature::CpuCyclesPerSecond,
            Feature::CpuFrequencyHertz,
        ];
        let mut s = NodeSamples::empty("n", features);
        s.groups.push("w".into());
        s.traces.push(TraceInfo {
            path: "w.csv".into(),
            workload: "w".into(),
            group: 0,
            rows: 50,
        });
        for i in 0..50 {
            let cpu = (i % 10) as f64 / 3.0;
            s.x.data.extend([cpu, 2e9 * cpu, 1.8e9]);
            s.x.rows += 1;
            s.y.push(5.0 + cpu);
            s.timestamp.push(i as f64);
            s.trace.push(0);
            s.group.push(0);
        }
        s
    }

    #[test]
    fn constant_and_collinear_inputs_are_left_out_and_predictions_bounded() {
        let s = samples();
        let rows: Vec<usize> = (0..50).collect();
        let f = fit(&s, &rows, &[0, 1, 2], &Candidate::new(Ols)).unwrap();
        assert_eq!(f.columns, [0]);
        assert_eq!(f.dropped, [1, 2]);
        // A penalised fit keeps the collinear input but not the constant one.
        let r = fit(&s, &rows, &[0, 1, 2], &Candidate::new(Ridge { alpha: 1.0 })).unwrap();
        assert_eq!(
            (r.columns.as_slice(), r.dropped.as_slice()),
            (&[0, 1][..], &[2][..])
        );
        // Training power 5..8 W: bounds [2, 11] W.
        assert_eq!((f.bounds.min_watts, f.bounds.max_watts), (2.0, 11.0));
        let mut far = s.clone();
        far.x.data.extend([100.0, 2e11, 1.2e9]);
        far.x.rows += 1;
        far.y.push(8.0);
        let (p, clamped) = predict(&f, &far, &[0, 50]);
        assert_eq!(clamped, 1);
        assert!((p[0] - 5.0).abs() < 1e-9 && p[1] == 11.0, "{p:?}");
        // Nothing left to fit on is an error, not a model.
        assert!(fit(&s, &rows, &[2], &Candidate::new(Ols)).is_err());
    }
}
