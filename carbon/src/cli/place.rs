//! `place`: the placement controller that labels and taints nodes by their zone's forecast.

use super::{http, parse_duration, parse_pair, parse_window, SourceArgs};
use anyhow::{bail, Result};
use greenpipe_carbon::controller::{self, Settings, ZoneMap};
use greenpipe_carbon::planner::{Policy, Ranking, Window};
use greenpipe_carbon::sink::{RemoteWrite, Stdout};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub(super) struct PlaceArgs {
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

pub(super) async fn run(a: PlaceArgs) -> Result<()> {
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
        Some(url) => controller::run(settings, Some(&RemoteWrite::new(http()?, url))).await?,
        None => controller::run(settings, None::<&Stdout>).await?,
    }
    Ok(())
}
