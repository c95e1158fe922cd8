//! Exact-split regression trees, grown as scikit-learn's `DecisionTreeRegressor` grows them:
//! every midpoint between two neighbouring distinct values of an input is a candidate threshold,
//! and bootstrap draws are row weights (a row drawn three times weighs 3), with `min_leaf`
//! counting distinct rows.
//!
//! Why a second tree builder beside the histogram one (`trees.rs`): a fully grown tree has about
//! as many nodes as rows, and a histogram costs its number of bins at every node, so deep trees on
//! fine bins spend their time scanning empty bins. Here every input's rows are sorted once per
//! fit; a tree keeps, per input, its rows in value order and splits each node's run of rows
//! stably into left and right, so a node costs its own rows per input and nothing else. The
//! 64-bin histogram trees stay for the shallow models, where coarse bins regularise (255 bins were
//! measured worse for those, docs/training.md).

use greenpipe_common::model::{ModelKind, RegressionTree, TreeNode};

use crate::models::trees::{Rng, TreeParams};
use crate::samples::Matrix;

/// Every input's values (column-major) and its rows in ascending value order.
#[derive(Debug)]
pub struct Presorted {
    rows: usize,
    values: Vec<f64>,
    order: Vec<Vec<u32>>,
}

impl Presorted {
    /// Sorts every column once (stable: equal values keep row order, so fits are deterministic).
    pub fn new(x: &Matrix) -> Presorted {
        let mut values = Vec::with_capacity(x.rows * x.cols);
        for c in 0..x.cols {
            values.extend((0..x.rows).map(|i| x.row(i)[c]));
        }
        let order = (0..x.cols)
            .map(|c| {
                let col = &values[c * x.rows..(c + 1) * x.rows];
                let mut o: Vec<u32> = (0..x.rows as u32).collect();
                o.sort_by(|&a, &b| col[a as usize].total_cmp(&col[b as usize]));
                o
            })
            .collect();
        Presorted {
            rows: x.rows,
            values,
            order,
        }
    }

    fn value(&self, c: usize, r: u32) -> f64 {
        self.values[c * self.rows + r as usize]
    }
}

/// The state of one tree being grown.
struct Grower<'a> {
    data: &'a Presorted,
    target: &'a [f64],
    weight: &'a [u32],
    params: TreeParams,
    /// Per input: the tree's rows, each node's rows a contiguous run in value order.
    orders: Vec<Vec<u32>>,
    goes_left: Vec<bool>,
    buffer: Vec<u32>,
    nodes: Vec<TreeNode>,
}

/// Grows one least-squares tree on `target`, row `r` weighing `weight[r]` (0: not drawn).
pub fn grow(
    data: &Presorted,
    target: &[f64],
    weight: &[u32],
    params: TreeParams,
    rng: &mut Rng,
) -> RegressionTree {
    let orders: Vec<Vec<u32>> = data
        .order
        .iter()
        .map(|o| {
            o.iter()
                .copied()
                .filter(|&r| weight[r as usize] > 0)
                .collect()
        })
        .collect();
    let n = orders.first().map_or(0, Vec::len);
    let mut g = Grower {
        data,
        target,
        weight,
        params,
        orders,
        goes_left: vec![false; data.rows],
        buffer: vec![0; n],
        nodes: Vec::new(),
    };
    if n == 0 {
        return RegressionTree {
            nodes: vec![TreeNode::Leaf { value: 0.0 }],
        };
    }
    g.build(0, n, 0, rng);
    RegressionTree { nodes: g.nodes }
}

impl Grower<'_> {
    fn build(&mut self, start: usize, end: usize, depth: usize, rng: &mut Rng) -> usize {
        let at = self.nodes.len();
        let (mut sum, mut wsum) = (0.0, 0.0);
        for &r in &self.orders[0][start..end] {
            let w = self.weight[r as usize] as f64;
            sum += w * self.target[r as usize];
            wsum += w;
        }
        self.nodes.push(TreeNode::Leaf {
            value: sum / wsum.max(1e-300),
        });
        let count = end - start;
        let min_leaf = self.params.min_leaf.max(1);
        if depth >= self.params.max_depth || count < 2 * min_leaf {
            return at;
        }
        let cols = self.orders.len();
        // The inputs are tried in a fresh random order at every node, all of them unless
        // `features_per_split` says fewer, and a later input must do strictly better to win:
        // scikit-learn's tie rule. Correlated inputs (CPU time, cycles, instructions) often split
        // a small node into the same two sets with the same gain; trying them in a fixed order
        // would hand every such tie to the first column, so every tree would send a row outside
        // the training range the same way, and the forest would lose the diversity that makes
        // its extrapolation scikit-learn's (the last kepler block scored 24.8 % against
        // scikit-learn's 21.3 % before, docs/training.md).
        let per_split = match self.params.features_per_split {
            0 => cols,
            n => n.min(cols),
        };
        let mut candidates: Vec<usize> = (0..cols).collect();
        for i in 0..per_split.min(cols - 1) {
            let j = i + rng.below(cols - i);
            candidates.swap(i, j);
        }
        candidates.truncate(per_split);
        let parent = sum * sum / wsum;
        // (gain, input, rows on the left, threshold)
        let mut best: Option<(f64, usize, usize, f64)> = None;
        for &c in &candidates {
            let run = &self.orders[c][start..end];
            let (mut sl, mut wl) = (0.0, 0.0);
            for i in 0..count - 1 {
                let r = run[i];
                let w = self.weight[r as usize] as f64;
                sl += w * self.target[r as usize];
                wl += w;
                let left = i + 1;
                if left < min_leaf {
                    continue;
                }
                if count - left < min_leaf {
                    break;
                }
                let (v, next) = (self.data.value(c, r), self.data.value(c, run[i + 1]));
                if next <= v {
                    continue;
                }
                let (sr, wr) = (sum - sl, wsum - wl);
                let gain = sl * sl / wl + sr * sr / wr - parent;
                if best.is_none_or(|b| gain > b.0) {
                    let mut threshold = v / 2.0 + next / 2.0;
                    if threshold >= next || !threshold.is_finite() {
                        threshold = v;
                    }
                    best = Some((gain, c, left, threshold));
                }
            }
        }
        let Some((gain, c, left, threshold)) = best else {
            return at;
        };
        if gain <= 1e-12 * parent.abs().max(1e-12) {
            return at;
        }
        for (i, &r) in self.orders[c][start..end].iter().enumerate() {
            self.goes_left[r as usize] = i < left;
        }
        // Stable partition of every input's run: the children's runs stay in value order.
        for o in &mut self.orders {
            let run = &mut o[start..end];
            let (mut l, mut rgt) = (0, left);
            for &r in run.iter() {
                if self.goes_left[r as usize] {
                    self.buffer[l] = r;
                    l += 1;
                } else {
                    self.buffer[rgt] = r;
                    rgt += 1;
                }
            }
            run.copy_from_slice(&self.buffer[..count]);
        }
        let l = self.build(start, start + left, depth + 1, rng);
        let r = self.build(start + left, end, depth + 1, rng);
        self.nodes[at] = TreeNode::Split {
            feature: c,
            threshold,
            left: l,
            right: r,
        };
        at
    }
}

/// A forest of exact-split trees on bootstrap draws (scikit-learn's `RandomForestRegressor`).
pub fn forest(x: &Matrix, y: &[f64], trees: usize, tree: TreeParams, seed: u64) -> ModelKind {
    let data = Presorted::new(x);
    let mut rng = Rng::new(seed);
    let mut weight = vec![0u32; x.rows];
    let trees = (0..trees.max(1))
        .map(|_| {
            draw_bootstrap(&mut weight, &mut rng);
            grow(&data, y, &weight, tree, &mut rng)
        })
        .collect();
    ModelKind::RandomForest { trees }
}

/// One bootstrap draw as row weights: as many draws with replacement as there are rows, row `r`
/// weighing the times it was drawn (what scikit-learn's forest passes its trees as
/// `sample_weight`).
fn draw_bootstrap(weight: &mut [u32], rng: &mut Rng) {
    let n = weight.len();
    weight.fill(0);
    for _ in 0..n {
        weight[rng.below(n)] += 1;
    }
}

/// The bootstrap weights [`forest`] draws for its trees with `seed` (one vector per tree).
pub fn bootstrap_weights(rows: usize, trees: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = Rng::new(seed);
    (0..trees.max(1))
        .map(|_| {
            let mut w = vec![0u32; rows];
            draw_bootstrap(&mut w, &mut rng);
            w
        })
        .collect()
}

/// A forest whose trees are grown on the given row weights, one vector per tree, instead of its
/// own draws: the forest-parity check gives scikit-learn and this forest the same bootstrap
/// samples, so that their predictions can be compared one by one.
pub fn forest_on_weights(
    x: &Matrix,
    y: &[f64],
    weights: &[Vec<u32>],
    tree: TreeParams,
    seed: u64,
) -> ModelKind {
    let data = Presorted::new(x);
    let mut rng = Rng::new(seed);
    let trees = weights
        .iter()
        .map(|w| grow(&data, y, w, tree, &mut rng))
        .collect();
    ModelKind::RandomForest { trees }
}

/// Least-squares gradient boosting with exact-split trees, each on a `subsample` share of the
/// rows drawn without replacement (scikit-learn's `GradientBoostingRegressor`).
pub fn boost(
    x: &Matrix,
    y: &[f64],
    trees: usize,
    learning_rate: f64,
    tree: TreeParams,
    subsample: f64,
    seed: u64,
) -> ModelKind {
    let intercept = y.iter().sum::<f64>() / y.len().max(1) as f64;
    let data = Presorted::new(x);
    let mut rng = Rng::new(seed);
    let mut pred = vec![intercept; x.rows];
    let mut residual = vec![0.0; x.rows];
    let take = ((x.rows as f64 * subsample).round() as usize).clamp(1, x.rows.max(1));
    let mut all: Vec<usize> = (0..x.rows).collect();
    let mut weight = vec![1u32; x.rows];
    let mut out = Vec::with_capacity(trees);
    for _ in 0..trees {
        for i in 0..x.rows {
            residual[i] = y[i] - pred[i];
        }
        if take < x.rows {
            weight.fill(0);
            for i in 0..take {
                let j = i + rng.below(x.rows - i);
                all.swap(i, j);
                weight[all[i]] = 1;
            }
        }
        let t = grow(&data, &residual, &weight, tree, &mut rng);
        for (i, p) in pred.iter_mut().enumerate() {
            *p += learning_rate * t.predict(x.row(i));
        }
        out.push(t);
    }
    ModelKind::GradientBoosting {
        intercept,
        linear: Vec::new(),
        learning_rate,
        trees: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fully_grown_tree_reproduces_distinct_rows_and_splits_at_midpoints() {
        // y depends on x0 only through a step at 0.55; x1 is a distractor.
        let mut data = Vec::new();
        let mut y = Vec::new();
        for i in 0..40 {
            let x0 = i as f64 / 40.0;
            data.extend([x0, (i % 3) as f64]);
            y.push(if x0 < 0.55 { 1.0 } else { 5.0 } + x0);
        }
        let x = Matrix {
            rows: 40,
            cols: 2,
            data,
        };
        let data = Presorted::new(&x);
        let params = TreeParams {
            max_depth: usize::MAX,
            min_leaf: 1,
            features_per_split: 0,
        };
        let tree = grow(&data, &y, &[1; 40], params, &mut Rng::new(3));
        for (i, yi) in y.iter().enumerate() {
            assert!((tree.predict(x.row(i)) - yi).abs() < 1e-12, "row {i}");
        }
        match &tree.nodes[0] {
            TreeNode::Split {
                feature, threshold, ..
            } => {
                assert_eq!(*feature, 0);
                // The step lies between rows 21 (0.525) and 22 (0.55): the midpoint.
                assert!((threshold - 0.5375).abs() < 1e-12, "{threshold}");
            }
            leaf => panic!("no split: {leaf:?}"),
        }
        // Rows with weight 0 are not seen: a tree on the first half predicts only its values.
        let mut half = [0u32; 40];
        half[..20].fill(2);
        let t = grow(&data, &y, &half, params, &mut Rng::new(3));
        assert!((t.predict(&[0.99, 0.0]) - y[19]).abs() < 1e-12);
    }

    #[test]
    fn exact_forest_and_boosting_fit_a_step() {
        let mut data = Vec::new();
        let mut y = Vec::new();
        for i in 0..200 {
            let x0 = i as f64 / 200.0;
            data.extend([x0, (i % 7) as f64]);
            y.push(if x0 <= 0.5 { 10.0 } else { 30.0 });
        }
        let x = Matrix {
            rows: 200,
            cols: 2,
            data,
        };
        let tree = TreeParams {
            max_depth: usize::MAX,
            min_leaf: 1,
            features_per_split: 0,
        };
        let rf = forest(&x, &y, 30, tree, 1);
        let gb = boost(
            &x,
            &y,
            100,
            0.1,
            TreeParams {
                max_depth: 3,
                ..tree
            },
            1.0,
            1,
        );
        for m in [rf, gb] {
            let lo = m.predict_scaled(&[0.1, 1.0]).unwrap();
            let hi = m.predict_scaled(&[0.95, 1.0]).unwrap();
            assert!(
                (lo - 10.0).abs() < 0.1 && (hi - 30.0).abs() < 0.1,
                "{lo} {hi}"
            );
        }
    }
}
