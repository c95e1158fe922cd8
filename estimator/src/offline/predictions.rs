//! `crossval --dump-predictions DIR`: every fit's predictions, so that selection rules can be
//! compared offline on exactly the fits crossval made (`benches/selection_rules.py` reads them).
//!
//! Per node: `NODE__rows.csv` (`row,group,power_watts`), `NODE__specs.txt` (one model label per
//! line, the `spec` index of the predictions) and `NODE__predictions.csv`
//! (`spec,scored_groups,group,row,predicted_watts`; `scored_groups` joins with `+` the groups the
//! fit left out and scored, e.g. `data_serving` for an outer fit and `data_serving+web_search`
//! for an inner one).

use std::path::Path;

use anyhow::Context;

use crate::offline::evaluate::{GroupResult, Job, Spec};
use crate::offline::report;
use crate::offline::samples::NodeSamples;

/// Writes the three files of one node into `dir`.
pub fn write(
    dir: &Path,
    s: &NodeSamples,
    specs: &[Spec],
    jobs: &[Job],
    results: &[Result<Vec<GroupResult>, String>],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let slug = report::slug(&s.node);
    let path = dir.join(format!("{slug}__rows.csv"));
    let mut rows = csv_file(&path)?;
    rows.write_record(["row", "group", "power_watts"])?;
    for (i, (g, y)) in s.group.iter().zip(&s.y).enumerate() {
        rows.write_record([i.to_string(), s.groups[*g].clone(), y.to_string()])?;
    }
    rows.flush()?;
    let labels: String = specs.iter().map(|x| format!("{}\n", x.label)).collect();
    std::fs::write(dir.join(format!("{slug}__specs.txt")), labels)?;
    let path = dir.join(format!("{slug}__predictions.csv"));
    let mut f = csv_file(&path)?;
    f.write_record(["spec", "scored_groups", "group", "row", "predicted_watts"])?;
    for (job, r) in jobs.iter().zip(results) {
        let Ok(r) = r else { continue };
        let scored: Vec<&str> = job
            .test_groups
            .iter()
            .map(|&g| s.groups[g].as_str())
            .collect();
        let scored = scored.join("+");
        for gr in r {
            for (row, p) in gr.rows.iter().zip(&gr.predicted) {
                f.write_record([
                    job.spec.to_string(),
                    scored.clone(),
                    s.groups[gr.group].clone(),
                    row.to_string(),
                    p.to_string(),
                ])?;
            }
        }
    }
    f.flush()?;
    Ok(())
}

/// A CSV file in the format `benches/selection_rules.py` reads (`\n` line ends; cells quoted
/// only when a group name needs it).
fn csv_file(path: &Path) -> anyhow::Result<csv::Writer<std::fs::File>> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_path(path)
        .with_context(|| format!("creating {}", path.display()))
}
