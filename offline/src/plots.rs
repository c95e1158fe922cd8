//! PNG plots with plotters' bitmap backend. Text is drawn with ab_glyph from a TrueType font
//! read at run time (DejaVu Sans, Debian `fonts-dejavu-core`, installed by scripts/setup.sh), so
//! no fontconfig or X server is needed; without the font the plots are skipped and the report
//! says why.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::evaluate::GroupResult;
use crate::report::slug;
use crate::samples::NodeSamples;

/// Why a plot was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The font could not be registered; the text says which files were tried.
    #[error("{0}")]
    Font(String),
    /// plotters refused to draw; its error, debug-formatted as before.
    #[error("{0}")]
    Draw(String),
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("no points to plot")]
    NoPoints,
}

fn draw(e: impl Debug) -> PlotError {
    PlotError::Draw(format!("{e:?}"))
}

fn written<E: std::error::Error + Send + Sync + 'static>(
    path: &Path,
) -> impl FnOnce(E) -> PlotError {
    let path = path.to_path_buf();
    move |e| PlotError::Write {
        path,
        source: Box::new(e),
    }
}

/// Registers the font once (`greenpipe_common::plot_font`); the error says which files were tried.
pub fn fonts() -> Result<(), PlotError> {
    greenpipe_common::plot_font::register_sans_serif().map_err(PlotError::Font)
}

/// Measured and predicted power over time (seconds since the first sample).
pub fn time_series(
    path: &Path,
    title: &str,
    t: &[f64],
    measured: &[f64],
    predicted: &[f64],
) -> Result<(), PlotError> {
    fonts()?;
    let t0 = t.first().copied().unwrap_or(0.0);
    let xs: Vec<f64> = t.iter().map(|v| v - t0).collect();
    let x_max = xs.last().copied().unwrap_or(1.0).max(1.0);
    let (lo, hi) = measured
        .iter()
        .chain(predicted)
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let pad = ((hi - lo) * 0.05).max(1.0);
    let root = BitMapBackend::new(path, (1200, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, (lo - pad)..(hi + pad))
        .map_err(draw)?;
    chart
        .configure_mesh()
        .x_desc("time since start of trace, s")
        .y_desc("power, W")
        .draw()
        .map_err(draw)?;
    for (series, color, label) in [(measured, BLACK, "measured"), (predicted, RED, "predicted")] {
        chart
            .draw_series(LineSeries::new(
                xs.iter().copied().zip(series.iter().copied()),
                color.stroke_width(1),
            ))
            .map_err(draw)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    root.present().map_err(written(path))
}

/// Histogram of relative errors `(predicted - measured) / measured`, percent, in 1 % bins.
pub fn error_histogram(path: &Path, title: &str, errors_percent: &[f64]) -> Result<(), PlotError> {
    fonts()?;
    let clamp = |e: f64| e.clamp(-30.0, 30.0).round() as i32;
    let mut counts = std::collections::BTreeMap::new();
    for &e in errors_percent {
        *counts.entry(clamp(e)).or_insert(0u32) += 1;
    }
    let top = counts.values().copied().max().unwrap_or(1);
    let root = BitMapBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((-30i32..30i32).into_segmented(), 0u32..top + top / 10 + 1)
        .map_err(draw)?;
    chart
        .configure_mesh()
        .x_desc("error, % of measured (clamped to ±30)")
        .y_desc("samples")
        .draw()
        .map_err(draw)?;
    chart
        .draw_series(
            Histogram::vertical(&chart)
                .style(BLUE.filled())
                .data(errors_percent.iter().map(|&e| (clamp(e), 1u32))),
        )
        .map_err(draw)?;
    root.present().map_err(written(path))
}

/// Plots for held-out predictions of one node: measured vs predicted over time per trace
/// (`NODE__WORKLOAD__TAG.png`) and the error distribution over all of them
/// (`NODE__errors__TAG.png`). `results` pairs each held-out group's predictions with the label
/// of the model that made them.
pub fn held_out(
    dir: &Path,
    s: &NodeSamples,
    results: &[(GroupResult, String)],
    tag: &str,
) -> Result<(), PlotError> {
    let mut errors = Vec::new();
    for (r, label) in results {
        for (&i, &p) in r.rows.iter().zip(&r.predicted) {
            errors.push(100.0 * (p - s.y[i]) / s.y[i]);
        }
        for (t, trace) in s.traces.iter().enumerate() {
            let ks: Vec<usize> = (0..r.rows.len())
                .filter(|&k| s.trace[r.rows[k]] == t)
                .collect();
            if ks.is_empty() {
                continue;
            }
            let pick = |f: &dyn Fn(usize) -> f64| ks.iter().map(|&k| f(k)).collect::<Vec<f64>>();
            // A time block of a single trace is plotted under its block's name.
            let name = if s.time_blocks.is_some() {
                &s.groups[r.group]
            } else {
                &trace.workload
            };
            time_series(
                &dir.join(format!("{}__{}__{tag}.png", slug(&s.node), slug(name))),
                &format!("{} / {}: measured vs {label}", s.node, name),
                &pick(&|k| s.timestamp[r.rows[k]]),
                &pick(&|k| s.y[r.rows[k]]),
                &pick(&|k| r.predicted[k]),
            )?;
        }
    }
    error_histogram(
        &dir.join(format!("{}__errors__{tag}.png", slug(&s.node))),
        &format!("{}: relative error on held-out workloads ({tag})", s.node),
        &errors,
    )
}

/// Points in groups (one colour and legend entry per group), e.g. energy per inference against
/// latency by model architecture.
pub fn scatter(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    groups: &[(String, Vec<(f64, f64)>)],
) -> Result<(), PlotError> {
    fonts()?;
    let all = || groups.iter().flat_map(|(_, p)| p.iter().copied());
    let (x_lo, x_hi) = all().fold((f64::MAX, f64::MIN), |(lo, hi), (x, _)| {
        (lo.min(x), hi.max(x))
    });
    let (y_lo, y_hi) = all().fold((f64::MAX, f64::MIN), |(lo, hi), (_, y)| {
        (lo.min(y), hi.max(y))
    });
    if x_lo > x_hi {
        return Err(PlotError::NoPoints);
    }
    let pad = |lo: f64, hi: f64| ((hi - lo) * 0.1).max(hi.abs() * 0.05).max(1e-9);
    let (px, py) = (pad(x_lo, x_hi), pad(y_lo, y_hi));
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x_lo - px)..(x_hi + px), (y_lo - py).max(0.0)..(y_hi + py))
        .map_err(draw)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(draw)?;
    for (i, (label, points)) in groups.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 6, color.filled())),
            )
            .map_err(draw)?
            .label(label.as_str())
            .legend(move |(x, y)| Circle::new((x + 10, y), 6, color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    root.present().map_err(written(path))
}
