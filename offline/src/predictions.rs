//! `crossval --dump-predictions DIR`: every fit's predictions, so that selection rules can be
//! compared offline on exactly the fits crossval made (`benches/selection_rules.py` reads them).
//!
//! Per node: `NODE__rows.csv` (`row,group,power_watts`, then the node's feature columns, raw, as
//! the models were given them: so that other libraries can be fitted on exactly these rows and
//! splits, as `benches/grid_lomo.py` fits scikit-learn's), `NODE__specs.txt` (one model label per
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
    let mut header = vec!["row", "group", "power_watts"];
    header.extend(s.features.iter().map(|f| f.column()));
    rows.write_record(&header)
        .map_err(|e| write_error(&path, e))?;
    for (i, (g, y)) in s.group.iter().zip(&s.y).enumerate() {
        let mut record = vec![i.to_string(), s.groups[*g].clone(), y.to_string()];
        record.extend(s.x.row(i).iter().map(f64::to_string));
        rows.write_record(&record)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Score;
    use crate::models::ols::Ols;
    use crate::models::Candidate;
    use crate::samples::TraceInfo;
    use greenpipe_common::features::Feature;

    #[test]
    fn the_rows_file_carries_every_feature_so_other_libraries_can_refit_the_same_splits() {
        let features = vec![Feature::CpuSecondsPerSecond, Feature::CpuFrequencyHertz];
        let mut s = NodeSamples::empty("node a", features);
        for (g, name) in ["idle", "web,search"].iter().enumerate() {
            s.groups.push((*name).into());
            s.traces.push(TraceInfo {
                path: format!("{name}.csv").into(),
                workload: (*name).into(),
                group: g,
                rows: 2,
            });
        }
        for i in 0..4 {
            s.x.data.extend([0.25 * i as f64, 1.5e9]);
            s.x.rows += 1;
            s.y.push(3.0 + i as f64);
            s.timestamp.push(i as f64);
            s.trace.push(i / 2);
            s.group.push(i / 2);
        }
        let spec = Spec {
            label: "ols".into(),
            candidate: Candidate::new(Ols),
            columns: vec![0],
            only_groups: None,
            baseline: false,
        };
        let job = Job {
            spec: 0,
            train_groups: vec![0],
            test_groups: vec![1],
        };
        let result = GroupResult {
            group: 1,
            rows: vec![2, 3],
            predicted: vec![5.5, 6.5],
            score: Score::default(),
            clamped: 0,
        };
        let dir = std::env::temp_dir().join(format!("greenpipe-dump-{}", std::process::id()));
        write(&dir, &s, &[spec], &[job], &[Ok(vec![result])]).unwrap();
        let slug = report::slug(&s.node);
        let rows = std::fs::read_to_string(dir.join(format!("{slug}__rows.csv"))).unwrap();
        assert_eq!(
            rows,
            "row,group,power_watts,cpu_seconds_per_second,cpu_frequency_hertz\n\
             0,idle,3,0,1500000000\n1,idle,4,0.25,1500000000\n\
             2,\"web,search\",5,0.5,1500000000\n3,\"web,search\",6,0.75,1500000000\n"
        );
        let predictions =
            std::fs::read_to_string(dir.join(format!("{slug}__predictions.csv"))).unwrap();
        assert_eq!(
            predictions,
            "spec,scored_groups,group,row,predicted_watts\n\
             0,\"web,search\",\"web,search\",2,5.5\n0,\"web,search\",\"web,search\",3,6.5\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
