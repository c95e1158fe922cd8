//! `intensity`: every zone's latest actual and forecasts, printed or remote-written.

use super::{http, zone_forecasts, SourceArgs};
use anyhow::{bail, Result};
use greenpipe_carbon::controller;
use greenpipe_carbon::sink::{RemoteWrite, SampleSink, Stdout};

#[derive(Debug, clap::Args)]
pub(super) struct IntensityArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Remote-write URL (e.g. http://prometheus:9090/api/v1/write); without it samples are printed.
    #[arg(long)]
    remote_write_url: Option<String>,
    /// Forecast horizons written, hours.
    #[arg(long, value_delimiter = ',', default_value = "1,2,6,12,24,48")]
    horizons: Vec<i64>,
}

pub(super) async fn run(a: IntensityArgs) -> Result<()> {
    let (zf, now) = zone_forecasts(&a.source).await?;
    let samples = controller::samples(&zf, now, &a.horizons, greenpipe_carbon::time::now() * 1000);
    match &a.remote_write_url {
        Some(url) => {
            RemoteWrite::new(http()?, url.clone())
                .write(&samples)
                .await?;
            println!("wrote {} samples to {url}", samples.len());
        }
        None => Stdout.write(&samples).await?,
    }
    // The other zones were written; a failed one still fails the command (cron, CI).
    if !zf.errors.is_empty() {
        let failed: Vec<String> = zf.errors.iter().map(|(z, e)| format!("{z}: {e}")).collect();
        bail!(
            "{} of {} sources failed:\n  {}",
            zf.errors.len(),
            a.source.sources.len(),
            failed.join("\n  ")
        );
    }
    Ok(())
}
