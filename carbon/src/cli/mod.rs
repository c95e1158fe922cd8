//! `greenpipe-carbon ...`: the command-line face of the library, a module of the binary (so it
//! reports with `anyhow`).
//!
//! One file per subcommand, holding its arguments and its run; this file holds what they share
//! (the zone sources and their credentials, value parsers, the runtime and HTTP client).

mod backtest;
mod best_zone;
mod intensity;
mod low_since;
mod place;
mod replay;
mod window;

use anyhow::{Context, Result};
use greenpipe_carbon::controller;
use greenpipe_carbon::planner::Window;
use greenpipe_carbon::sources::{self, Credentials, SourceFlags, ZoneSource};

/// `carbon` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Rolling-origin backtest of the forecasters on canonical CSV series.
    Backtest(backtest::BacktestArgs),
    /// Fetch every zone, print latest actuals, forecasts and gaps; optionally remote-write them.
    Intensity(intensity::IntensityArgs),
    /// Zones ranked by forecast intensity at a horizon.
    BestZone(best_zone::BestZoneArgs),
    /// The lowest-carbon start in the next 48 h for a job of a given length.
    Window(window::WindowArgs),
    /// Whether a zone has been below a bound for the past N hours, and since when.
    LowSince(low_since::LowSinceArgs),
    /// Label and taint nodes by their zone's forecast intensity (the placement controller).
    Place(place::PlaceArgs),
    /// Replay the placement hour by hour on intensity series: emissions against carbon-blind
    /// placement and a perfect-knowledge oracle.
    Replay(replay::ReplayArgs),
}

/// Where the data comes from; shared by every command that reads live zones.
#[derive(Debug, clap::Args)]
struct SourceArgs {
    #[arg(long = "source", required = true, help = sources::zone_source_help())]
    sources: Vec<ZoneSource>,
    /// The providers' credentials and options.
    #[command(flatten)]
    flags: SourceFlags,
    /// Evaluate as if it were this time (RFC 3339 or unix seconds); for replaying CSV history.
    #[arg(long, value_parser = parse_time)]
    at: Option<i64>,
}

impl SourceArgs {
    fn credentials(&self) -> Result<Credentials> {
        Ok(self.flags.credentials(&self.sources)?)
    }

    fn now(&self) -> i64 {
        self.at.unwrap_or_else(greenpipe_carbon::time::now)
    }
}

fn parse_time(s: &str) -> Result<i64, String> {
    greenpipe_carbon::time::parse(s).map_err(|e| e.to_string())
}

fn parse_duration(s: &str) -> Result<i64, String> {
    greenpipe_carbon::time::parse_duration(s)
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_string(), b.to_string())),
        _ => Err(format!("{s:?}: want KEY=VALUE")),
    }
}

fn parse_window(s: &str) -> Result<Window, String> {
    let (a, b) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: want START/END"))?;
    let (start, end) = (parse_time(a)?, parse_time(b)?);
    if end <= start {
        return Err(format!("{s:?}: END must be after START"));
    }
    Ok(Window { start, end })
}

/// Runs a `carbon` subcommand.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Backtest(a) => backtest::run(a),
        Command::Intensity(a) => runtime()?.block_on(intensity::run(a)),
        Command::BestZone(a) => runtime()?.block_on(best_zone::run(a)),
        Command::Window(a) => runtime()?.block_on(window::run(a)),
        Command::LowSince(a) => runtime()?.block_on(low_since::run(a)),
        Command::Place(a) => runtime()?.block_on(place::run(a)),
        Command::Replay(a) => replay::run(a),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn http() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()?)
}

async fn zone_forecasts(s: &SourceArgs) -> Result<(controller::ZoneForecasts, i64)> {
    let now = s.now();
    Ok((
        controller::forecast_all(&http()?, &s.sources, &s.credentials()?, now).await,
        now,
    ))
}
