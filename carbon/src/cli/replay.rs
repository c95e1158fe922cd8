//! `replay`: hour-by-hour replay of the placement on real intensity series, against carbon-blind
//! placement and a perfect-knowledge oracle.

use super::{parse_duration, parse_pair};

/// Seconds: a whole number, or a duration such as `30m`.
fn parse_seconds(s: &str) -> Result<i64, String> {
    if let Ok(n) = s.trim().parse::<i64>() {
        return Ok(n);
    }
    humantime::parse_duration(s)
        .map(|d| d.as_secs() as i64)
        .map_err(|e| format!("cannot read seconds {s:?}: {e}"))
}
use anyhow::{bail, Context, Result};
use greenpipe_carbon::planner::{Policy, Ranking};
use greenpipe_carbon::replay::forecasts::Forecast;
use greenpipe_carbon::replay::{fleet, grid, jobs, report, summary, Replay, Settings};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct ReplayArgs {
    /// ZONE=FILE: a zone's hourly intensity in the canonical CSV format (repeatable).
    #[arg(long = "intensity", value_parser = parse_pair, required = true)]
    intensity: Vec<(String, String)>,
    /// Fleet: TOML with one [[node]] table per node (name, zone, idle_watts,
    /// watts_per_busy_core, cores).
    #[arg(long)]
    nodes: PathBuf,
    /// Workload CSV: arrival,cores,duration,deadline,tolerates_red.
    #[arg(long)]
    jobs: PathBuf,
    /// Forecast method GreenPipe plans on: seasonal-naive, seasonal-naive-weekly, regression,
    /// oracle, or all (comma-separated or repeated). Carbon-blind and the oracle always run.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    forecast: Vec<String>,
    /// Where summary.csv, report.md and the plots go.
    #[arg(long)]
    out: PathBuf,
    /// Hours from the last known hour to the hour the planner ranks zones by (1 = the hour
    /// being placed).
    #[arg(long, default_value_t = 1)]
    horizon: usize,
    /// tolerationSeconds of the pods that do not tolerate red forever (0: no toleration, so
    /// they are never placed on a red node and leave it as soon as it turns red).
    #[arg(long, value_parser = parse_seconds, default_value_t = 0)]
    toleration_seconds: i64,
    /// Absolute classes: green at or below this (needs --red-min). Default: relative ranking.
    #[arg(long, requires = "red_min")]
    green_max: Option<f64>,
    /// Absolute classes: red at or above this (needs --green-max).
    #[arg(long, requires = "green_max")]
    red_min: Option<f64>,
    /// gCO2/kWh a zone must move past a class boundary before its nodes change class.
    #[arg(long, default_value_t = 10.0)]
    hysteresis: f64,
    /// Minimum time a label stands before it may change.
    #[arg(long, value_parser = parse_duration, default_value = "1h")]
    min_dwell: i64,
    /// Label red nodes but do not taint them.
    #[arg(long)]
    no_taint: bool,
}

fn methods(names: &[String]) -> Result<Vec<Forecast>> {
    let mut out = Vec::new();
    for n in names {
        match n.as_str() {
            "all" => out.extend(Forecast::ALL),
            s => out.push(Forecast::parse(s).with_context(|| {
                format!(
                    "--forecast {s:?}: want {} or all",
                    Forecast::ALL.map(|f| f.name()).join(", ")
                )
            })?),
        }
    }
    Ok(out)
}

pub(super) fn run(a: ReplayArgs) -> Result<()> {
    let ranking = match (a.green_max, a.red_min) {
        (Some(green_max), Some(red_min)) if green_max < red_min => {
            Ranking::Absolute { green_max, red_min }
        }
        (Some(_), Some(_)) => bail!("--green-max must be below --red-min"),
        _ => Ranking::Relative,
    };
    if !(1..=greenpipe_carbon::forecast::MAX_HORIZON_HOURS).contains(&a.horizon) {
        bail!(
            "--horizon must be 1..={}",
            greenpipe_carbon::forecast::MAX_HORIZON_HOURS
        );
    }
    if a.toleration_seconds < 0 {
        bail!("--toleration-seconds must not be negative");
    }
    let forecasts = methods(&a.forecast)?;
    let mut zones = Vec::new();
    for (zone, file) in &a.intensity {
        let series = greenpipe_carbon::sources::csv::read(std::path::Path::new(file))?;
        if series.zone != *zone {
            bail!(
                "--intensity {zone}={file}: the file holds zone {}",
                series.zone
            );
        }
        zones.push(grid::Zone {
            name: zone.clone(),
            hourly: series.hourly(),
        });
    }
    let replay = Replay::new(
        grid::Grid::new(zones)?,
        fleet::read(&a.nodes)?,
        jobs::read(&a.jobs)?,
    )?;
    let settings = Settings {
        horizon: a.horizon,
        policy: Policy {
            ranking,
            hysteresis: a.hysteresis,
            min_dwell: a.min_dwell,
            taint_red: !a.no_taint,
            overrides: Vec::new(),
        },
        toleration_seconds: a.toleration_seconds,
        forecasts,
    };
    let results = replay.run(&settings);
    let rows = summary::rows(&results.runs)?;
    report::write(&a.out, &replay, &results, &rows)?;
    print!("{}", summary::csv(&rows));
    Ok(())
}
