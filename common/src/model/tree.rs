//! Regression trees, the building block of the forest and boosting families: stored flat, checked
//! on load so that prediction always terminates.

use serde::{Deserialize, Serialize};

/// A binary regression tree over the standardised inputs, stored flat; node 0 is the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegressionTree {
    /// The nodes; children always come after their parent.
    pub nodes: Vec<TreeNode>,
}

/// One node of a [`RegressionTree`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum TreeNode {
    /// Go `left` when `x[feature] <= threshold`, else `right` (indices into the node list).
    Split {
        /// Input index.
        feature: usize,
        /// Split point on the standardised input.
        threshold: f64,
        /// Node index for `x <= threshold`.
        left: usize,
        /// Node index for `x > threshold`.
        right: usize,
    },
    /// A prediction.
    Leaf {
        /// Value, watts.
        value: f64,
    },
}

impl RegressionTree {
    /// The leaf value `x` falls into.
    pub fn predict(&self, x: &[f64]) -> f64 {
        let mut i = 0;
        loop {
            match &self.nodes[i] {
                TreeNode::Leaf { value } => return *value,
                TreeNode::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    i = if x[*feature] <= *threshold {
                        *left
                    } else {
                        *right
                    }
                }
            }
        }
    }

    /// The same splits with every leaf `add + mul · leaf`.
    pub(super) fn affine(&self, add: f64, mul: f64) -> RegressionTree {
        RegressionTree {
            nodes: self
                .nodes
                .iter()
                .map(|n| match n {
                    TreeNode::Leaf { value } => TreeNode::Leaf {
                        value: add + mul * value,
                    },
                    split => split.clone(),
                })
                .collect(),
        }
    }

    /// Children after parents (so prediction terminates), indices and features in range.
    pub(super) fn check(&self, inputs: usize) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("a tree has no nodes".into());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            match n {
                TreeNode::Split {
                    feature,
                    threshold,
                    left,
                    right,
                } => {
                    let in_range = |c: &usize| *c > i && *c < self.nodes.len();
                    if *feature >= inputs || !threshold.is_finite() {
                        return Err(format!(
                            "tree node {i} splits on input {feature} of {inputs}"
                        ));
                    }
                    if !in_range(left) || !in_range(right) {
                        return Err(format!("tree node {i} has children {left}/{right}"));
                    }
                }
                TreeNode::Leaf { value } if !value.is_finite() => {
                    return Err(format!("tree leaf {i} is {value}"));
                }
                TreeNode::Leaf { .. } => {}
            }
        }
        Ok(())
    }
}
