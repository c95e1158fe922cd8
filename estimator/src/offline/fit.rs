//! Fitting one candidate on chosen rows and columns of a node's samples, and predicting.
//!
//! Standardisation is computed on the training rows only (never on the rows being scored), and
//! prediction goes through `ModelKind::predict_scaled`, the code the online estimator runs.

use greenpipe_common::model::{FeatureScaling, ModelKind};

use crate::offline::models::{Candidate, Fits};
use crate::offline::samples::NodeSamples;

/// A fitted model: inputs, their scaling and the regressor.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// Columns of [`NodeSamples::x`] used, in model order.
    pub columns: Vec<usize>,
    /// Standardisation of those columns.
    pub scaling: Vec<FeatureScaling>,
    /// The regressor.
    pub kind: ModelKind,
}

/// Fits `candidate` on `rows`, reading the columns `columns`.
pub fn fit(
    s: &NodeSamples,
    rows: &[usize],
    columns: &[usize],
    candidate: &Candidate,
) -> anyhow::Result<Fitted> {
    fit_reusing(s, rows, columns, candidate, &mut Fits::default())
}

/// As [`fit`], reusing models in `fits`, which must come from the same rows and columns.
pub fn fit_reusing(
    s: &NodeSamples,
    rows: &[usize],
    columns: &[usize],
    candidate: &Candidate,
    fits: &mut Fits,
) -> anyhow::Result<Fitted> {
    let raw = s.x.select(rows).columns(columns);
    let features: Vec<_> = columns.iter().map(|&c| s.features[c]).collect();
    let scaling = raw.standardisation(&features);
    let y: Vec<f64> = rows.iter().map(|&i| s.y[i]).collect();
    let kind = candidate.fit_reusing(&raw.standardised(&scaling), &y, fits)?;
    Ok(Fitted {
        columns: columns.to_vec(),
        scaling,
        kind,
    })
}

/// Predicted watts for `rows` (clamped at 0, as the online estimator does).
pub fn predict(f: &Fitted, s: &NodeSamples, rows: &[usize]) -> Vec<f64> {
    let mut x = vec![0.0; f.columns.len()];
    rows.iter()
        .map(|&i| {
            let row = s.x.row(i);
            for ((v, &c), sc) in x.iter_mut().zip(&f.columns).zip(&f.scaling) {
                *v = (row[c] - sc.mean) / sc.scale;
            }
            f.kind.predict_scaled(&x).unwrap_or_default().max(0.0)
        })
        .collect()
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
