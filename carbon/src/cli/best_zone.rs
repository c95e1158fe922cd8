//! `best-zone`: zones ranked by forecast intensity at a horizon.

use super::{parse_duration, zone_forecasts, SourceArgs};
use anyhow::{bail, Result};
use greenpipe_carbon::forecast;

#[derive(Debug, clap::Args)]
pub(super) struct BestZoneArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// How far ahead (e.g. 2h, 90m, 6).
    #[arg(long, value_parser = parse_duration, default_value = "2h")]
    horizon: i64,
}

pub(super) async fn run(a: BestZoneArgs) -> Result<()> {
    let (zf, now) = zone_forecasts(&a.source).await?;
    let t = now + a.horizon;
    let ranked = greenpipe_carbon::queries::rank_zones(
        zf.forecasts
            .iter()
            .map(|(z, f)| (z.as_str(), forecast::at(f, t))),
    );
    println!(
        "# zones at {} (horizon {} h)",
        greenpipe_carbon::time::format(t),
        a.horizon as f64 / 3600.0
    );
    for (zone, p) in &ranked {
        match p {
            Some(p) => println!("{zone}\t{:.1} g/kWh\t{}", p.value, p.method.name()),
            None => println!("{zone}\tno forecast"),
        }
    }
    match ranked.first() {
        Some((zone, Some(_))) => {
            println!("best: {zone}");
            Ok(())
        }
        _ => bail!(
            "no zone has a forecast at {}",
            greenpipe_carbon::time::format(t)
        ),
    }
}
