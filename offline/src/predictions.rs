//! `crossval --dump-predictions DIR`: every fit's predictions, so that selection rules can be
//! compared offline on exactly the fits crossval made (`benches/selection_rules.py` reads them).
//!
//! Per node: `NODE__rows.csv` (`row,group,power_watts`), `NODE__specs.txt` (one model label per
//! line, the `spec` index of the predictions) and `NODE__predictions.csv`
//! (`spec,scored_groups,group,row,predicted_watts`; `scored_groups` joins with `+` the groups the
//! fit left out and scored, e.g. `data_serving` for an outer fit and `data_serving+web_search`
//! for an inner one).

use std::path::Path;

use crate::evaluate::{GroupResult, Job, Spec};
use crate::report::{self, WriteError};
use crate::samples::NodeSamples;

/// Writes the three files of one node into `dir`.
pub fn write(
    dir: &Path,
    s: &NodeSamples,
    specs: &[Spec],
    jobs: &[Job],
    results: &[Result<Vec<GroupResult>, String>],
) -> Result<(), WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let slug = report::slug(&s.node);
    let path = dir.join(format!("{slug}__rows.csv"));
    let mut rows = csv_file(&path)?;
    // Lazy: the path is copied only when a row fails, not for each of the many rows.
    let write_error = |path: &Path, source| WriteError::WriteCsv {
        path: path.to_path_buf(),
        source,
    };
    rows.write_record(["row", "group", "power_watts"])
        .map_err(|e| write_error(&path, e))?;
    for (i, (g, y)) in s.group.iter().zip(&s.y).enumerate() {
        rows.write_record([i.to_string(), s.groups[*g].clone(), y.to_string()])
            .map_err(|e| write_error(&path, e))?;
    }
    rows.flush().map_err(|source| WriteError::Write {
        path: path.clone(),
        source,
    })?;
    let labels: String = specs.iter().map(|x| format!("{}\n", x.label)).collect();
    let specs_path = dir.join(format!("{slug}__specs.txt"));
    std::fs::write(&specs_path, labels).map_err(|source| WriteError::Write {
        path: specs_path,
        source,
    })?;
    let path = dir.join(format!("{slug}__predictions.csv"));
    let mut f = csv_file(&path)?;
    f.write_record(["spec", "scored_groups", "group", "row", "predicted_watts"])
        .map_err(|e| write_error(&path, e))?;
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
                ])
                .map_err(|e| write_error(&path, e))?;
            }
        }
    }
    f.flush().map_err(|source| WriteError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(())
}

/// A CSV file in the format `benches/selection_rules.py` reads (`\n` line ends; cells quoted
/// only when a group name needs it).
fn csv_file(path: &Path) -> Result<csv::Writer<std::fs::File>, WriteError> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_path(path)
        .map_err(|source| WriteError::CreateCsv {
            path: path.to_path_buf(),
            source,
        })
}
