//! The replay's `summary.csv`, `report.md` and plots: `intensity.png` (each zone's intensity over
//! the last 14 days, with the labels GreenPipe gave it underneath) and `emissions.png`
//! (cumulative emissions per policy). Errors and fonts as in [`crate::report`].

use super::grid::Grid;
use super::summary::{self, Policy, Row};
use super::{Replay, Results};
use crate::planner::Class;
use crate::report::{PlotError, ReportError, COLORS};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Days shown in `intensity.png`.
const INTENSITY_DAYS: usize = 14;

fn write_file(path: PathBuf, text: String) -> Result<(), ReportError> {
    std::fs::write(&path, text).map_err(|source| ReportError::Write { path, source })
}

/// Writes everything into `dir`.
pub fn write(
    dir: &Path,
    replay: &Replay,
    results: &Results,
    rows: &[Row],
) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    write_file(dir.join("summary.csv"), summary::csv(rows))?;
    let fonts = greenpipe_common::plot_font::register_sans_serif().is_ok();
    let g = &replay.grid;
    let mut md = String::from("# Carbon replay: emissions the placement avoids\n\n");
    let _ = writeln!(
        md,
        "{} h from {} to {} in zones {}; {} nodes; {} jobs ({} services). Missing intensity \
         hours bridged for accounting: {} zone-hours.\n",
        g.hours,
        crate::time::format(g.start),
        crate::time::format(g.time(g.hours)),
        g.zones
            .iter()
            .map(|z| z.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        replay.nodes.len(),
        replay.jobs.len(),
        replay.jobs.iter().filter(|j| j.deadline.is_none()).count(),
        g.bridged,
    );
    if !fonts {
        let _ = writeln!(
            md,
            "_No TrueType font found ({}): plots have no text._\n",
            greenpipe_common::plot_font::FONT_PATHS.join(", ")
        );
    }
    let _ = writeln!(md, "| policy | forecast | kg CO2e | kWh | saved vs blind | share of oracle savings | deadlines missed | evictions | unfinished at end | queued job-hours | jobs outside the hours |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for (r, (_, o)) in rows.iter().zip(&results.runs) {
        let (p, f) = r.policy.cells();
        let _ = writeln!(
            md,
            "| {p} | {f} | {:.1} | {:.1} | {:.2} % | {} | {} | {} | {} | {} | {} |",
            r.kg_co2e,
            r.kwh,
            r.saved_percent_vs_blind,
            r.share_of_oracle_savings
                .map_or("n/a".to_string(), |s| format!("{:.1} %", 100.0 * s)),
            r.deadlines_missed,
            r.evictions,
            o.unfinished,
            o.queued_hours,
            o.outside,
        );
    }
    if !results.errors.is_empty() {
        let _ = writeln!(md, "\nForecast error at the planner's horizon (the same hours for every method of a zone):\n");
        let _ = writeln!(md, "| zone | forecast | MAE g/kWh | hours |");
        let _ = writeln!(md, "|---|---|---|---|");
        for e in &results.errors {
            let _ = writeln!(
                md,
                "| {} | {} | {:.2} | {} |",
                e.zone,
                e.forecast.name(),
                e.mae,
                e.hours
            );
        }
    }
    let labelled = results
        .runs
        .iter()
        .find(|(p, _)| matches!(p, Policy::GreenPipe(_)))
        .or_else(|| results.runs.last());
    let _ = writeln!(
        md,
        "\n![intensity](intensity.png)\n\n![emissions](emissions.png)"
    );
    write_file(dir.join("report.md"), md)?;
    let plot = |path: PathBuf, drawn: Result<(), PlotError>| {
        drawn.map_err(|source| ReportError::Plot { path, source })
    };
    if let Some((policy, outcome)) = labelled {
        let path = dir.join("intensity.png");
        plot(
            path.clone(),
            plot_intensity(&path, g, *policy, &outcome.classes),
        )?;
    }
    let path = dir.join("emissions.png");
    plot(path.clone(), plot_emissions(&path, g, &results.runs))?;
    Ok(())
}

fn class_color(c: Option<Class>) -> RGBColor {
    match c {
        Some(Class::Green) => RGBColor(40, 170, 60),
        Some(Class::Yellow) => RGBColor(230, 200, 40),
        Some(Class::Red) => RGBColor(210, 40, 40),
        None => RGBColor(200, 200, 200),
    }
}

fn zone_color(z: usize) -> RGBColor {
    const MORE: [RGBColor; 3] = [
        RGBColor(0, 0, 0),
        RGBColor(150, 60, 160),
        RGBColor(60, 160, 170),
    ];
    COLORS
        .iter()
        .chain(&MORE)
        .nth(z % 6)
        .copied()
        .unwrap_or(BLACK)
}

fn plot_intensity(
    path: &Path,
    g: &Grid,
    policy: Policy,
    classes: &[Vec<Option<Class>>],
) -> Result<(), PlotError> {
    let root = BitMapBackend::new(path, (1200, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let first = g.hours.saturating_sub(24 * INTENSITY_DAYS);
    let x = |h: usize| (h - first) as f64 / 24.0;
    let ymax = g
        .accounting
        .iter()
        .flat_map(|row| row[first..].iter().copied())
        .fold(1.0, f64::max)
        * 1.1;
    // One strip per zone under the axis shows its label, hour by hour.
    let strip = ymax * 0.05;
    let ymin = -strip * g.zones.len() as f64;
    let (p, f) = policy.cells();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "intensity and labels ({p}, {f}) from {}; strips: one zone each, top to bottom",
                crate::time::format(g.time(first))
            ),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..x(g.hours), ymin..ymax)?;
    chart
        .configure_mesh()
        .x_desc("days")
        .y_desc("gCO2/kWh")
        .draw()?;
    for (z, zone) in g.zones.iter().enumerate() {
        let color = zone_color(z);
        let top = -strip * z as f64;
        chart.draw_series((first..g.hours).map(|h| {
            Rectangle::new(
                [(x(h), top), (x(h) + 1.0 / 24.0, top - strip * 0.9)],
                class_color(classes[z][h]).filled(),
            )
        }))?;
        chart
            .draw_series(LineSeries::new(
                (first..g.hours).map(|h| (x(h) + 0.5 / 24.0, g.accounting[z][h])),
                color.stroke_width(2),
            ))?
            .label(zone.name.clone())
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

fn plot_emissions(
    path: &Path,
    g: &Grid,
    runs: &[(Policy, super::scheduler::Outcome)],
) -> Result<(), PlotError> {
    let root = BitMapBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let ymax = runs
        .iter()
        .filter_map(|(_, o)| o.cumulative_kg.last().copied())
        .fold(1e-9, f64::max)
        * 1.05;
    let days = g.hours as f64 / 24.0;
    let mut chart = ChartBuilder::on(&root)
        .caption("cumulative emissions per policy", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..days, 0.0..ymax)?;
    chart
        .configure_mesh()
        .x_desc("days")
        .y_desc("kg CO2e")
        .draw()?;
    for (k, (policy, o)) in runs.iter().enumerate() {
        let color = zone_color(k);
        let (p, f) = policy.cells();
        let name = if matches!(policy, Policy::GreenPipe(_)) {
            format!("{p} ({f})")
        } else {
            p.to_string()
        };
        chart
            .draw_series(LineSeries::new(
                o.cumulative_kg
                    .iter()
                    .enumerate()
                    .map(|(h, v)| ((h + 1) as f64 / 24.0, *v)),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()
}
