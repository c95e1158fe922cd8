//! The placement decision, as pure functions: (nodes with their zone and current label, taint
//! and last-change time; each zone's forecast at the horizon; the policy; now) → one
//! [`Change`] per node that must change. No I/O, no clock: the controller supplies both, and
//! tests drive every rule (hysteresis, dwell, ties, missing forecasts, overrides) directly.
//!
//! Rules, in order:
//! 1. Inside an override window every GreenPipe label and taint is removed (force off).
//! 2. A node without a zone, or whose zone has no forecast, loses label and taint at once:
//!    a NoExecute taint evicts pods, so it must never stand on data we no longer have.
//! 3. Otherwise the zone's class is computed (relative rank or absolute thresholds) with
//!    hysteresis in favour of the node's current class, and applied unless the current class was
//!    set less than `min_dwell` ago. Red nodes are tainted when `taint_red` is on.

use std::collections::BTreeMap;

/// Label (and taint) key.
pub const KEY: &str = "greenpipe.io/carbon-intensity";
/// Annotation holding the unix time the label last changed (the dwell clock).
pub const SINCE_ANNOTATION: &str = "greenpipe.io/carbon-intensity-since";
/// Annotation holding the forecast value the decision was based on (for humans).
pub const FORECAST_ANNOTATION: &str = "greenpipe.io/carbon-intensity-forecast";
/// The taint effect on red nodes.
pub const TAINT_EFFECT: &str = "NoExecute";

/// Carbon class of a zone, the label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Lowest intensity.
    Green,
    /// In between.
    Yellow,
    /// Highest intensity.
    Red,
}

impl Class {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Green => "green",
            Class::Yellow => "yellow",
            Class::Red => "red",
        }
    }

    /// Parses a label value; anything else is treated as "no label of ours".
    pub fn parse(s: &str) -> Option<Class> {
        match s {
            "green" => Some(Class::Green),
            "yellow" => Some(Class::Yellow),
            "red" => Some(Class::Red),
            _ => None,
        }
    }
}

/// How zones are classed.
#[derive(Debug, Clone, PartialEq)]
pub enum Ranking {
    /// Lowest forecast green, highest red, the rest yellow. With one zone, or all zones equal
    /// within the hysteresis band, every zone is green: there is nothing cleaner to move to.
    Relative,
    /// Green below `green_max`, red above `red_min`, yellow between (gCO2/kWh).
    Absolute {
        /// Upper bound of green.
        green_max: f64,
        /// Lower bound of red.
        red_min: f64,
    },
}

/// A `[start, end)` window (unix seconds) during which the controller is forced off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Start, inclusive.
    pub start: i64,
    /// End, exclusive.
    pub end: i64,
}

/// The decision policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Relative or absolute classes.
    pub ranking: Ranking,
    /// gCO2/kWh a zone must move past a boundary before it leaves its current class.
    pub hysteresis: f64,
    /// Seconds a label must stand before it may change again (not applied to removals).
    pub min_dwell: i64,
    /// Taint red nodes NoExecute.
    pub taint_red: bool,
    /// Windows during which everything is removed.
    pub overrides: Vec<Window>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            ranking: Ranking::Relative,
            hysteresis: 10.0,
            min_dwell: 3600,
            taint_red: true,
            overrides: Vec::new(),
        }
    }
}

/// What the planner knows about a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeState {
    /// Node name.
    pub name: String,
    /// Grid zone, if the node maps to one.
    pub zone: Option<String>,
    /// Our label's current value (`None` if absent or not one of ours).
    pub class: Option<Class>,
    /// Whether our taint is present.
    pub tainted: bool,
    /// When our label last changed (from the annotation).
    pub since: Option<i64>,
}

/// Desired state of one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Label value, or `None` to remove the label.
    pub class: Option<Class>,
    /// Whether our taint should be present.
    pub tainted: bool,
}

/// A planned change, with why.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Node name.
    pub node: String,
    /// Current label.
    pub from: Option<Class>,
    /// What the node should become.
    pub to: Target,
    /// Whether the taint changes.
    pub taint_changes: bool,
    /// Forecast the decision used, if any.
    pub forecast: Option<f64>,
    /// Human-readable reason.
    pub reason: String,
}

/// A change the dwell time held back (reported in dry runs and logs).
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// Node name.
    pub node: String,
    /// Class it would get.
    pub wanted: Class,
    /// When it may change.
    pub until: i64,
}

/// The plan: changes to apply and changes held back by dwell.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Per-node changes, sorted by node name.
    pub changes: Vec<Change>,
    /// Held back by dwell.
    pub held: Vec<Held>,
    /// Zone classes decided this round (zone → class), for logs and metrics.
    pub zones: BTreeMap<String, Class>,
}

/// Classes a zone with forecast `v`, given the other zones' range and its current class.
pub fn classify(v: f64, min: f64, max: f64, current: Option<Class>, policy: &Policy) -> Class {
    let hyst = policy.hysteresis.max(0.0);
    // A node already in a class keeps it while within `hyst` of its boundary.
    let green_slack = if current == Some(Class::Green) {
        hyst
    } else {
        0.0
    };
    let red_slack = if current == Some(Class::Red) {
        hyst
    } else {
        0.0
    };
    match policy.ranking {
        Ranking::Relative => {
            if max - min <= hyst || v <= min + green_slack {
                Class::Green
            } else if v >= max - red_slack {
                Class::Red
            } else {
                Class::Yellow
            }
        }
        Ranking::Absolute { green_max, red_min } => {
            if v <= green_max + green_slack {
                Class::Green
            } else if v >= red_min - red_slack {
                Class::Red
            } else {
                Class::Yellow
            }
        }
    }
}

/// Plans the changes. `forecasts` maps zone → forecast at the horizon (`None` = no forecast).
pub fn plan(
    nodes: &[NodeState],
    forecasts: &BTreeMap<String, Option<f64>>,
    policy: &Policy,
    now: i64,
) -> Plan {
    let mut out = Plan::default();
    let forced_off = policy
        .overrides
        .iter()
        .any(|w| w.start <= now && now < w.end);
    let known: Vec<f64> = forecasts
        .values()
        .filter_map(|v| *v)
        .filter(|v| v.is_finite())
        .collect();
    let min = known.iter().copied().fold(f64::INFINITY, f64::min);
    let max = known.iter().copied().fold(f64::NEG_INFINITY, f64::max);

    let mut nodes: Vec<&NodeState> = nodes.iter().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    for node in nodes {
        let forecast = node
            .zone
            .as_ref()
            .and_then(|z| forecasts.get(z).copied().flatten())
            .filter(|v| v.is_finite());
        let off = Target {
            class: None,
            tainted: false,
        };
        let (target, reason) = if forced_off {
            (off, "override window: forced off".to_string())
        } else if node.zone.is_none() {
            (off, "node has no zone".to_string())
        } else if let (Some(v), Some(zone)) = (forecast, &node.zone) {
            let class = classify(v, min, max, node.class, policy);
            out.zones.insert(zone.clone(), class);
            if node.class.is_some_and(|c| c != class) {
                if let Some(since) = node.since {
                    if now - since < policy.min_dwell {
                        out.held.push(Held {
                            node: node.name.clone(),
                            wanted: class,
                            until: since + policy.min_dwell,
                        });
                        // Dwell holds the label; the taint still follows the held label.
                        let target = Target {
                            class: node.class,
                            tainted: policy.taint_red && node.class == Some(Class::Red),
                        };
                        if target.tainted != node.tainted {
                            out.changes.push(Change {
                                node: node.name.clone(),
                                from: node.class,
                                taint_changes: true,
                                to: target,
                                forecast,
                                reason: "taint brought in line with the held label".into(),
                            });
                        }
                        continue;
                    }
                }
            }
            let reason = format!("zone {zone} forecast {v:.1} g/kWh (range {min:.1}..{max:.1})");
            (
                Target {
                    class: Some(class),
                    tainted: policy.taint_red && class == Class::Red,
                },
                reason,
            )
        } else {
            (
                off,
                format!(
                    "no forecast for zone {}",
                    node.zone.as_deref().unwrap_or("?")
                ),
            )
        };
        if target.class != node.class || target.tainted != node.tainted {
            out.changes.push(Change {
                node: node.name.clone(),
                from: node.class,
                taint_changes: target.tainted != node.tainted,
                to: target,
                forecast,
                reason,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, zone: Option<&str>, class: Option<Class>, since: Option<i64>) -> NodeState {
        NodeState {
            name: name.into(),
            zone: zone.map(Into::into),
            class,
            tainted: class == Some(Class::Red),
            since,
        }
    }

    fn fc(pairs: &[(&str, Option<f64>)]) -> BTreeMap<String, Option<f64>> {
        pairs.iter().map(|(z, v)| (z.to_string(), *v)).collect()
    }

    fn target_of(plan: &Plan, node: &str) -> Option<Target> {
        plan.changes
            .iter()
            .find(|c| c.node == node)
            .map(|c| c.to.clone())
    }

    const NOW: i64 = 1_700_000_000;

    #[test]
    fn lowest_green_highest_red_others_yellow_and_red_is_tainted() {
        let nodes = [
            node("a", Some("A"), None, None),
            node("b", Some("B"), None, None),
            node("c", Some("C"), None, None),
        ];
        let p = plan(
            &nodes,
            &fc(&[("A", Some(100.0)), ("B", Some(200.0)), ("C", Some(300.0))]),
            &Policy::default(),
            NOW,
        );
        assert_eq!(
            target_of(&p, "a"),
            Some(Target {
                class: Some(Class::Green),
                tainted: false
            })
        );
        assert_eq!(
            target_of(&p, "b"),
            Some(Target {
                class: Some(Class::Yellow),
                tainted: false
            })
        );
        assert_eq!(
            target_of(&p, "c"),
            Some(Target {
                class: Some(Class::Red),
                tainted: true
            })
        );
        assert!(
            p.changes
                .iter()
                .find(|c| c.node == "c")
                .unwrap()
                .taint_changes
        );
        // Applying the plan and planning again changes nothing.
        let applied: Vec<NodeState> = nodes
            .iter()
            .map(|n| {
                let t = target_of(&p, &n.name).unwrap();
                NodeState {
                    class: t.class,
                    tainted: t.tainted,
                    since: Some(NOW),
                    ..n.clone()
                }
            })
            .collect();
        let again = plan(
            &applied,
            &fc(&[("A", Some(100.0)), ("B", Some(200.0)), ("C", Some(300.0))]),
            &Policy::default(),
            NOW + 60,
        );
        assert!(again.changes.is_empty(), "{again:?}");
    }

    #[test]
    fn ties_share_the_class_and_all_equal_is_all_green() {
        let nodes = [
            node("a", Some("A"), None, None),
            node("b", Some("B"), None, None),
            node("c", Some("C"), None, None),
        ];
        let p = plan(
            &nodes,
            &fc(&[("A", Some(100.0)), ("B", Some(100.0)), ("C", Some(300.0))]),
            &Policy::default(),
            NOW,
        );
        assert_eq!(target_of(&p, "a").unwrap().class, Some(Class::Green));
        assert_eq!(target_of(&p, "b").unwrap().class, Some(Class::Green));
        assert_eq!(target_of(&p, "c").unwrap().class, Some(Class::Red));
        let p = plan(
            &nodes,
            &fc(&[("A", Some(250.0)), ("B", Some(250.0)), ("C", Some(250.0))]),
            &Policy::default(),
            NOW,
        );
        assert!(p
            .changes
            .iter()
            .all(|c| c.to.class == Some(Class::Green) && !c.to.tainted));
        // Two nodes of the same zone always get the same class.
        let nodes = [
            node("a1", Some("A"), None, None),
            node("a2", Some("A"), None, None),
            node("b", Some("B"), None, None),
        ];
        let p = plan(
            &nodes,
            &fc(&[("A", Some(300.0)), ("B", Some(100.0))]),
            &Policy::default(),
            NOW,
        );
        assert_eq!(target_of(&p, "a1"), target_of(&p, "a2"));
        assert_eq!(target_of(&p, "a1").unwrap().class, Some(Class::Red));
    }

    #[test]
    fn hysteresis_keeps_a_class_near_its_boundary() {
        let policy = Policy {
            ranking: Ranking::Absolute {
                green_max: 200.0,
                red_min: 400.0,
            },
            hysteresis: 20.0,
            min_dwell: 0,
            ..Policy::default()
        };
        let f = |v| fc(&[("A", Some(v))]);
        // Green node at 215: still green (within 20 of 200). New node at 215: yellow.
        let p = plan(
            &[node("g", Some("A"), Some(Class::Green), Some(0))],
            &f(215.0),
            &policy,
            NOW,
        );
        assert!(p.changes.is_empty());
        let p = plan(&[node("n", Some("A"), None, None)], &f(215.0), &policy, NOW);
        assert_eq!(target_of(&p, "n").unwrap().class, Some(Class::Yellow));
        // Past the band it moves.
        let p = plan(
            &[node("g", Some("A"), Some(Class::Green), Some(0))],
            &f(221.0),
            &policy,
            NOW,
        );
        assert_eq!(target_of(&p, "g").unwrap().class, Some(Class::Yellow));
        // Red node at 385 stays red and tainted; yellow node at 385 stays yellow.
        let p = plan(
            &[node("r", Some("A"), Some(Class::Red), Some(0))],
            &f(385.0),
            &policy,
            NOW,
        );
        assert!(p.changes.is_empty());
        let p = plan(
            &[node("y", Some("A"), Some(Class::Yellow), Some(0))],
            &f(385.0),
            &policy,
            NOW,
        );
        assert!(p.changes.is_empty());
        // Relative: the red zone stays red while within the band of the maximum.
        let rel = Policy {
            min_dwell: 0,
            hysteresis: 15.0,
            ..Policy::default()
        };
        let zones = fc(&[("A", Some(100.0)), ("B", Some(290.0)), ("C", Some(300.0))]);
        let nodes = [
            node("b", Some("B"), Some(Class::Red), Some(0)),
            node("c", Some("C"), Some(Class::Red), Some(0)),
        ];
        assert!(plan(&nodes, &zones, &rel, NOW).changes.is_empty());
    }

    #[test]
    fn dwell_holds_a_recent_label_but_not_forever() {
        let policy = Policy {
            min_dwell: 1800,
            ..Policy::default()
        };
        let zones = fc(&[("A", Some(100.0)), ("B", Some(300.0))]);
        // `a` turned red 10 minutes ago; A is now the cleanest zone.
        let nodes = [
            node("a", Some("A"), Some(Class::Red), Some(NOW - 600)),
            node("b", Some("B"), None, None),
        ];
        let p = plan(&nodes, &zones, &policy, NOW);
        assert!(target_of(&p, "a").is_none(), "{p:?}");
        assert_eq!(
            p.held,
            vec![Held {
                node: "a".into(),
                wanted: Class::Green,
                until: NOW - 600 + 1800
            }]
        );
        assert_eq!(target_of(&p, "b").unwrap().class, Some(Class::Red));
        // After the dwell time it changes, and the taint goes with the label.
        let p = plan(&nodes, &zones, &policy, NOW + 1200);
        assert_eq!(
            target_of(&p, "a"),
            Some(Target {
                class: Some(Class::Green),
                tainted: false
            })
        );
        // A node with our label but no since annotation is not held.
        let p = plan(
            &[
                node("x", Some("A"), Some(Class::Red), None),
                node("b", Some("B"), None, None),
            ],
            &zones,
            &policy,
            NOW,
        );
        assert_eq!(target_of(&p, "x").unwrap().class, Some(Class::Green));
    }

    #[test]
    fn missing_forecast_or_zone_removes_label_and_taint_immediately() {
        let policy = Policy {
            min_dwell: 3600,
            ..Policy::default()
        };
        let nodes = [
            node("a", Some("A"), Some(Class::Red), Some(NOW - 10)),
            node("z", None, Some(Class::Green), Some(NOW - 10)),
            node("b", Some("B"), Some(Class::Green), Some(NOW - 10)),
            node("plain", None, None, None),
        ];
        let p = plan(
            &nodes,
            &fc(&[("A", None), ("B", Some(100.0))]),
            &policy,
            NOW,
        );
        assert_eq!(
            target_of(&p, "a"),
            Some(Target {
                class: None,
                tainted: false
            })
        );
        assert!(p
            .changes
            .iter()
            .find(|c| c.node == "a")
            .unwrap()
            .reason
            .contains("no forecast"));
        assert_eq!(
            target_of(&p, "z"),
            Some(Target {
                class: None,
                tainted: false
            })
        );
        // B is the only zone with a forecast: green, unchanged. Unlabelled zoneless node: untouched.
        assert!(target_of(&p, "b").is_none());
        assert!(target_of(&p, "plain").is_none());
        // NaN is no forecast either.
        let p = plan(&nodes[..1], &fc(&[("A", Some(f64::NAN))]), &policy, NOW);
        assert_eq!(
            target_of(&p, "a"),
            Some(Target {
                class: None,
                tainted: false
            })
        );
    }

    #[test]
    fn override_window_forces_everything_off_then_resumes() {
        let policy = Policy {
            overrides: vec![Window {
                start: NOW,
                end: NOW + 3600,
            }],
            min_dwell: 7200,
            ..Policy::default()
        };
        let zones = fc(&[("A", Some(100.0)), ("B", Some(300.0))]);
        let nodes = [
            node("a", Some("A"), Some(Class::Green), Some(NOW - 5)),
            node("b", Some("B"), Some(Class::Red), Some(NOW - 5)),
        ];
        let p = plan(&nodes, &zones, &policy, NOW + 10);
        assert_eq!(p.changes.len(), 2);
        assert!(p.changes.iter().all(|c| c.to
            == Target {
                class: None,
                tainted: false
            }
            && c.reason.contains("override")));
        let cleared: Vec<NodeState> = nodes
            .iter()
            .map(|n| NodeState {
                class: None,
                tainted: false,
                since: Some(NOW + 10),
                ..n.clone()
            })
            .collect();
        // At the window's end (exclusive) labelling resumes; dwell does not block first labels.
        let p = plan(&cleared, &zones, &policy, NOW + 3600);
        assert_eq!(target_of(&p, "a").unwrap().class, Some(Class::Green));
        assert_eq!(
            target_of(&p, "b"),
            Some(Target {
                class: Some(Class::Red),
                tainted: true
            })
        );
    }

    #[test]
    fn taint_can_be_disabled_and_a_stray_taint_is_removed() {
        let policy = Policy {
            taint_red: false,
            ..Policy::default()
        };
        let zones = fc(&[("A", Some(100.0)), ("B", Some(300.0))]);
        let nodes = [
            node("b", Some("B"), Some(Class::Red), Some(0)),
            node("a", Some("A"), None, None),
        ];
        let p = plan(&nodes, &zones, &policy, NOW);
        assert_eq!(
            target_of(&p, "b"),
            Some(Target {
                class: Some(Class::Red),
                tainted: false
            })
        );
    }
}
