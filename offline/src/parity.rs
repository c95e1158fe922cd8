//! Parity of the exact-split forest and boosting with scikit-learn's `RandomForestRegressor()`
//! and `GradientBoostingRegressor()`, on the folds of `benches/crossval_sklearn.py --plain`.
//!
//! A node's rows go to `benches/forest_parity.py` as one matrix CSV (raw feature columns,
//! `power_watts`, and `fold`: the fold whose held-out set the row is in, -1 for rows always in
//! training), so both sides fit and score exactly the same rows. Our side fits through the
//! pipeline (`fit::fit`, standardised inputs, clamped predictions), as `crossval` does.
//!
//! Three comparisons, because the two forests cannot share a random generator:
//! - statistical: the mean held-out MAPE over the folds, per node ([`compare`]);
//! - statistical over seeds: the same, averaged over several seeds of each forest
//!   ([`compare_forest_seeds`]): one forest's MAPE moves with its bootstrap draws;
//! - prediction by prediction on one fold ([`same_bootstrap`]): scikit-learn grows its trees on
//!   the bootstrap weights our forest drew, so the two differ only where a node's tie between
//!   inputs of equal gain is broken by each side's random input order.
//!
//! Fit times are CPU time of the fitting thread on our side and `process_time` of a one-job
//! scikit-learn fit on theirs: both one core.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fit;
use crate::metrics;
use crate::models::{exact, Candidate, FitError};
use crate::samples::{Matrix, NodeSamples};
use crate::{NothingHoldable, OfflineOptions};

mod answers;
pub use answers::{Answers, Arg};

/// One fold: its name (the held-out workload group) and its rows.
#[derive(Debug, Clone)]
pub struct Fold {
    /// The held-out group.
    pub name: String,
    /// Training rows, ascending.
    pub train: Vec<usize>,
    /// Held-out rows, ascending.
    pub test: Vec<usize>,
}

/// Why a parity run failed.
#[derive(Debug, thiserror::Error)]
pub enum ParityError {
    #[error(transparent)]
    Holdable(#[from] NothingHoldable),
    #[error("fitting {candidate} on fold {fold}")]
    Fit {
        candidate: String,
        fold: String,
        #[source]
        source: FitError,
    },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("running {command}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command} failed ({status}): {stderr}")]
    Python {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("{command} printed no parity JSON: {output:?}")]
    Json {
        command: String,
        output: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: line {line}: not a number: {cell:?}")]
    Number {
        path: PathBuf,
        line: usize,
        cell: String,
    },
    #[error("scikit-learn scored {theirs} folds, we have {ours}")]
    FoldCount { ours: usize, theirs: usize },
}

/// Leave-one-workload-out over the node's holdable groups, the `--always-train` groups in every
/// training set; a node with one holdable group is cut into its time blocks first (as crossval
/// does). Returns the samples the folds index (blocked or not).
pub fn folds(
    options: &OfflineOptions,
    s: &NodeSamples,
) -> Result<(NodeSamples, Vec<Fold>), ParityError> {
    let (samples, holdable, _) = options.cv_samples(s)?;
    let samples = samples.into_owned();
    let folds = holdable
        .iter()
        .map(|&g| Fold {
            name: samples.groups[g].clone(),
            train: (0..samples.y.len())
                .filter(|&i| samples.group[i] != g)
                .collect(),
            test: samples.rows_of(&[g]),
        })
        .collect();
    Ok((samples, folds))
}

/// Every `stride`-th row of the node (the parity test's smaller run; folds and blocks are cut
/// afterwards, on the rows kept).
pub fn thinned(s: &NodeSamples, stride: usize) -> NodeSamples {
    let keep: Vec<usize> = (0..s.y.len()).step_by(stride.max(1)).collect();
    let mut out = s.clone();
    out.x = s.x.select(&keep);
    out.y = keep.iter().map(|&i| s.y[i]).collect();
    out.timestamp = keep.iter().map(|&i| s.timestamp[i]).collect();
    out.trace = keep.iter().map(|&i| s.trace[i]).collect();
    out.group = keep.iter().map(|&i| s.group[i]).collect();
    for (t, info) in out.traces.iter_mut().enumerate() {
        info.rows = out.trace.iter().filter(|&&r| r == t).count();
    }
    out
}

/// Writes the matrix CSV that `benches/forest_parity.py` reads.
pub fn write_matrix(s: &NodeSamples, folds: &[Fold], path: &Path) -> Result<(), ParityError> {
    let err = |source| ParityError::Write {
        path: path.into(),
        source,
    };
    let mut fold = vec![-1i64; s.y.len()];
    for (k, f) in folds.iter().enumerate() {
        for &r in &f.test {
            fold[r] = k as i64;
        }
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    let mut header: Vec<&str> = s.features.iter().map(|f| f.column()).collect();
    header.extend(["power_watts", "fold"]);
    writeln!(out, "{}", header.join(",")).map_err(err)?;
    for (i, k) in fold.iter().enumerate() {
        for v in s.x.row(i) {
            write!(out, "{v:e},").map_err(err)?;
        }
        writeln!(out, "{:e},{k}", s.y[i]).map_err(err)?;
    }
    out.flush().map_err(err)
}

/// One side's result on one fold.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldScore {
    /// Held-out MAPE, percent.
    pub mape_percent: f64,
    /// CPU seconds of the fit, one core.
    pub fit_cpu_seconds: f64,
}

/// CPU time of the calling thread, seconds.
fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the kernel to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Our side: `candidate` fitted on every fold's training rows (all columns) through the
/// pipeline, scored on the held-out rows.
pub fn ours(
    s: &NodeSamples,
    folds: &[Fold],
    candidate: &Candidate,
) -> Result<Vec<FoldScore>, ParityError> {
    let columns: Vec<usize> = (0..s.features.len()).collect();
    folds
        .iter()
        .map(|f| {
            let started = thread_cpu_seconds();
            let fitted =
                fit::fit(s, &f.train, &columns, candidate).map_err(|source| ParityError::Fit {
                    candidate: candidate.name(),
                    fold: f.name.clone(),
                    source,
                })?;
            let fit_cpu_seconds = thread_cpu_seconds() - started;
            let (predicted, _) = fit::predict(&fitted, s, &f.test);
            let measured: Vec<f64> = f.test.iter().map(|&i| s.y[i]).collect();
            Ok(FoldScore {
                mape_percent: metrics::score(&measured, &predicted).mape_percent,
                fit_cpu_seconds,
            })
        })
        .collect()
}

/// Plain leave-one-workload-out (no selection) of several candidates on the same folds, an
/// ensemble reusing its members fitted on the same rows: per candidate, the held-out MAPE per
/// fold.
pub fn plain_lowo(
    s: &NodeSamples,
    folds: &[Fold],
    candidates: &[Candidate],
) -> Result<Vec<Vec<f64>>, ParityError> {
    let columns: Vec<usize> = (0..s.features.len()).collect();
    let mut out = vec![Vec::new(); candidates.len()];
    for f in folds {
        let mut cache = crate::models::Fits::default();
        let measured: Vec<f64> = f.test.iter().map(|&i| s.y[i]).collect();
        for (c, candidate) in candidates.iter().enumerate() {
            let fitted = fit::fit_reusing(s, &f.train, &columns, candidate, &mut cache).map_err(
                |source| ParityError::Fit {
                    candidate: candidate.name(),
                    fold: f.name.clone(),
                    source,
                },
            )?;
            let (predicted, _) = fit::predict(&fitted, s, &f.test);
            out[c].push(metrics::score(&measured, &predicted).mape_percent);
        }
    }
    Ok(out)
}

/// How to run scikit-learn's side.
#[derive(Debug, Clone)]
pub struct Sklearn {
    /// The Python with scikit-learn (the project's `.venv`).
    pub python: PathBuf,
    /// `benches/forest_parity.py`.
    pub script: PathBuf,
    /// Where answers are kept between runs ([`answers`]); `None` runs every fit.
    pub answers: Option<Answers>,
}

/// What `forest_parity.py` prints.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct SklearnRun {
    /// scikit-learn's version.
    pub sklearn: String,
    /// Per fold, held-out MAPE.
    pub mape: Vec<f64>,
    /// Per fold, fit CPU seconds.
    pub fit_cpu_seconds: Vec<f64>,
    /// Per seed (`random_state` 0..N-1 of `--seeds N`), per fold, held-out MAPE.
    pub mape_by_seed: Vec<Vec<f64>>,
}

impl Sklearn {
    /// The `.venv` Python and the bench script of the workspace at `root`.
    pub fn in_workspace(root: &Path) -> Sklearn {
        Sklearn {
            python: root.join(".venv/bin/python"),
            script: root.join("benches/forest_parity.py"),
            answers: None,
        }
    }

    /// The same, keeping its answers in `answers` (see [`answers`]).
    pub fn keeping_answers(self, answers: Answers) -> Sklearn {
        Sklearn {
            answers: Some(answers),
            ..self
        }
    }

    fn run(&self, args: &[Arg]) -> Result<String, ParityError> {
        let Some(answers) = &self.answers else {
            return self.run_python(args);
        };
        let key = answers::key(&self.python, &self.script, args)?;
        if let Some(stdout) = answers.get(&key, args)? {
            return Ok(stdout);
        }
        let stdout = self.run_python(args)?;
        answers.put(&key, args, &stdout)?;
        Ok(stdout)
    }

    fn run_python(&self, args: &[Arg]) -> Result<String, ParityError> {
        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.script).args(args.iter().map(Arg::word));
        let command = format!("{cmd:?}");
        let out = cmd.output().map_err(|source| ParityError::Spawn {
            command: command.clone(),
            source,
        })?;
        if !out.status.success() {
            return Err(ParityError::Python {
                command,
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// scikit-learn's default `model` (`rf` or `gbr`) on every fold of the matrix.
    pub fn folds(&self, matrix: &Path, model: &str) -> Result<SklearnRun, ParityError> {
        self.folds_by_seed(matrix, model, 1)
    }

    /// As [`Sklearn::folds`], fitted with `random_state` 0..`seeds` on every fold.
    pub fn folds_by_seed(
        &self,
        matrix: &Path,
        model: &str,
        seeds: usize,
    ) -> Result<SklearnRun, ParityError> {
        let seeds = seeds.to_string();
        let args = [
            Arg::Reads(matrix),
            Arg::Text("--model"),
            Arg::Text(model),
            Arg::Text("--seeds"),
            Arg::Text(&seeds),
        ];
        let output = self.run(&args)?;
        serde_json::from_str(output.trim()).map_err(|source| ParityError::Json {
            command: format!(
                "{} {}",
                self.script.display(),
                args.map(|a| a.word().to_string()).join(" ")
            ),
            output,
            source,
        })
    }
}

/// Both sides on the same folds.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Fold names.
    pub folds: Vec<String>,
    /// Ours per fold.
    pub ours: Vec<FoldScore>,
    /// scikit-learn's per fold.
    pub theirs: Vec<FoldScore>,
    /// scikit-learn's version.
    pub sklearn: String,
}

impl Comparison {
    /// Mean held-out MAPE over the folds: (ours, theirs).
    pub fn mean_mape(&self) -> (f64, f64) {
        let m = |v: &[FoldScore]| mean(&v.iter().map(|f| f.mape_percent).collect::<Vec<_>>());
        (m(&self.ours), m(&self.theirs))
    }

    /// Total fit CPU seconds: (ours, theirs).
    pub fn fit_cpu_seconds(&self) -> (f64, f64) {
        let t = |v: &[FoldScore]| v.iter().map(|f| f.fit_cpu_seconds).sum::<f64>();
        (t(&self.ours), t(&self.theirs))
    }
}

/// `candidate` against scikit-learn's `model` (`rf`, `gbr`) on the folds of `s`; `dir` holds the
/// matrix file.
pub fn compare(
    sk: &Sklearn,
    s: &NodeSamples,
    folds: &[Fold],
    candidate: &Candidate,
    model: &str,
    dir: &Path,
) -> Result<Comparison, ParityError> {
    let matrix = dir.join(format!("{}__matrix.csv", s.node));
    write_matrix(s, folds, &matrix)?;
    let run = sk.folds(&matrix, model)?;
    let ours = self::ours(s, folds, candidate)?;
    if run.mape.len() != ours.len() || run.fit_cpu_seconds.len() != ours.len() {
        return Err(ParityError::FoldCount {
            ours: ours.len(),
            theirs: run.mape.len(),
        });
    }
    Ok(Comparison {
        folds: folds.iter().map(|f| f.name.clone()).collect(),
        ours,
        theirs: run
            .mape
            .iter()
            .zip(&run.fit_cpu_seconds)
            .map(|(&mape_percent, &fit_cpu_seconds)| FoldScore {
                mape_percent,
                fit_cpu_seconds,
            })
            .collect(),
        sklearn: run.sklearn,
    })
}

/// Our scikit-learn-default forest grown with `seed` (its own bootstrap draws) on fold `f`'s
/// training rows, through the pipeline's scaling, unclamped (scikit-learn's forest is not
/// clamped either; a forest's mean of training watts never needs it): per held-out row, watts.
fn our_forest_predictions(
    s: &NodeSamples,
    f: &Fold,
    weights: Option<&[Vec<u32>]>,
    seed: u64,
) -> Vec<f64> {
    let p = crate::models::random_forest::sklearn().0;
    let columns: Vec<usize> = (0..s.features.len()).collect();
    let train = s.x.select(&f.train);
    let scaling = train.standardisation(&s.features);
    let x = train.standardised(&scaling);
    let y: Vec<f64> = f.train.iter().map(|&i| s.y[i]).collect();
    let kind = match weights {
        Some(w) => exact::forest_on_weights(&x, &y, w, p.tree, seed),
        None => exact::forest(&x, &y, p.trees, p.tree, seed),
    };
    let test: Matrix = s.x.select(&f.test).columns(&columns).standardised(&scaling);
    (0..test.rows)
        .map(|i| kind.predict_scaled(test.row(i)).unwrap_or(f64::NAN))
        .collect()
}

/// Our forest and scikit-learn's over several seeds each, on the same folds.
#[derive(Debug, Clone)]
pub struct SeedComparison {
    /// Ours, per seed (0..n), the mean held-out MAPE over the folds.
    pub ours: Vec<f64>,
    /// scikit-learn's, per `random_state` (0..n), the same.
    pub theirs: Vec<f64>,
    /// scikit-learn's version.
    pub sklearn: String,
}

impl SeedComparison {
    /// Mean over the seeds: (ours, theirs).
    pub fn mean_mape(&self) -> (f64, f64) {
        (mean(&self.ours), mean(&self.theirs))
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Our scikit-learn-default forest with seeds 0..`seeds` against `RandomForestRegressor()` with
/// `random_state` 0..`seeds`, each on its own draws, on the folds of `s`; `dir` holds the matrix
/// file.
pub fn compare_forest_seeds(
    sk: &Sklearn,
    s: &NodeSamples,
    folds: &[Fold],
    seeds: usize,
    dir: &Path,
) -> Result<SeedComparison, ParityError> {
    let matrix = dir.join(format!("{}__matrix.csv", s.node));
    write_matrix(s, folds, &matrix)?;
    let run = sk.folds_by_seed(&matrix, "rf", seeds)?;
    let by_seed = run.mape_by_seed;
    if by_seed.len() != seeds || by_seed.iter().any(|m| m.len() != folds.len()) {
        return Err(ParityError::FoldCount {
            ours: folds.len() * seeds,
            theirs: by_seed.iter().map(Vec::len).sum(),
        });
    }
    let truths: Vec<Vec<f64>> = folds
        .iter()
        .map(|f| f.test.iter().map(|&i| s.y[i]).collect())
        .collect();
    let ours = (0..seeds as u64)
        .map(|seed| {
            let per_fold: Vec<f64> = folds
                .iter()
                .zip(&truths)
                .map(|(f, truth)| {
                    let predicted = our_forest_predictions(s, f, None, seed);
                    metrics::score(truth, &predicted).mape_percent
                })
                .collect();
            mean(&per_fold)
        })
        .collect();
    Ok(SeedComparison {
        ours,
        theirs: by_seed.iter().map(|m| mean(m)).collect(),
        sklearn: run.sklearn,
    })
}

/// Held-out predictions of one fold, watts, in the fold's test order.
#[derive(Debug, Clone)]
pub struct SameDraws {
    /// Our forest.
    pub ours: Vec<f64>,
    /// scikit-learn's trees on our bootstrap draws.
    pub theirs: Vec<f64>,
    /// scikit-learn's again, other seeds (its own tie noise).
    pub theirs_again: Vec<f64>,
}

/// Fold `k`'s held-out predictions of our default-settings forest and of scikit-learn's trees
/// grown on the same bootstrap weights, and of scikit-learn's again with other seeds (its own
/// tie noise): (ours, theirs, theirs again), watts, in `folds[k].test` order.
pub fn same_bootstrap(
    sk: &Sklearn,
    s: &NodeSamples,
    folds: &[Fold],
    k: usize,
    seed: u64,
    dir: &Path,
) -> Result<SameDraws, ParityError> {
    let f = &folds[k];
    let matrix = dir.join(format!("{}__matrix.csv", s.node));
    write_matrix(s, folds, &matrix)?;
    let p = crate::models::random_forest::sklearn().0;
    let weights = exact::bootstrap_weights(f.train.len(), p.trees, seed);
    let wpath = dir.join(format!("{}__weights.csv", s.node));
    let err = |source| ParityError::Write {
        path: wpath.clone(),
        source,
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(&wpath).map_err(err)?);
    for w in &weights {
        let line: Vec<String> = w.iter().map(u32::to_string).collect();
        writeln!(out, "{}", line.join(",")).map_err(err)?;
    }
    out.flush().map_err(err)?;
    drop(out);
    let ours = our_forest_predictions(s, f, Some(&weights), seed);
    let ppath = dir.join(format!("{}__predictions.csv", s.node));
    sk.run(&[
        Arg::Reads(&matrix),
        Arg::Text("--model"),
        Arg::Text("rf"),
        Arg::Text("--weights"),
        Arg::Reads(&wpath),
        Arg::Text("--fold"),
        Arg::Text(&k.to_string()),
        Arg::Text("--predictions"),
        Arg::Writes(&ppath),
    ])?;
    let text = std::fs::read_to_string(&ppath).map_err(|source| ParityError::Read {
        path: ppath.clone(),
        source,
    })?;
    let (mut theirs, mut again) = (Vec::new(), Vec::new());
    for (line, text) in text.lines().enumerate().skip(1) {
        let mut cells = text.split(',').map(|cell| {
            cell.trim().parse::<f64>().map_err(|_| ParityError::Number {
                path: ppath.clone(),
                line: line + 1,
                cell: text.into(),
            })
        });
        let bad = || ParityError::Number {
            path: ppath.clone(),
            line: line + 1,
            cell: text.into(),
        };
        theirs.push(cells.next().ok_or_else(bad)??);
        again.push(cells.next().ok_or_else(bad)??);
    }
    Ok(SameDraws {
        ours,
        theirs,
        theirs_again: again,
    })
}

/// The machines parity is measured on: the x86 servers, one trace per workload run. The
/// ODROID-XU3 traces are left out: they are one trace per program execution (576 of them,
/// grouped by `<suite>-<program>` upstream, not by `workload_group`'s run suffix), so thinned
/// to 3,000 rows they leave folds without training rows; parity is a property of the
/// algorithm, and four machines measure it.
pub const MACHINES: [&str; 4] = [
    "bsc-opteron6140",
    "bsc-xeon-e5-2650",
    "bsc-xeon-x5650",
    "kepler-nx12",
];

#[cfg(test)]
mod tests {
    //! The forest-parity test: needs the `.venv` of scripts/setup.sh (scikit-learn, pinned in
    //! scripts/requirements-bench.txt) and the shared traces beside the checkout
    //! (`../shared/datasets/power`). Every machine is thinned to about 3,000 rows (every k-th
    //! row, before the folds are cut) so that scikit-learn's 100-tree forests fit in about a
    //! minute on two cores; the bench `forest_parity` runs the full rows.
    use super::*;
    use crate::models::gradient_boosting;
    use crate::samples;

    /// Rows per machine in the test.
    const ROWS: usize = 3000;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// Every machine of the shared power datasets, thinned, with its folds.
    fn machines() -> Vec<(NodeSamples, Vec<Fold>)> {
        let dir = root().join("../shared/datasets/power");
        assert!(
            dir.is_dir(),
            "{} missing: the shared datasets sit beside the checkout",
            dir.display()
        );
        let options =
            OfflineOptions::parse(None, "stress|cpu", Some("^(Disk|Network)"), None, None).unwrap();
        let nodes: Vec<NodeSamples> = samples::load(&[dir], None)
            .unwrap()
            .into_iter()
            .filter(|s| MACHINES.contains(&s.node.as_str()))
            .collect();
        assert_eq!(
            nodes.len(),
            MACHINES.len(),
            "the shared datasets lack one of {MACHINES:?}"
        );
        nodes
            .iter()
            .map(|s| folds(&options, &thinned(s, s.y.len().div_ceil(ROWS))).unwrap())
            .collect()
    }

    /// scikit-learn's side, its answers kept in the machine's cache like the scripts' other
    /// caches (`${XDG_CACHE_HOME:-~/.cache}/greenpipe`): a warm run fits only our side.
    fn sklearn() -> Sklearn {
        let sk = Sklearn::in_workspace(&root());
        assert!(
            sk.python.exists(),
            "{} missing: run scripts/setup.sh (it installs scikit-learn)",
            sk.python.display()
        );
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .expect("XDG_CACHE_HOME or HOME for the kept scikit-learn answers");
        sk.keeping_answers(Answers::in_dir(
            cache.join("greenpipe/scikit-learn-answers"),
        ))
    }

    /// Per machine, the mean held-out MAPE of `candidate` within `tolerance` points of
    /// scikit-learn's `model` on the same folds.
    fn parity(candidate: Candidate, model: &str, tolerance: f64) {
        let sk = sklearn();
        let dir = tempfile::tempdir().unwrap();
        let mut failures = Vec::new();
        for (s, folds) in machines() {
            let c = compare(&sk, &s, &folds, &candidate, model, dir.path()).unwrap();
            let (ours, theirs) = c.mean_mape();
            let (t_ours, t_theirs) = c.fit_cpu_seconds();
            eprintln!(
                "{} ({} rows, {} folds): {} {ours:.3} % against scikit-learn {} {model} \
                 {theirs:.3} %; fit CPU {t_ours:.2} s against {t_theirs:.2} s",
                s.node,
                s.y.len(),
                folds.len(),
                candidate.name(),
                c.sklearn
            );
            if (ours - theirs).abs() > tolerance {
                failures.push(format!("{}: {ours:.3} % against {theirs:.3} %", s.node));
            }
        }
        assert!(
            failures.is_empty(),
            "more than {tolerance} points apart: {failures:?}"
        );
    }

    /// The forest-parity test, each forest on its own draws: per machine, the mean MAPE of our
    /// scikit-learn-default forest over seeds 0..4 within 0.15 point of `RandomForestRegressor()`'s
    /// over `random_state` 0..4. One seed against one seed does not hold 0.15 point (2026-12-02,
    /// ours with seed 7 against `random_state=0`: 8.43 / 6.43 / 5.26 / 7.65 % against 8.60 /
    /// 6.07 / 5.15 / 6.87 %), because one forest's MAPE moves with its bootstrap draws by more
    /// than that (scikit-learn alone, `random_state` 0..4 on kepler-nx12: 6.87–7.24 %). Over five
    /// seeds each (2026-12-03): −0.03, +0.15, +0.05 and +0.10 point.
    #[test]
    fn over_five_seeds_each_our_forest_scores_as_scikit_learns_on_every_shared_machine() {
        let sk = sklearn();
        let dir = tempfile::tempdir().unwrap();
        let mut failures = Vec::new();
        for (s, folds) in machines() {
            let c = compare_forest_seeds(&sk, &s, &folds, 5, dir.path()).unwrap();
            let (ours, theirs) = c.mean_mape();
            eprintln!(
                "{} ({} rows, {} folds), seeds 0..4 each: ours {ours:.3} % {:?}, scikit-learn \
                 {} {theirs:.3} % {:?}, {:+.3} points",
                s.node,
                s.y.len(),
                folds.len(),
                c.ours,
                c.sklearn,
                c.theirs,
                ours - theirs
            );
            if (ours - theirs).abs() > 0.15 {
                failures.push(format!("{}: {ours:.3} % against {theirs:.3} %", s.node));
            }
        }
        assert!(
            failures.is_empty(),
            "more than 0.15 points apart over five seeds each: {failures:?}"
        );
    }

    #[test]
    fn the_default_boosting_scores_as_scikit_learns_on_every_shared_machine() {
        parity(Candidate::new(gradient_boosting::sklearn()), "gbr", 0.15);
    }

    /// Median and 90th percentile of |a - b|.
    fn spread(a: &[f64], b: &[f64]) -> (f64, f64) {
        let mut d: Vec<f64> = a.iter().zip(b).map(|(x, y)| (x - y).abs()).collect();
        d.sort_by(f64::total_cmp);
        let q = |p: f64| d[((d.len() - 1) as f64 * p) as usize];
        (q(0.5), q(0.9))
    }

    /// Prediction by prediction on one fold, both forests on the same bootstrap draws. They can
    /// still differ where a node's inputs tie (the same partition, in each side's random input
    /// order), so the tolerance is scikit-learn's own spread between two forests on the same
    /// draws with other seeds: ours may be at most 1.5 times as far from scikit-learn's as
    /// scikit-learn's is from itself, at the median and the 90th percentile.
    #[test]
    fn on_the_same_bootstrap_draws_the_forests_predict_alike() {
        let sk = sklearn();
        let dir = tempfile::tempdir().unwrap();
        let (s, folds) = machines()
            .into_iter()
            .find(|(s, _)| s.node.contains("e5-2650"))
            .expect("the E5-2650");
        let k = folds.iter().position(|f| f.name == "web_search").unwrap();
        let SameDraws {
            ours,
            theirs,
            theirs_again: again,
        } = same_bootstrap(&sk, &s, &folds, k, 7, dir.path()).unwrap();
        assert_eq!(ours.len(), folds[k].test.len());
        assert_eq!(theirs.len(), ours.len());
        let (ours_median, ours_p90) = spread(&ours, &theirs);
        let (noise_median, noise_p90) = spread(&again, &theirs);
        eprintln!(
            "{} fold {}: {} predictions; |ours - scikit-learn| median {ours_median:.3} W, 90th \
             percentile {ours_p90:.3} W; scikit-learn against itself (other seeds) \
             {noise_median:.3} W, {noise_p90:.3} W",
            s.node,
            folds[k].name,
            ours.len()
        );
        assert!(
            ours_median <= 1.5 * noise_median && ours_p90 <= 1.5 * noise_p90,
            "ours {ours_median:.3} / {ours_p90:.3} W from scikit-learn, its own noise \
             {noise_median:.3} / {noise_p90:.3} W"
        );
    }

    /// Per machine, on every fold, both forests grown on the same bootstrap draws (ours drawn,
    /// scikit-learn's trees fitted on them as `sample_weight`).
    /// Drawing the rows is the only step the two cannot share (two random generators), and one
    /// draw against another moves the mean by more than 0.15 point on kepler-nx12's extrapolating
    /// last block (22.2–23.4 % over three draws, 2026-12-03), so the algorithms are compared on
    /// the same draws. Asserted: ours is never more than 0.15 point worse than scikit-learn's.
    /// Not asserted, because it does not hold: within 0.15 point either way. On the Opteron 6140
    /// ours is 0.21 point better (8.13 against 8.33 %, scikit-learn against itself with other
    /// tie seeds 8.25 %; the other machines 0.09, 0.02 and 0.03 apart; 2026-12-03), and the cause
    /// is not found: rounding the inputs to f32 as scikit-learn's trees do changes nothing.
    #[test]
    fn on_the_same_bootstrap_draws_our_forest_scores_no_worse_than_scikit_learns() {
        let sk = sklearn();
        let dir = tempfile::tempdir().unwrap();
        let mut failures = Vec::new();
        for (s, folds) in machines() {
            let (mut ours, mut theirs, mut again) = (0.0, 0.0, 0.0);
            for (k, fold) in folds.iter().enumerate() {
                let d = same_bootstrap(&sk, &s, &folds, k, 7, dir.path()).unwrap();
                let truth: Vec<f64> = fold.test.iter().map(|&i| s.y[i]).collect();
                let mape = |p: &[f64]| metrics::score(&truth, p).mape_percent;
                ours += mape(&d.ours) / folds.len() as f64;
                theirs += mape(&d.theirs) / folds.len() as f64;
                again += mape(&d.theirs_again) / folds.len() as f64;
            }
            eprintln!(
                "{} ({} rows, {} folds), same draws: ours {ours:.3} %, scikit-learn {theirs:.3} % \
                 (again, other tie seeds: {again:.3} %), {:+.3} points",
                s.node,
                s.y.len(),
                folds.len(),
                ours - theirs
            );
            if ours - theirs > 0.15 {
                failures.push(format!("{}: {ours:.3} % against {theirs:.3} %", s.node));
            }
        }
        assert!(
            failures.is_empty(),
            "more than 0.15 points worse than scikit-learn: {failures:?}"
        );
    }
}
