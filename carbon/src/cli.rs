//! `greenpipe-carbon ...`: the command-line face of this crate.

use crate::backtest;
use crate::controller::{self, Settings, ZoneMap};
use crate::forecast;
use crate::planner::{Policy, Ranking, Window};
use crate::sink::{RemoteWrite, SampleSink, Stdout};
use crate::sources::{watttime, Credentials, ZoneSource};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `carbon` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Rolling-origin backtest of the forecasters on canonical CSV series.
    Backtest(BacktestArgs),
    /// Fetch every zone, print latest actuals, forecasts and gaps; optionally remote-write them.
    Intensity(IntensityArgs),
    /// Zones ranked by forecast intensity at a horizon.
    BestZone(BestZoneArgs),
    /// The lowest-carbon start in the next 48 h for a job of a given length.
    Window(WindowArgs),
    /// Whether a zone has been below a bound for the past N hours, and since when.
    LowSince(LowSinceArgs),
    /// Label and taint nodes by their zone's forecast intensity (the placement controller).
    Place(PlaceArgs),
}

/// Where the data comes from; shared by every command that reads live zones.
#[derive(Debug, clap::Args)]
struct SourceArgs {
    /// Zone source, repeatable: ZONE=csv:PATH | ZONE=uk:national | ZONE=uk:region:ID |
    /// ZONE=electricitymaps:ZONEKEY | ZONE=watttime:REGION.
    #[arg(long = "source", required = true)]
    sources: Vec<ZoneSource>,
    /// File holding the Electricity Maps token (else $ELECTRICITYMAPS_TOKEN).
    #[arg(long)]
    electricitymaps_token_file: Option<PathBuf>,
    /// WattTime user name (else $WATTTIME_USER).
    #[arg(long)]
    watttime_user: Option<String>,
    /// File holding the WattTime password (else $WATTTIME_PASSWORD).
    #[arg(long)]
    watttime_password_file: Option<PathBuf>,
    /// WattTime signal: marginal (co2_moer) or average (co2_aoer). Required for WattTime zones.
    #[arg(long, value_enum)]
    watttime_signal: Option<watttime::Signal>,
    /// Evaluate as if it were this time (RFC 3339 or unix seconds); for replaying CSV history.
    #[arg(long, value_parser = parse_time)]
    at: Option<i64>,
}

impl SourceArgs {
    fn credentials(&self) -> Result<Credentials> {
        let uses =
            |f: fn(&crate::sources::Provider) -> bool| self.sources.iter().any(|s| f(&s.provider));
        let electricity_maps_token =
            if uses(|p| matches!(p, crate::sources::Provider::ElectricityMaps(_))) {
                crate::secrets::load(
                    self.electricitymaps_token_file.as_deref(),
                    crate::sources::electricity_maps::TOKEN_ENV,
                )?
            } else {
                None
            };
        let watttime = if uses(|p| matches!(p, crate::sources::Provider::WattTime(_))) {
            let user = self
                .watttime_user
                .clone()
                .or_else(|| std::env::var(watttime::USER_ENV).ok());
            let password = crate::secrets::load(
                self.watttime_password_file.as_deref(),
                watttime::PASSWORD_ENV,
            )?;
            user.zip(password)
        } else {
            None
        };
        Ok(Credentials {
            electricity_maps_token,
            watttime,
            watttime_signal: self.watttime_signal,
        })
    }

    fn now(&self) -> i64 {
        self.at.unwrap_or_else(crate::time::now)
    }
}

fn parse_time(s: &str) -> Result<i64, String> {
    crate::time::parse(s).map_err(|e| e.to_string())
}

fn parse_duration(s: &str) -> Result<i64, String> {
    crate::time::parse_duration(s)
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

#[derive(Debug, clap::Args)]
struct IntensityArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Remote-write URL (e.g. http://prometheus:9090/api/v1/write); without it samples are printed.
    #[arg(long)]
    remote_write_url: Option<String>,
    /// Forecast horizons written, hours.
    #[arg(long, value_delimiter = ',', default_value = "1,2,6,12,24,48")]
    horizons: Vec<i64>,
}

#[derive(Debug, clap::Args)]
struct BestZoneArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// How far ahead (e.g. 2h, 90m, 6).
    #[arg(long, value_parser = parse_duration, default_value = "2h")]
    horizon: i64,
}

#[derive(Debug, clap::Args)]
struct WindowArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Zone to schedule in.
    #[arg(long)]
    zone: String,
    /// Job length (e.g. 3h, 90m); rounded up to whole hours.
    #[arg(long, value_parser = parse_duration)]
    duration: i64,
}

#[derive(Debug, clap::Args)]
struct LowSinceArgs {
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

#[derive(Debug, clap::Args)]
struct PlaceArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Forecast horizon the ranking uses.
    #[arg(long, value_parser = parse_duration, default_value = "2h")]
    horizon: i64,
    /// Time between rounds.
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    interval: i64,
    /// Run one round and exit.
    #[arg(long)]
    once: bool,
    /// Print the planned changes and patches; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Plan against this NodeList JSON (`kubectl get nodes -o json`) instead of the API server;
    /// requires --dry-run.
    #[arg(long, requires = "dry_run")]
    nodes_file: Option<PathBuf>,
    /// NODE=ZONE: grid zone of a node (wins over its topology.kubernetes.io/zone label).
    #[arg(long = "node-zone", value_parser = parse_pair)]
    node_zones: Vec<(String, String)>,
    /// K8S_ZONE=GRID_ZONE: grid zone of a topology.kubernetes.io/zone value.
    #[arg(long = "zone-alias", value_parser = parse_pair)]
    zone_aliases: Vec<(String, String)>,
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
    /// START/END (RFC 3339 or unix seconds): remove all labels and taints inside (repeatable).
    #[arg(long = "override-off", value_parser = parse_window)]
    overrides: Vec<Window>,
    /// Remote-write URL for the intensity and node-zone metrics.
    #[arg(long)]
    remote_write_url: Option<String>,
}

#[derive(Debug, clap::Args)]
struct BacktestArgs {
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

/// Runs a `carbon` subcommand.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Backtest(a) => run_backtest(a),
        Command::Intensity(a) => runtime()?.block_on(run_intensity(a)),
        Command::BestZone(a) => runtime()?.block_on(run_best_zone(a)),
        Command::Window(a) => runtime()?.block_on(run_window(a)),
        Command::LowSince(a) => runtime()?.block_on(run_low_since(a)),
        Command::Place(a) => runtime()?.block_on(run_place(a)),
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

async fn run_intensity(a: IntensityArgs) -> Result<()> {
    let (zf, now) = zone_forecasts(&a.source).await?;
    let samples = controller::samples(&zf, now, &a.horizons, crate::time::now() * 1000);
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

async fn run_best_zone(a: BestZoneArgs) -> Result<()> {
    let (zf, now) = zone_forecasts(&a.source).await?;
    let t = now + a.horizon;
    let ranked = crate::queries::rank_zones(
        zf.forecasts
            .iter()
            .map(|(z, f)| (z.as_str(), forecast::at(f, t))),
    );
    println!(
        "# zones at {} (horizon {} h)",
        crate::time::format(t),
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
        _ => bail!("no zone has a forecast at {}", crate::time::format(t)),
    }
}

async fn run_window(a: WindowArgs) -> Result<()> {
    let (zf, now) = zone_forecasts(&a.source).await?;
    let f = zf
        .forecasts
        .get(&a.zone)
        .with_context(|| format!("zone {:?} is not among --source", a.zone))?;
    let hours = (a.duration as f64 / 3600.0).ceil().max(1.0) as usize;
    let w = crate::queries::best_window(f, hours, now).with_context(|| {
        format!(
            "no {hours} h run of forecast hours for {} in the next 48 h",
            a.zone
        )
    })?;
    println!(
        "zone {}: start {} for {hours} h, mean {:.1} g/kWh",
        a.zone,
        crate::time::format(w.start),
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

async fn run_low_since(a: LowSinceArgs) -> Result<()> {
    let (zf, now) = zone_forecasts(&a.source).await?;
    let y = zf
        .history
        .get(&a.zone)
        .with_context(|| format!("zone {:?}: no history", a.zone))?;
    let (threshold, source) = match a.below {
        Some(b) => (b, "--below".to_string()),
        None => (
            crate::queries::median_before(y, now, 28)
                .context("no history for the default bound")?,
            "median of the previous 28 days".to_string(),
        ),
    };
    let r = crate::queries::low_since(y, now, a.hours, threshold, source);
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
        Some(t) => println!("low since {}", crate::time::format(t)),
        None => println!("not low at the last observed hour"),
    }
    println!(
        "low for all {} h: {}",
        r.window_hours,
        if r.all_low() { "yes" } else { "no" }
    );
    Ok(())
}

async fn run_place(a: PlaceArgs) -> Result<()> {
    let ranking = match (a.green_max, a.red_min) {
        (Some(green_max), Some(red_min)) if green_max < red_min => {
            Ranking::Absolute { green_max, red_min }
        }
        (Some(_), Some(_)) => bail!("--green-max must be below --red-min"),
        _ => Ranking::Relative,
    };
    let settings = Settings {
        credentials: a.source.credentials()?,
        sources: a.source.sources.clone(),
        horizon: a.horizon,
        policy: Policy {
            ranking,
            hysteresis: a.hysteresis,
            min_dwell: a.min_dwell,
            taint_red: !a.no_taint,
            overrides: a.overrides,
        },
        zones: ZoneMap {
            nodes: a.node_zones.into_iter().collect::<BTreeMap<_, _>>(),
            aliases: a.zone_aliases.into_iter().collect(),
        },
        dry_run: a.dry_run,
        interval: a.interval,
        once: a.once,
        nodes_file: a.nodes_file,
        at: a.source.at,
    };
    match a.remote_write_url {
        Some(url) => controller::run(settings, Some(&RemoteWrite::new(http()?, url))).await,
        None => controller::run(settings, None::<&Stdout>).await,
    }
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

fn run_backtest(a: BacktestArgs) -> Result<()> {
    if !(1..=crate::forecast::MAX_HORIZON_HOURS).contains(&a.horizon) {
        bail!(
            "--horizon must be 1..={}",
            crate::forecast::MAX_HORIZON_HOURS
        );
    }
    let cfg = backtest::Config {
        horizons: backtest::horizons_up_to(a.horizon),
        warmup_hours: a.warmup_days * 24,
        trace_horizon: a.horizon,
    };
    let mut results = Vec::new();
    for file in csv_files(&a.series)? {
        let series = crate::sources::csv::read(&file)?;
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
    let rows = crate::report::write(&a.report, &results, a.horizon)?;
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
