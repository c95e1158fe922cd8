//! Command-line arguments of the offline subcommands (each owns its `clap::Args`, so `main.rs`
//! only lists them). A module of the binary, not the library: it reports with `anyhow`.

use std::path::PathBuf;

use clap::Args;

use greenpipe_offline::crossval::{self, CrossvalArgs};
use greenpipe_offline::dataset::DatasetArgs;
use greenpipe_offline::train::{self, TrainArgs};
use greenpipe_offline::validate::{self, ValidateArgs};
use greenpipe_offline::OfflineOptions;

/// Options shared by `train` and `crossval`.
#[derive(Debug, Args)]
pub struct CommonCli {
    /// Trace CSV files or directories (searched recursively for *.csv).
    #[arg(long, num_args = 1.., required = true)]
    pub traces: Vec<PathBuf>,
    #[arg(
        long,
        help = greenpipe_offline::models::models_help(),
        long_help = greenpipe_offline::models::models_long_help()
    )]
    pub models: Option<String>,
    /// Workloads matching this regex are CPU-stress runs (the stress-trained baseline).
    #[arg(long, default_value = "stress|cpu")]
    pub stress_pattern: String,
    /// Workloads matching this regex stay in every training set and are never held out.
    #[arg(long)]
    pub always_train: Option<String>,
    /// Folds of the grouped k-fold cross-validation used to select a model (default: one per
    /// workload, i.e. leave-one-workload-out).
    #[arg(long)]
    pub folds: Option<usize>,
    /// Comma-separated feature columns to offer (default: every column that varies).
    #[arg(long)]
    pub features: Option<String>,
    /// Offer tree models only on all features, not also without each hardware counter (cycles,
    /// instructions, cache misses): fewer fits, the grid scikit-learn's bench runs.
    #[arg(long)]
    pub no_counter_variants: bool,
    /// Candidate grid: `default`; `classic` (the grid before exact-split forests); `wide` (both,
    /// the superset benches/grid_lomo.py replays to compare grids across machines).
    #[arg(long, default_value = "default")]
    pub grid: String,
}

impl CommonCli {
    fn options(&self) -> anyhow::Result<OfflineOptions> {
        let mut options = OfflineOptions::parse(
            self.models.as_deref(),
            &self.stress_pattern,
            self.always_train.as_deref(),
            self.folds,
            self.features.as_deref(),
        )?;
        options.counter_variants = !self.no_counter_variants;
        options.set_grid(&self.grid, self.models.as_deref())?;
        Ok(options)
    }
}

/// `train`.
#[derive(Debug, Args)]
pub struct TrainCli {
    #[command(flatten)]
    common: CommonCli,
    /// Model file to write.
    #[arg(long)]
    out: PathBuf,
    /// Report directory (summary.csv, report.md, plots).
    #[arg(long)]
    report: Option<PathBuf>,
}

impl TrainCli {
    /// Runs `train`.
    pub fn run(self) -> anyhow::Result<()> {
        let file = train::run(&TrainArgs {
            traces: self.common.traces.clone(),
            out: self.out.clone(),
            report: self.report,
            options: self.common.options()?,
        })?;
        for m in &file.models {
            eprintln!(
                "{}: CV MAPE {:.2} %",
                m.name,
                m.scores.cv_mape_percent.unwrap_or(f64::NAN)
            );
        }
        eprintln!("wrote {}", self.out.display());
        Ok(())
    }
}

/// `validate`.
#[derive(Debug, Args)]
pub struct ValidateCli {
    /// Model file to score.
    #[arg(long)]
    model: PathBuf,
    /// Trace CSV files or directories the model never saw.
    #[arg(long, num_args = 1.., required = true)]
    traces: Vec<PathBuf>,
    /// Report directory.
    #[arg(long)]
    report: PathBuf,
}

impl ValidateCli {
    /// Runs `validate`.
    pub fn run(self) -> anyhow::Result<()> {
        let rows = validate::run(&ValidateArgs {
            model: self.model,
            traces: self.traces,
            report: self.report.clone(),
        })?;
        for r in rows
            .iter()
            .filter(|r| r.workload == greenpipe_offline::report::ALL)
        {
            eprintln!("{} {}: MAPE {:.2} %", r.node, r.model, r.score.mape_percent);
        }
        eprintln!("wrote {}", self.report.display());
        Ok(())
    }
}

/// `crossval`.
#[derive(Debug, Args)]
pub struct CrossvalCli {
    #[command(flatten)]
    common: CommonCli,
    /// Report directory.
    #[arg(long)]
    report: PathBuf,
    /// Also write every fit's predictions to this directory, to compare selection rules offline
    /// (benches/selection_rules.py).
    #[arg(long)]
    dump_predictions: Option<PathBuf>,
}

impl CrossvalCli {
    /// Runs `crossval`.
    pub fn run(self) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let nodes = crossval::run(&CrossvalArgs {
            traces: self.common.traces.clone(),
            report: self.report.clone(),
            options: self.common.options()?,
            dump_predictions: self.dump_predictions,
        })?;
        for n in &nodes {
            for r in n.rows.iter().filter(|r| {
                r.workload == greenpipe_offline::report::ALL
                    && (r.model == crossval::SELECTED || r.model.starts_with("baseline"))
            }) {
                eprintln!("{} {}: MAPE {:.2} %", r.node, r.model, r.score.mape_percent);
            }
        }
        eprintln!(
            "wrote {} in {:.1} s",
            self.report.display(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

/// `dataset`.
pub type DatasetCli = DatasetArgs;
