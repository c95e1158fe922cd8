//! The command line of `greenpipe-campaign`: `run` and `report`, with what ties a campaign
//! directory to its node and mode.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};

use greenpipe_campaign::plan::Plan;
use greenpipe_campaign::{analysis, kubernetes, report, runner, windows};

/// `campaign` subcommands.
#[derive(Debug, Subcommand)]
pub enum CampaignCommand {
    /// Run a plan on this node, then dataset, train, validate and report.
    Run(RunArgs),
    /// Rebuild the report of a campaign directory.
    Report(ReportArgs),
}

/// `campaign run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plan (deploy/profiling/plans/*.toml).
    #[arg(long)]
    pub plan: PathBuf,
    /// This node's name (the exporter's `--node-name`).
    #[arg(long)]
    pub node: String,
    /// Prometheus that scrapes the node's exporter (and its meter).
    #[arg(long)]
    pub prometheus_url: String,
    /// Campaign directory; a rerun with the same directory resumes.
    #[arg(long)]
    pub out: PathBuf,
    /// Run the steps as Kubernetes Jobs pinned to the node (kubeconfig: in-cluster, or
    /// KUBECONFIG / ~/.kube/config), instead of local processes.
    #[arg(long)]
    pub kubernetes: bool,
    /// With --kubernetes: the Jobs' namespace.
    #[arg(long, default_value = "greenpipe", requires = "kubernetes")]
    pub namespace: String,
    /// With --kubernetes: the image of every step's containers (it must hold the plan's
    /// commands).
    #[arg(
        long,
        default_value = "ghcr.io/greenpipe/greenpipe-workload:0.1.0",
        requires = "kubernetes"
    )]
    pub image: String,
    /// With --kubernetes: how long a step's pod may take to be scheduled, pull its image and
    /// start before the step is recorded as failed.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration, requires = "kubernetes")]
    pub start_timeout: std::time::Duration,
}

/// `campaign report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Campaign directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Prometheus to read windows from (default: the one the campaign ran against).
    #[arg(long)]
    pub prometheus_url: Option<String>,
    /// Train again even if the directory holds a model.
    #[arg(long)]
    pub retrain: bool,
}

/// What a campaign directory remembers about its run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// Node name.
    pub node: String,
    /// Prometheus URL.
    pub prometheus_url: String,
    /// Where the steps ran (absent in directories of earlier versions: on the node).
    #[serde(default)]
    pub mode: Mode,
}

/// Where a campaign's steps run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Processes started on this node.
    #[default]
    Local,
    /// One Kubernetes Job per step, pinned to the node (`--kubernetes`).
    Kubernetes,
}

fn meta_path(out: &Path) -> PathBuf {
    out.join("campaign.json")
}

/// Runs a `campaign` subcommand.
pub fn run(command: CampaignCommand) -> anyhow::Result<()> {
    match command {
        CampaignCommand::Run(args) => run_campaign(args),
        CampaignCommand::Report(args) => rebuild(args),
    }
}

fn run_campaign(args: RunArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let text = std::fs::read_to_string(&args.plan)
        .with_context(|| format!("reading {}", args.plan.display()))?;
    let plan = Plan::parse(&text).with_context(|| format!("plan {}", args.plan.display()))?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let kept_plan = args.out.join("plan.toml");
    match std::fs::read_to_string(&kept_plan) {
        Ok(old) if old != text => bail!(
            "{} holds a campaign of another plan ({}); use a new --out, or the plan it ran",
            args.out.display(),
            kept_plan.display()
        ),
        Ok(_) => {}
        Err(_) => std::fs::write(&kept_plan, &text)?,
    }
    let meta = Meta {
        node: args.node.clone(),
        prometheus_url: args.prometheus_url.clone(),
        mode: if args.kubernetes {
            Mode::Kubernetes
        } else {
            Mode::Local
        },
    };
    if let Ok(old) = std::fs::read_to_string(meta_path(&args.out)) {
        let old: Meta = serde_json::from_str(&old).context("campaign.json")?;
        check_resume(&old, &meta, &args.out)?;
    }
    std::fs::write(meta_path(&args.out), serde_json::to_string_pretty(&meta)?)?;
    eprintln!(
        "campaign: {} steps, {:.0} s of steps, idle gaps and warm-ups",
        plan.steps.len(),
        plan.length_seconds()
    );
    let stop = runner::stop_flag()?;
    let ctx = runner::RunContext {
        out: args.out.clone(),
        node: args.node.clone(),
    };
    let outcome = if args.kubernetes {
        let settings = kubernetes::Settings {
            namespace: args.namespace.clone(),
            image: args.image.clone(),
            start_timeout: args.start_timeout,
        };
        kubernetes::run_steps(&plan, &ctx, &settings, &stop)?
    } else {
        runner::run_steps(&plan, &ctx, &stop)?
    };
    if outcome == runner::Outcome::Interrupted {
        let done = windows::read(&args.out)?
            .iter()
            .filter(|w| w.status == windows::Status::Complete)
            .count();
        bail!(
            "interrupted; {done} complete steps are kept in {}: run the same command again to \
             resume",
            args.out.display()
        );
    }
    eprintln!(
        "campaign: steps finished in {:.0} s; dataset, train, validate, report",
        started.elapsed().as_secs_f64()
    );
    finish(&plan, &args.out, &meta, false)?;
    eprintln!("campaign: done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Refuses to go on with a campaign directory of another node or run the other way.
fn check_resume(old: &Meta, new: &Meta, out: &Path) -> anyhow::Result<()> {
    if old.node != new.node {
        bail!(
            "{} is a campaign of node {:?}, not {:?}",
            out.display(),
            old.node,
            new.node
        );
    }
    // A step's window and its leftovers are found differently in each mode.
    if old.mode != new.mode {
        let (ran, flag) = match old.mode {
            Mode::Local => ("on the node", "without"),
            Mode::Kubernetes => ("as Kubernetes Jobs", "with"),
        };
        bail!(
            "{} is a campaign whose steps ran {ran}; resume it the same way ({flag} --kubernetes), \
             or use a new --out",
            out.display()
        );
    }
    Ok(())
}

fn rebuild(args: ReportArgs) -> anyhow::Result<()> {
    let plan = Plan::load(&args.out.join("plan.toml"))?;
    let text = std::fs::read_to_string(meta_path(&args.out))
        .with_context(|| format!("{} is not a campaign directory", args.out.display()))?;
    let mut meta: Meta = serde_json::from_str(&text).context("campaign.json")?;
    if let Some(url) = args.prometheus_url {
        meta.prometheus_url = url;
    }
    finish(&plan, &args.out, &meta, args.retrain)
}

fn finish(plan: &Plan, out: &Path, meta: &Meta, retrain: bool) -> anyhow::Result<()> {
    let a = analysis::analyse(plan, out, &meta.prometheus_url, &meta.node, retrain)?;
    report::write(plan, &a, out, &meta.node)?;
    for (name, r) in report::skipped(&a) {
        eprintln!(
            "campaign: {name} skipped: {}",
            r.skipped.as_deref().unwrap_or("")
        );
    }
    for n in &a.notes {
        eprintln!("campaign: note: {n}");
    }
    if let Some((m, baselines)) = report::headline(&a) {
        let parts: Vec<String> = baselines
            .iter()
            .map(|(b, v, imp)| format!("{b} {v:.2} % ({imp:.1} % better)"))
            .collect();
        eprintln!("campaign: validation MAPE {m:.2} %; {}", parts.join(", "));
    }
    eprintln!("campaign: report in {}", out.join("report.md").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_campaign_resumes_only_on_its_node_and_in_its_mode() {
        // Directories written before the mode was recorded ran on the node.
        let old: Meta =
            serde_json::from_str(r#"{"node": "pi-1", "prometheus_url": "http://p:9090"}"#).unwrap();
        assert_eq!(old.mode, Mode::Local);
        let out = Path::new("/tmp/c");
        assert!(check_resume(&old, &old, out).is_ok());
        let k8s = Meta {
            mode: Mode::Kubernetes,
            ..old.clone()
        };
        let text = serde_json::to_string(&k8s).unwrap();
        assert!(text.contains(r#""mode":"kubernetes""#), "{text}");
        let e = check_resume(&old, &k8s, out).unwrap_err().to_string();
        assert!(
            e.contains("ran on the node") && e.contains("without --kubernetes"),
            "{e}"
        );
        let e = check_resume(&k8s, &old, out).unwrap_err().to_string();
        assert!(
            e.contains("as Kubernetes Jobs") && e.contains("(with --kubernetes)"),
            "{e}"
        );
        let other = Meta {
            node: "pi-2".into(),
            ..old.clone()
        };
        assert!(check_resume(&old, &other, out).is_err());
    }
}
