//! Grouped cross-validation: whole workloads (groups) are held out, never single rows, so a
//! score measures accuracy on work the model has not seen.

use crate::samples::NodeSamples;

/// Splits `groups` into at most `k` folds of whole groups, balancing rows: largest group first,
/// each to the fold with the fewest rows so far. Deterministic.
pub fn group_folds(s: &NodeSamples, groups: &[usize], k: usize) -> Vec<Vec<usize>> {
    let k = k.min(groups.len()).max(1);
    let size = |g: usize| s.group.iter().filter(|&&x| x == g).count();
    let mut sized: Vec<(usize, usize)> = groups.iter().map(|&g| (size(g), g)).collect();
    sized.sort_by(|a, b| b.cmp(a));
    let mut folds: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); k];
    for (n, g) in sized {
        let f = folds
            .iter_mut()
            .min_by_key(|(rows, groups)| (*rows, groups.len()))
            .expect("k >= 1");
        f.0 += n;
        f.1.push(g);
    }
    folds
        .into_iter()
        .map(|(_, mut g)| {
            g.sort();
            g
        })
        .filter(|g| !g.is_empty())
        .collect()
}

/// One split: groups to train on and groups to score, never sharing one.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Groups scored.
    pub test_groups: Vec<usize>,
    /// Groups trained on.
    pub train_groups: Vec<usize>,
}

/// Splits for grouped k-fold inside `pool` (group ids): each fold's groups are scored by a model
/// trained on every other group of `pool` plus the `always` groups.
pub fn splits(s: &NodeSamples, pool: &[usize], always: &[usize], k: usize) -> Vec<Split> {
    group_folds(s, pool, k)
        .into_iter()
        .map(|test_groups| {
            let train_groups: Vec<usize> = pool
                .iter()
                .chain(always)
                .copied()
                .filter(|g| !test_groups.contains(g))
                .collect();
            Split {
                train_groups,
                test_groups,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::{workload_group, TraceInfo};
    use greenpipe_common::features::Feature;

    /// Samples whose workloads include repeated runs that must share a group.
    fn samples(workloads: &[(&str, usize)]) -> NodeSamples {
        let mut s = NodeSamples::empty("n", vec![Feature::CpuSecondsPerSecond]);
        for (t, (w, rows)) in workloads.iter().enumerate() {
            let name = workload_group(w);
            let g = s.group_index(&name).unwrap_or_else(|| {
                s.groups.push(name);
                s.groups.len() - 1
            });
            s.traces.push(TraceInfo {
                path: format!("{w}.csv").into(),
                workload: w.to_string(),
                group: g,
                rows: *rows,
            });
            for i in 0..*rows {
                s.x.data.push(i as f64);
                s.x.rows += 1;
                s.y.push(1.0);
                s.timestamp.push(i as f64);
                s.trace.push(t);
                s.group.push(g);
            }
        }
        s
    }

    #[test]
    fn grouped_folds_never_leak_a_workload() {
        let s = samples(&[
            ("Disk", 900),
            ("Network", 400),
            ("web_serving", 500),
            ("web_serving_run2", 505),
            ("data_caching", 100),
            ("graph", 35),
            ("media", 137),
            ("search", 96),
            ("analytics", 216),
        ]);
        assert_eq!(s.groups.len(), 8, "web_serving runs share one group");
        let always = vec![0, 1];
        let pool: Vec<usize> = (2..8).collect();
        for k in [2, 3, 5, 6, 10] {
            let splits = splits(&s, &pool, &always, k);
            assert_eq!(splits.len(), k.min(pool.len()));
            let mut scored = Vec::new();
            for sp in &splits {
                assert!(sp.test_groups.iter().all(|g| !sp.train_groups.contains(g)));
                assert!(always.iter().all(|g| sp.train_groups.contains(g)));
                // Row level: no trace, hence no workload run, on both sides.
                let train_rows = s.rows_of(&sp.train_groups);
                let test_rows = s.rows_of(&sp.test_groups);
                for &r in &test_rows {
                    let w = &s.traces[s.trace[r]].workload;
                    assert!(train_rows
                        .iter()
                        .all(|&q| workload_group(&s.traces[s.trace[q]].workload)
                            != workload_group(w)));
                }
                scored.extend(sp.test_groups.clone());
            }
            scored.sort();
            assert_eq!(
                scored, pool,
                "every pool group scored exactly once (k = {k})"
            );
        }
    }
}
