//! The backtest report: `summary.csv`, `report.md` and PNG plots (plotters, bitmap backend).
//!
//! Text in plots needs a TrueType font (`greenpipe_common::plot_font`). Without it the plots are
//! drawn without text and the report says so.

use crate::backtest::{improvement, Row, ZoneResult, METHODS, SUMMARY_HEADER};
use plotters::drawing::DrawingAreaErrorKind;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A report that could not be written; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report directory cannot be created.
    #[error("creating {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `summary.csv` or `report.md` cannot be written.
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A plot cannot be drawn or written.
    #[error("writing {}", path.display())]
    Plot {
        /// The PNG file.
        path: PathBuf,
        /// plotters' reason.
        source: PlotError,
    },
}

/// What plotters reports when drawing to a PNG fails.
pub type PlotError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;

pub(crate) const COLORS: [RGBColor; 3] = [
    RGBColor(230, 120, 20),
    RGBColor(120, 120, 220),
    RGBColor(20, 150, 60),
];

/// Writes `summary.csv`, `report.md` and the plots into `dir`; returns the summary rows.
pub fn write(
    dir: &Path,
    results: &[(String, ZoneResult)],
    trace_horizon: usize,
) -> Result<Vec<Row>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let rows: Vec<Row> = results.iter().flat_map(|(_, r)| r.rows.clone()).collect();
    let mut csv = String::from(SUMMARY_HEADER);
    csv.push('\n');
    for r in &rows {
        csv.push_str(&r.csv());
        csv.push('\n');
    }
    let summary = dir.join("summary.csv");
    std::fs::write(&summary, csv).map_err(|source| ReportError::Write {
        path: summary.clone(),
        source,
    })?;

    let fonts = greenpipe_common::plot_font::register_sans_serif().is_ok();
    let mut md = String::from("# Carbon-intensity forecast backtest\n\n");
    let _ = writeln!(
        md,
        "Rolling origin, hourly. MAPE and MAE over the hours where the actual value and every \
         method's forecast exist. Improvement = 1 − MAPE(regression) / MAPE(best seasonal-naive).\n"
    );
    if !fonts {
        let _ = writeln!(
            md,
            "_No TrueType font found ({}): plots have no text._\n",
            greenpipe_common::plot_font::FONT_PATHS.join(", ")
        );
    }
    let _ = writeln!(md, "| zone | missing hours | samples | naive daily MAPE % | naive weekly MAPE % | regression MAPE % | improvement at {trace_horizon} h | goal ≥ 20 % |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for (zone, r) in results {
        let get = |m| {
            r.rows
                .iter()
                .find(|x| x.horizon_hours == trace_horizon && x.method == m)
        };
        let (Some(d), Some(w), Some(g)) = (
            get(crate::forecast::Method::SeasonalNaiveDaily),
            get(crate::forecast::Method::SeasonalNaiveWeekly),
            get(crate::forecast::Method::Regression),
        ) else {
            continue;
        };
        let (imp, _) = improvement(&r.rows, trace_horizon).unwrap_or((f64::NAN, METHODS[0]));
        let _ = writeln!(
            md,
            "| {zone} | {} | {} | {:.2} | {:.2} | {:.2} | {:.1} % | {} |",
            r.missing_hours,
            g.samples,
            d.mape_percent,
            w.mape_percent,
            g.mape_percent,
            100.0 * imp,
            if imp >= 0.2 { "met" } else { "not met" }
        );
    }
    let _ = writeln!(md, "\nPer zone: `<zone>-mape.png` (MAPE by horizon), `<zone>-trace.png` (last 14 days at {trace_horizon} h).\n");
    for (zone, r) in results {
        let _ = writeln!(
            md,
            "## {zone}\n\n![{zone} MAPE]({zone}-mape.png)\n![{zone} trace]({zone}-trace.png)\n"
        );
        let plot = |path: PathBuf, drawn: Result<(), PlotError>| {
            drawn.map_err(|source| ReportError::Plot { path, source })
        };
        let mape = dir.join(format!("{zone}-mape.png"));
        plot(mape.clone(), plot_mape(&mape, zone, &r.rows))?;
        let trace = dir.join(format!("{zone}-trace.png"));
        plot(trace.clone(), plot_trace(&trace, zone, r))?;
    }
    let report = dir.join("report.md");
    std::fs::write(&report, md).map_err(|source| ReportError::Write {
        path: report.clone(),
        source,
    })?;
    Ok(rows)
}

fn plot_mape(path: &Path, zone: &str, rows: &[Row]) -> Result<(), PlotError> {
    let root = BitMapBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_h = rows.iter().map(|r| r.horizon_hours).max().unwrap_or(1) as f64;
    let max_mape = rows
        .iter()
        .map(|r| r.mape_percent)
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{zone}: MAPE by horizon"), ("sans-serif", 22))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..max_h + 1.0, 0.0..max_mape * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("horizon (h)")
        .y_desc("MAPE (%)")
        .draw()?;
    for (k, method) in METHODS.iter().enumerate() {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.method == *method && r.mape_percent.is_finite())
            .map(|r| (r.horizon_hours as f64, r.mape_percent))
            .collect();
        let color = COLORS[k];
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
            .label(method.name())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()
}

fn plot_trace(path: &Path, zone: &str, r: &ZoneResult) -> Result<(), PlotError> {
    let root = BitMapBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let pts = &r.trace.points;
    let tail = &pts[pts.len().saturating_sub(24 * 14)..];
    let (Some(first), Some(last)) = (tail.first(), tail.last()) else {
        root.present()?;
        return Ok(());
    };
    let t0 = first.0;
    let x = |t: i64| (t - t0) as f64 / 86400.0;
    let ymax = tail
        .iter()
        .flat_map(|p| std::iter::once(p.1).chain(p.2))
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{zone}: actual vs forecast {} h ahead, from {}",
                r.trace.horizon,
                crate::time::format(t0)
            ),
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..x(last.0), 0.0..ymax * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("days")
        .y_desc("gCO2/kWh")
        .draw()?;
    chart
        .draw_series(LineSeries::new(
            tail.iter().map(|p| (x(p.0), p.1)),
            BLACK.stroke_width(2),
        ))?
        .label("actual")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    for (k, method) in METHODS.iter().enumerate() {
        let color = COLORS[k];
        chart
            .draw_series(LineSeries::new(
                tail.iter().map(|p| (x(p.0), p.2[k])),
                color,
            ))?
            .label(method.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()
}
