//! Run with `cargo bench -p greenpipe-offline --bench forest_parity` (scikit-learn from the
//! `.venv` of scripts/setup.sh; the shared traces beside the checkout).
//!
//! The forest- and boosting-parity check of `offline::parity` on its machines
//! (`parity::MACHINES`, from `../shared/datasets/power`) with all their rows (the unit tests thin
//! them to 3,000): per machine, the mean held-out MAPE of our scikit-learn-default forest and boosting against
//! `RandomForestRegressor()` and `GradientBoostingRegressor()` on the same folds, and the fit
//! CPU time of both on one core, measured side by side in this one run; then the prediction-by-
//! prediction comparison of the two forests grown on the same bootstrap draws on one fold.
//! Prints markdown tables (docs/training.md); asserts nothing about time.
//!
//! Then the plain leave-one-workload-out of the fixed configurations (forest, forest averaged
//! with OLS or ridge, OLS) on the same folds, for the leave-one-machine-out table.
//!
//! `GREENPIPE_PARITY_MODELS` (default `rf,gbr`) picks the models compared with scikit-learn.
//!
//! `GREENPIPE_PARITY_SEEDS=N` runs only the forest comparison over seeds: per machine, our
//! forest with seeds 0..N-1 against `RandomForestRegressor(random_state=0..N-1)`, each on its
//! own bootstrap draws, the mean MAPE over the seeds and its range; `GREENPIPE_PARITY_ROWS=R`
//! thins every machine to about R rows first, as the unit tests do (every k-th row).

use std::path::PathBuf;

use greenpipe_offline::models::ensemble::Ensemble;
use greenpipe_offline::models::ols::Ols;
use greenpipe_offline::models::ridge::Ridge;
use greenpipe_offline::models::{gradient_boosting, random_forest, Candidate};
use greenpipe_offline::parity::{self, Sklearn};
use greenpipe_offline::{samples, OfflineOptions};

fn sklearn_forest() -> Candidate {
    Candidate::new(random_forest::sklearn())
}

fn ensemble(members: Vec<Candidate>) -> Candidate {
    Candidate::new(Ensemble { members })
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let sk = Sklearn::in_workspace(&root);
    let options =
        OfflineOptions::parse(None, "stress|cpu", Some("^(Disk|Network)"), None, None).unwrap();
    let nodes: Vec<_> = samples::load(&[root.join("../shared/datasets/power")], None)
        .unwrap()
        .into_iter()
        .filter(|s| parity::MACHINES.contains(&s.node.as_str()))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    if let Ok(seeds) = std::env::var("GREENPIPE_PARITY_SEEDS") {
        let seeds: usize = seeds
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .expect("GREENPIPE_PARITY_SEEDS: a number of seeds, at least 1");
        let rows: Option<usize> = std::env::var("GREENPIPE_PARITY_ROWS")
            .ok()
            .map(|r| r.parse().expect("GREENPIPE_PARITY_ROWS: a number of rows"));
        forest_over_seeds(&sk, &options, &nodes, seeds, rows, dir.path());
        return;
    }
    let models = std::env::var("GREENPIPE_PARITY_MODELS").unwrap_or_else(|_| "rf,gbr".into());
    for model in models.split(',') {
        let candidate = match model {
            "rf" => sklearn_forest(),
            "gbr" => Candidate::new(gradient_boosting::sklearn()),
            other => panic!("GREENPIPE_PARITY_MODELS: unknown model {other:?}; known: rf, gbr"),
        };
        println!("\n{} against scikit-learn {model}:\n", candidate.name());
        println!("| machine | rows | folds | ours | scikit-learn | difference | fit CPU ours | fit CPU scikit-learn |");
        println!("|---|---|---|---|---|---|---|---|");
        for s in &nodes {
            let (s, folds) = parity::folds(&options, s).unwrap();
            let c = parity::compare(&sk, &s, &folds, &candidate, model, dir.path()).unwrap();
            let (ours, theirs) = c.mean_mape();
            let (t_ours, t_theirs) = c.fit_cpu_seconds();
            println!(
                "| {} | {} | {} | {ours:.2} % | {theirs:.2} % | {:+.2} | {t_ours:.1} s | {t_theirs:.1} s |",
                s.node,
                s.y.len(),
                folds.len(),
                ours - theirs
            );
            for (i, f) in c.folds.iter().enumerate() {
                eprintln!(
                    "  {}: {f}: {:.2} % against {:.2} %",
                    s.node, c.ours[i].mape_percent, c.theirs[i].mape_percent
                );
            }
        }
    }
    // Plain leave-one-workload-out of the fixed (no selection) configurations that
    // benches/grid_lomo.py weighs against the default's nested selection.
    let fixed = [
        sklearn_forest(),
        ensemble(vec![sklearn_forest(), Candidate::new(Ols)]),
        ensemble(vec![sklearn_forest(), Candidate::new(Ridge { alpha: 1.0 })]),
        Candidate::new(Ols),
    ];
    println!("\nplain leave-one-workload-out, mean held-out MAPE:\n");
    println!(
        "| machine | {} |",
        fixed
            .iter()
            .map(Candidate::name)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|".repeat(fixed.len()));
    for s in &nodes {
        let (s, folds) = parity::folds(&options, s).unwrap();
        let per = parity::plain_lowo(&s, &folds, &fixed).unwrap();
        let cells: Vec<String> = per
            .iter()
            .map(|v| format!("{:.2} %", v.iter().sum::<f64>() / v.len() as f64))
            .collect();
        println!("| {} | {} |", s.node, cells.join(" | "));
    }
    for s in &nodes {
        let (s, folds) = parity::folds(&options, s).unwrap();
        let Some(k) = folds.iter().position(|f| f.name == "web_search") else {
            continue;
        };
        let parity::SameDraws {
            ours,
            theirs,
            theirs_again: again,
        } = parity::same_bootstrap(&sk, &s, &folds, k, 7, dir.path()).unwrap();
        let quantiles = |a: &[f64], b: &[f64]| {
            let mut d: Vec<f64> = a.iter().zip(b).map(|(x, y)| (x - y).abs()).collect();
            d.sort_by(f64::total_cmp);
            let q = |p: f64| d[((d.len() - 1) as f64 * p) as usize];
            format!(
                "median {:.3} W, 90th percentile {:.3} W, max {:.3} W",
                q(0.5),
                q(0.9),
                q(1.0)
            )
        };
        println!(
            "same bootstrap draws, {} fold web_search, {} predictions: |ours - scikit-learn| {}; \
             scikit-learn against itself with other seeds {}",
            s.node,
            ours.len(),
            quantiles(&ours, &theirs),
            quantiles(&again, &theirs)
        );
    }
}

/// The forests over `seeds` seeds each, every machine (thinned to about `rows` rows if given).
fn forest_over_seeds(
    sk: &Sklearn,
    options: &OfflineOptions,
    nodes: &[greenpipe_offline::samples::NodeSamples],
    seeds: usize,
    rows: Option<usize>,
    dir: &std::path::Path,
) {
    println!(
        "\nour forest, seeds 0..={last}, against RandomForestRegressor(random_state=0..={last}), each on its own draws:\n",
        last = seeds - 1
    );
    println!("| machine | rows | folds | ours, mean (lowest–highest) | scikit-learn, mean (lowest–highest) | difference |");
    println!("|---|---|---|---|---|---|");
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!(
            "{:.2} % ({lo:.2}–{hi:.2})",
            v.iter().sum::<f64>() / v.len() as f64
        )
    };
    for s in nodes {
        let s = match rows {
            Some(r) => parity::thinned(s, s.y.len().div_ceil(r)),
            None => s.clone(),
        };
        let (s, folds) = parity::folds(options, &s).unwrap();
        let c = parity::compare_forest_seeds(sk, &s, &folds, seeds, dir).unwrap();
        let (ours, theirs) = c.mean_mape();
        eprintln!(
            "  {}: ours {:?}, scikit-learn {:?}",
            s.node, c.ours, c.theirs
        );
        println!(
            "| {} | {} | {} | {} | {} | {:+.2} |",
            s.node,
            s.y.len(),
            folds.len(),
            range(&c.ours),
            range(&c.theirs),
            ours - theirs
        );
    }
}
