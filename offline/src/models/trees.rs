//! Regression trees, gradient boosting and random forests, written here.
//!
//! linfa 0.8 has no tree regressor (linfa-trees grows classification trees only) and no
//! boosting; the Rust GBDT crates we looked at either pull a large dependency tree or store
//! their own model format, while the online estimator must predict from our model file alone
//! (`greenpipe_common::model::RegressionTree`). Growing a tree on histograms is short, so it
//! lives here, tested, and writes that format directly.
//!
//! Inputs are binned once per fit into at most [`MAX_BINS`] quantile bins (as LightGBM and
//! scikit-learn's `HistGradientBoostingRegressor` do); a split is "bin <= b", stored as the
//! threshold "x <= cut[b]" so prediction on unbinned inputs takes the same branch.

use greenpipe_common::model::{ModelKind, RegressionTree, TreeNode};

use crate::models::linear;
use crate::samples::Matrix;

/// Bins per input at most (fits in a `u8`).
pub const MAX_BINS: usize = 64;

/// Deterministic SplitMix64: reproducible folds and forests without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Binned inputs: `codes[c * rows + i]` is the bin of row `i` in column `c`.
#[derive(Debug)]
pub struct Bins {
    rows: usize,
    cuts: Vec<Vec<f64>>,
    codes: Vec<u8>,
}

impl Bins {
    /// Bins every column at its quantiles; cuts lie midway between neighbouring distinct values.
    pub fn new(x: &Matrix) -> Bins {
        let mut cuts = Vec::with_capacity(x.cols);
        let mut codes = vec![0u8; x.rows * x.cols];
        for c in 0..x.cols {
            let mut col: Vec<f64> = (0..x.rows).map(|i| x.row(i)[c]).collect();
            col.sort_unstable_by(f64::total_cmp);
            let mut distinct = col.clone();
            distinct.dedup();
            let mut cut: Vec<f64> = if distinct.len() <= MAX_BINS {
                distinct.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect()
            } else {
                (1..MAX_BINS)
                    .filter_map(|k| {
                        let q = col[k * col.len() / MAX_BINS];
                        let next = distinct.partition_point(|&v| v <= q);
                        distinct.get(next).map(|&n| (q + n) / 2.0)
                    })
                    .collect()
            };
            cut.dedup();
            for i in 0..x.rows {
                let v = x.row(i)[c];
                codes[c * x.rows + i] = cut.partition_point(|&k| k < v) as u8;
            }
            cuts.push(cut);
        }
        Bins {
            rows: x.rows,
            cuts,
            codes,
        }
    }

    fn code(&self, c: usize, i: u32) -> usize {
        self.codes[c * self.rows + i as usize] as usize
    }
}

/// Shape of one tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeParams {
    /// Levels below the root at most.
    pub max_depth: usize,
    /// Rows per leaf at least.
    pub min_leaf: usize,
    /// Inputs tried per split (0 = all), drawn at random: the forest's decorrelation.
    pub features_per_split: usize,
}

/// `max_depth` of a fully grown tree (scikit-learn's `max_depth=None`).
pub const FULL_DEPTH: usize = usize::MAX;

impl TreeParams {
    /// `max_depth` in a candidate's name: `full` for trees grown until their leaves are pure.
    pub fn depth_name(&self) -> String {
        if self.max_depth == FULL_DEPTH {
            "full".into()
        } else {
            self.max_depth.to_string()
        }
    }
}

/// Grows one least-squares tree on `target` over the rows `rows` (repeats allowed).
pub fn grow(
    bins: &Bins,
    target: &[f64],
    rows: &mut [u32],
    params: TreeParams,
    rng: &mut Rng,
) -> RegressionTree {
    let mut nodes = Vec::new();
    build(bins, target, rows, None, 0, params, rng, &mut nodes);
    RegressionTree { nodes }
}

/// `(sum of target, rows)` per bin of each input, `MAX_BINS` slots per input, input-major.
type Hist = Vec<(f64, u32)>;

/// The histograms of `inputs` over `rows` (other inputs' slots stay empty).
fn histogram(bins: &Bins, target: &[f64], rows: &[u32], inputs: &[usize]) -> Hist {
    let mut hist = vec![(0.0, 0); bins.cuts.len() * MAX_BINS];
    for &c in inputs {
        let h = &mut hist[c * MAX_BINS..(c + 1) * MAX_BINS];
        for &r in rows {
            let slot = &mut h[bins.code(c, r)];
            slot.0 += target[r as usize];
            slot.1 += 1;
        }
    }
    hist
}

/// `parent - child`, bin by bin; an empty bin gets exactly 0 so that split ties resolve as they
/// would on a histogram built from the rows.
fn subtract(parent: &Hist, child: &Hist) -> Hist {
    parent
        .iter()
        .zip(child)
        .map(|(p, c)| {
            let n = p.1 - c.1;
            (if n == 0 { 0.0 } else { p.0 - c.0 }, n)
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn build(
    bins: &Bins,
    target: &[f64],
    rows: &mut [u32],
    given: Option<Hist>,
    depth: usize,
    params: TreeParams,
    rng: &mut Rng,
    nodes: &mut Vec<TreeNode>,
) -> usize {
    let at = nodes.len();
    let n = rows.len();
    let sum: f64 = rows.iter().map(|&r| target[r as usize]).sum();
    nodes.push(TreeNode::Leaf {
        value: sum / n.max(1) as f64,
    });
    if depth >= params.max_depth || n < 2 * params.min_leaf.max(1) {
        return at;
    }
    let cols = bins.cuts.len();
    let mut candidates: Vec<usize> = (0..cols).collect();
    if params.features_per_split > 0 && params.features_per_split < cols {
        for i in 0..params.features_per_split {
            let j = i + rng.below(cols - i);
            candidates.swap(i, j);
        }
        candidates.truncate(params.features_per_split);
    }
    // When every input is a candidate (boosting), a child's histogram is its parent's minus its
    // sibling's, so only the smaller child is counted: the histogram loop is most of the time.
    let every_input = candidates.len() == cols;
    let hist = match given {
        Some(h) if every_input => h,
        _ => histogram(bins, target, rows, &candidates),
    };
    let parent = sum * sum / n as f64;
    let mut best: Option<(f64, usize, usize)> = None;
    for &c in &candidates {
        let nbins = bins.cuts[c].len() + 1;
        if nbins < 2 {
            continue;
        }
        let hist = &hist[c * MAX_BINS..(c + 1) * MAX_BINS];
        let (mut sl, mut nl) = (0.0, 0usize);
        for (b, h) in hist[..nbins - 1].iter().enumerate() {
            sl += h.0;
            nl += h.1 as usize;
            let nr = n - nl;
            if nl < params.min_leaf || nr < params.min_leaf {
                continue;
            }
            let sr = sum - sl;
            let gain = sl * sl / nl as f64 + sr * sr / nr as f64 - parent;
            if best.is_none_or(|(g, _, _)| gain > g) {
                best = Some((gain, c, b));
            }
        }
    }
    let Some((gain, c, b)) = best else {
        return at;
    };
    if gain <= 1e-12 * parent.abs().max(1e-12) {
        return at;
    }
    // Partition in place: rows with bin <= b first.
    let mut split = 0;
    for i in 0..n {
        if bins.code(c, rows[i]) <= b {
            rows.swap(i, split);
            split += 1;
        }
    }
    let (left_rows, right_rows) = rows.split_at_mut(split);
    let (left_hist, right_hist) = if every_input && depth + 1 < params.max_depth {
        if left_rows.len() <= right_rows.len() {
            let small = histogram(bins, target, left_rows, &candidates);
            let large = subtract(&hist, &small);
            (Some(small), Some(large))
        } else {
            let small = histogram(bins, target, right_rows, &candidates);
            let large = subtract(&hist, &small);
            (Some(large), Some(small))
        }
    } else {
        (None, None)
    };
    let left = build(
        bins,
        target,
        left_rows,
        left_hist,
        depth + 1,
        params,
        rng,
        nodes,
    );
    let right = build(
        bins,
        target,
        right_rows,
        right_hist,
        depth + 1,
        params,
        rng,
        nodes,
    );
    nodes[at] = TreeNode::Split {
        feature: c,
        threshold: bins.cuts[c][b],
        left,
        right,
    };
    at
}

/// Gradient boosting settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoostParams {
    /// Trees.
    pub trees: usize,
    /// Shrinkage.
    pub learning_rate: f64,
    /// Tree shape.
    pub tree: TreeParams,
    /// Fit a ridge line first and boost its residuals (extrapolates beyond the training range).
    pub linear_base: bool,
    /// Share of rows each tree sees (stochastic boosting), 1 = all.
    pub subsample: f64,
    /// Exact-split trees (`exact.rs`) instead of 64-bin histograms.
    pub exact: bool,
}

/// Least-squares gradient boosting on standardised inputs.
pub fn boost(
    x: &Matrix,
    y: &[f64],
    p: BoostParams,
    seed: u64,
) -> Result<ModelKind, super::FitError> {
    let (intercept, base) = if p.linear_base {
        linear::ridge(x, y, 0.01)?
    } else {
        (y.iter().sum::<f64>() / y.len().max(1) as f64, Vec::new())
    };
    let mut pred: Vec<f64> = (0..x.rows)
        .map(|i| intercept + base.iter().zip(x.row(i)).map(|(w, v)| w * v).sum::<f64>())
        .collect();
    let bins = Bins::new(x);
    let mut rng = Rng::new(seed);
    let mut trees = Vec::with_capacity(p.trees);
    let mut residual = vec![0.0; x.rows];
    let take = ((x.rows as f64 * p.subsample).round() as usize).clamp(1, x.rows.max(1));
    let mut all: Vec<u32> = (0..x.rows as u32).collect();
    for _ in 0..p.trees {
        for i in 0..x.rows {
            residual[i] = y[i] - pred[i];
        }
        if take < x.rows {
            for i in 0..take {
                let j = i + rng.below(x.rows - i);
                all.swap(i, j);
            }
        }
        let tree = grow(&bins, &residual, &mut all[..take], p.tree, &mut rng);
        for (i, pr) in pred.iter_mut().enumerate() {
            *pr += p.learning_rate * tree.predict(x.row(i));
        }
        trees.push(tree);
    }
    Ok(ModelKind::GradientBoosting {
        intercept,
        linear: base,
        learning_rate: p.learning_rate,
        trees,
    })
}

/// Random forest settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForestParams {
    /// Trees.
    pub trees: usize,
    /// Tree shape (`features_per_split` decorrelates the trees).
    pub tree: TreeParams,
    /// Exact-split trees (`exact.rs`) instead of 64-bin histograms.
    pub exact: bool,
}

/// Random forest of bootstrap trees on standardised inputs.
pub fn forest(x: &Matrix, y: &[f64], p: ForestParams, seed: u64) -> ModelKind {
    let bins = Bins::new(x);
    let mut rng = Rng::new(seed);
    let trees = (0..p.trees.max(1))
        .map(|_| {
            let mut rows: Vec<u32> = (0..x.rows).map(|_| rng.below(x.rows) as u32).collect();
            grow(&bins, y, &mut rows, p.tree, &mut rng)
        })
        .collect();
    ModelKind::RandomForest { trees }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> (Matrix, Vec<f64>) {
        // y = 10 for x0 <= 0.5 and 30 above, x1 is noise-free but irrelevant.
        let mut data = Vec::new();
        let mut y = Vec::new();
        for i in 0..100 {
            let x0 = i as f64 / 100.0;
            data.extend([x0, (i % 7) as f64]);
            y.push(if x0 <= 0.5 { 10.0 } else { 30.0 });
        }
        (
            Matrix {
                rows: 100,
                cols: 2,
                data,
            },
            y,
        )
    }

    #[test]
    fn a_stump_finds_the_step() {
        let (x, y) = grid();
        let bins = Bins::new(&x);
        let mut rows: Vec<u32> = (0..100).collect();
        let params = TreeParams {
            max_depth: 1,
            min_leaf: 1,
            features_per_split: 0,
        };
        let tree = grow(&bins, &y, &mut rows, params, &mut Rng::new(1));
        match &tree.nodes[0] {
            TreeNode::Split {
                feature, threshold, ..
            } => {
                assert_eq!(*feature, 0);
                assert!(*threshold > 0.5 && *threshold < 0.51, "{threshold}");
            }
            leaf => panic!("no split: {leaf:?}"),
        }
        assert_eq!(tree.predict(&[0.2, 3.0]), 10.0);
        assert_eq!(tree.predict(&[0.9, 3.0]), 30.0);
    }

    #[test]
    fn boosting_and_forest_fit_a_step() {
        let (x, y) = grid();
        let tree = TreeParams {
            max_depth: 3,
            min_leaf: 2,
            features_per_split: 0,
        };
        let gb = boost(
            &x,
            &y,
            BoostParams {
                trees: 50,
                learning_rate: 0.3,
                tree,
                linear_base: false,
                subsample: 1.0,
                exact: false,
            },
            1,
        )
        .unwrap();
        let rf = forest(
            &x,
            &y,
            ForestParams {
                trees: 20,
                tree,
                exact: false,
            },
            1,
        );
        for m in [gb, rf] {
            let lo = m.predict_scaled(&[0.1, 1.0]).unwrap();
            let hi = m.predict_scaled(&[0.95, 1.0]).unwrap();
            assert!(
                (lo - 10.0).abs() < 0.5 && (hi - 30.0).abs() < 0.5,
                "{lo} {hi}"
            );
        }
    }

    #[test]
    fn bins_respect_the_split_rule() {
        let (x, _) = grid();
        let bins = Bins::new(&x);
        for c in 0..2 {
            for i in 0..100u32 {
                let code = bins.code(c, i);
                let v = x.row(i as usize)[c];
                if code < bins.cuts[c].len() {
                    assert!(v <= bins.cuts[c][code]);
                }
                if code > 0 {
                    assert!(v > bins.cuts[c][code - 1]);
                }
            }
        }
    }
}
