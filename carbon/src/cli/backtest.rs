//! `backtest`: rolling-origin backtest of the forecasters on canonical CSV series, with a report.

use anyhow::{bail, Context, Result};
use greenpipe_carbon::backtest;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct BacktestArgs {
    /// Canonical carbon CSV file, or a directory of them (repeatable).
    #[arg(long, required = true)]
    series: Vec<PathBuf>,
    /// Longest horizon scored, hours (1..=48); the report's plots and goal use it.
    #[arg(long, default_value_t = 24)]
    horizon: usize,
    /// Where summary.csv, report.md and the plots go.
    #[arg(long)]
    report: PathBuf,
    /// Days at the start of each series used only for learning.
    #[arg(long, default_value_t = 21)]
    warmup_days: usize,
}

fn csv_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|e| e == "csv"))
                .collect();
            found.sort();
            if found.is_empty() {
                bail!("{}: no .csv files", p.display());
            }
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

pub(super) fn run(a: BacktestArgs) -> Result<()> {
    if !(1..=greenpipe_carbon::forecast::MAX_HORIZON_HOURS).contains(&a.horizon) {
        bail!(
            "--horizon must be 1..={}",
            greenpipe_carbon::forecast::MAX_HORIZON_HOURS
        );
    }
    let cfg = backtest::Config {
        horizons: backtest::horizons_up_to(a.horizon),
        warmup_hours: a.warmup_days * 24,
        trace_horizon: a.horizon,
    };
    let mut results = Vec::new();
    for file in csv_files(&a.series)? {
        let series = greenpipe_carbon::sources::csv::read(&file)?;
        let gaps = series.gaps();
        eprintln!(
            "{}: {} hours, {} gaps{}",
            series.zone,
            series.points.len(),
            gaps.len(),
            gaps.iter()
                .map(|g| format!("\n  gap {g}"))
                .collect::<String>()
        );
        let r = backtest::run(&series.zone, &series.hourly(), &cfg);
        results.push((series.zone.clone(), r));
    }
    let rows = greenpipe_carbon::report::write(&a.report, &results, a.horizon)?;
    println!("{}", backtest::SUMMARY_HEADER);
    for r in &rows {
        println!("{}", r.csv());
    }
    for (zone, r) in &results {
        if let Some((gain, base)) = backtest::improvement(&r.rows, a.horizon) {
            println!(
                "# {zone}: regression vs {} at {} h: {:.1} % lower MAPE ({})",
                base.name(),
                a.horizon,
                100.0 * gain,
                if gain >= 0.2 {
                    "goal met"
                } else {
                    "goal NOT met"
                }
            );
        }
    }
    Ok(())
}
