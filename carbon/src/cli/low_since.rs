//! `low-since`: whether a zone has been below a bound for the past N hours, and since when.

use super::{zone_forecasts, SourceArgs};
use anyhow::{Context, Result};

#[derive(Debug, clap::Args)]
pub(super) struct LowSinceArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Zone to look at.
    #[arg(long)]
    zone: String,
    /// Hours to look back.
    #[arg(long, default_value_t = 24)]
    hours: usize,
    /// "Low" bound in gCO2/kWh; default: the zone's median over the previous 28 days.
    #[arg(long)]
    below: Option<f64>,
}

pub(super) async fn run(a: LowSinceArgs) -> Result<()> {
    let (zf, now) = zone_forecasts(&a.source).await?;
    let y = zf
        .history
        .get(&a.zone)
        .with_context(|| format!("zone {:?}: no history", a.zone))?;
    let (threshold, source) = match a.below {
        Some(b) => (b, "--below".to_string()),
        None => (
            greenpipe_carbon::queries::median_before(y, now, 28)
                .context("no history for the default bound")?,
            "median of the previous 28 days".to_string(),
        ),
    };
    let r = greenpipe_carbon::queries::low_since(y, now, a.hours, threshold, source);
    println!(
        "zone {}: bound {:.1} g/kWh ({})",
        a.zone, r.threshold, r.threshold_source
    );
    println!(
        "past {} h: {} low, {} missing, {} not low",
        r.window_hours,
        r.low_hours,
        r.missing_hours,
        r.window_hours - r.low_hours - r.missing_hours
    );
    match r.low_since {
        Some(t) => println!("low since {}", greenpipe_carbon::time::format(t)),
        None => println!("not low at the last observed hour"),
    }
    println!(
        "low for all {} h: {}",
        r.window_hours,
        if r.all_low() { "yes" } else { "no" }
    );
    Ok(())
}
