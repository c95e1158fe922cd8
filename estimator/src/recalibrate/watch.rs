//! When to refit: the live error of each model, read from Prometheus, through hysteresis.
//!
//! A model is refitted when its live MAPE has stayed above `--threshold` for `--for` (every check
//! in that time above it), and at most once per `--min-interval`. The clock that `--for` measures
//! only stops when the error falls below the lower `--clear-threshold`, so an error hovering
//! around the threshold neither triggers early nor resets. After an attempt, accepted or not,
//! the clock starts again from zero: one drift, one refit.

use std::collections::BTreeMap;

use greenpipe_common::names::{estimate, label};

use crate::promql::{decode_matrix, DecodeError};

/// The live error of one model on one metered node.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveError {
    /// Node name.
    pub node: String,
    /// The `model` label (versioned).
    pub model: String,
    /// Mean of `|prediction - meter| / meter` over the window.
    pub mape_ratio: f64,
    /// Ticks with a meter reading in the window.
    pub samples: f64,
}

/// The PromQL of the mean relative error per node and model over `window` (e.g. `10m`).
pub fn mape_query(window: &str) -> String {
    format!(
        "avg_over_time({}[{window}])",
        estimate::NODE_POWER_ABS_ERROR_RATIO
    )
}

/// The PromQL of the ticks with a meter reading per node and model over `window`.
pub fn samples_query(window: &str) -> String {
    format!(
        "count_over_time({}[{window}])",
        estimate::NODE_POWER_ABS_ERROR_RATIO
    )
}

/// `(node, model) -> value` of an instant-vector answer; NaN and infinite values left out.
pub fn parse_vector(body: &[u8]) -> Result<BTreeMap<(String, String), f64>, DecodeError> {
    let mut out = BTreeMap::new();
    for s in decode_matrix(body)? {
        if let Some(&(_, value)) = s.points.last().filter(|(_, v)| v.is_finite()) {
            out.insert(
                (
                    s.label(label::NODE).to_string(),
                    s.label(label::MODEL).to_string(),
                ),
                value,
            );
        }
    }
    Ok(out)
}

/// Settings of the trigger.
#[derive(Debug, Clone, Copy)]
pub struct Trigger {
    /// Refit above this live MAPE (ratio).
    pub threshold: f64,
    /// The time above the threshold is forgotten only below this.
    pub clear_threshold: f64,
    /// How long the error must stay above the threshold, seconds.
    pub hold_s: f64,
    /// Least time between two refits of one model, seconds.
    pub min_interval_s: f64,
}

/// The trigger state of one model (by name: it survives the model's new versions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// Unix seconds of the first check of the current excursion above the threshold.
    pub above_since: Option<f64>,
    /// Unix seconds of the last refit attempt.
    pub last_attempt: Option<f64>,
}

/// What a check concluded for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Below the threshold (or cleared).
    Fine,
    /// Above, not yet for long enough, or too soon after the last refit.
    Waiting,
    /// Refit now.
    Refit,
}

impl State {
    /// Feeds one check's error (`None`: not enough metered ticks) at `now` (unix seconds).
    pub fn check(&mut self, t: &Trigger, error: Option<f64>, now: f64) -> Verdict {
        let Some(e) = error else {
            return Verdict::Fine;
        };
        if e < t.clear_threshold {
            self.above_since = None;
            return Verdict::Fine;
        }
        if e <= t.threshold {
            return if self.above_since.is_some() {
                Verdict::Waiting
            } else {
                Verdict::Fine
            };
        }
        let since = *self.above_since.get_or_insert(now);
        let held = now - since >= t.hold_s;
        let rested = self
            .last_attempt
            .is_none_or(|last| now - last >= t.min_interval_s);
        if held && rested {
            self.above_since = None;
            self.last_attempt = Some(now);
            Verdict::Refit
        } else {
            Verdict::Waiting
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Trigger = Trigger {
        threshold: 0.10,
        clear_threshold: 0.08,
        hold_s: 30.0,
        min_interval_s: 300.0,
    };

    #[test]
    fn one_refit_per_excursion_after_the_hold_time() {
        let mut s = State::default();
        let mut refits = 0;
        // 0.2 for 10 minutes, checked every 5 s: one refit at 30 s, the next one only after the
        // minimum interval.
        for i in 0..120 {
            if s.check(&T, Some(0.2), i as f64 * 5.0) == Verdict::Refit {
                refits += 1;
            }
        }
        assert_eq!(refits, 2);
    }

    #[test]
    fn hovering_around_the_threshold_neither_triggers_nor_resets() {
        let mut s = State::default();
        // Above for 20 s, then between the thresholds: the clock keeps running...
        for i in 0..=4 {
            assert_ne!(s.check(&T, Some(0.12), i as f64 * 5.0), Verdict::Refit);
        }
        assert_eq!(s.check(&T, Some(0.09), 25.0), Verdict::Waiting);
        assert_eq!(s.check(&T, Some(0.11), 30.0), Verdict::Refit);
        // ...and only a drop below the clear threshold stops it.
        let mut s = State::default();
        s.check(&T, Some(0.12), 0.0);
        assert_eq!(s.check(&T, Some(0.05), 10.0), Verdict::Fine);
        assert_eq!(s.check(&T, Some(0.12), 31.0), Verdict::Waiting);
        assert_eq!(s.check(&T, None, 40.0), Verdict::Fine);
    }

    #[test]
    fn vector_answers_are_keyed_by_node_and_model() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"node":"a","model":"m@v2"},"value":[1,"0.25"]},
            {"metric":{"node":"b","model":"m"},"value":[1,"NaN"]}]}}"#;
        let v = parse_vector(body).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[&("a".to_string(), "m@v2".to_string())], 0.25);
        assert!(parse_vector(br#"{"status":"error"}"#).is_err());
    }
}
