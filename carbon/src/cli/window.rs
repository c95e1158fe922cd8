//! `window`: the lowest-carbon start in the next 48 h for a job of a given length.

use super::{parse_duration, zone_forecasts, SourceArgs};
use anyhow::{Context, Result};

#[derive(Debug, clap::Args)]
pub(super) struct WindowArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Zone to schedule in.
    #[arg(long)]
    zone: String,
    /// Job length (e.g. 3h, 90m); rounded up to whole hours.
    #[arg(long, value_parser = parse_duration)]
    duration: i64,
}

pub(super) async fn run(a: WindowArgs) -> Result<()> {
    let (zf, now) = zone_forecasts(&a.source).await?;
    let f = zf
        .forecasts
        .get(&a.zone)
        .with_context(|| format!("zone {:?} is not among --source", a.zone))?;
    let hours = (a.duration as f64 / 3600.0).ceil().max(1.0) as usize;
    let w = greenpipe_carbon::queries::best_window(f, hours, now).with_context(|| {
        format!(
            "no {hours} h run of forecast hours for {} in the next 48 h",
            a.zone
        )
    })?;
    println!(
        "zone {}: start {} for {hours} h, mean {:.1} g/kWh",
        a.zone,
        greenpipe_carbon::time::format(w.start),
        w.mean
    );
    if let Some(m) = w.start_now_mean {
        println!(
            "starting now instead: mean {m:.1} g/kWh ({:.1} % more)",
            100.0 * (m / w.mean - 1.0)
        );
    }
    Ok(())
}
