//! Where a restarted estimator resumes: the newest progress marker of its shard, and the energy
//! counters as they were written at that tick.

use greenpipe_common::names::{estimate, label};
use tracing::warn;

use super::{align_down, now_ms, Pipeline, ReadError, ReadFailure};
use crate::energy::Ledger;
use crate::promql::decode_matrix;

/// A progress marker value that cannot be a tick time (see [`resume_tick`]).
#[derive(Debug, thiserror::Error)]
#[error("progress marker value {value} is not a tick time of the last {window_ms} ms")]
pub struct MarkerError {
    /// The marker's value (Unix seconds).
    pub value: f64,
    /// The window looked at.
    pub window_ms: i64,
}

impl Pipeline {
    /// Finds the last tick this shard wrote and restores the energy counters as they were
    /// written at that tick.
    pub(super) async fn resume(&mut self) -> Result<Option<i64>, ReadError> {
        let Some(last) = self.resume_point().await? else {
            return Ok(None);
        };
        let window_s = self.config.backfill_max_age.as_secs().max(1);
        let at = |metric: &str| format!("last_over_time({metric}[{window_s}s])");
        let (node_query, container_query, gpu_query) = (
            at(estimate::NODE_ENERGY_JOULES_TOTAL),
            at(estimate::CONTAINER_ENERGY_JOULES_TOTAL),
            at(estimate::NODE_GPU_ENERGY_JOULES_TOTAL),
        );
        let (node, container, gpu) = tokio::try_join!(
            self.progress.query(&node_query, last),
            self.progress.query(&container_query, last),
            self.progress.query(&gpu_query, last),
        )
        .map_err(|e| ReadError {
            query: "energy_resume".to_string(),
            cause: e.into(),
        })?;
        let node = self.account("energy_resume", Ok(node))?;
        let container = self.account("energy_resume", Ok(container))?;
        let gpu = self.account("energy_resume", Ok(gpu))?;
        let mut energy = Ledger::new(self.config.backfill_max_age.as_millis() as i64);
        energy.restore(
            &self.outcome("energy_resume", decode_matrix(&node))?,
            &self.outcome("energy_resume", decode_matrix(&container))?,
            last,
            self.config.shard,
        );
        energy.restore_gpu(
            &self.outcome("energy_resume", decode_matrix(&gpu))?,
            last,
            self.config.shard,
        );
        self.energy = energy;
        Ok(Some(last))
    }

    /// The last tick this shard wrote, from its marker series within the backfill horizon.
    async fn resume_point(&self) -> Result<Option<i64>, ReadError> {
        let window_s = self.config.backfill_max_age.as_secs().max(1);
        let query = format!(
            "max(max_over_time({}{{{}=\"{}\"}}[{window_s}s]))",
            estimate::TICK_TIMESTAMP_SECONDS,
            label::SHARD,
            self.config.shard
        );
        // An instant query: VictoriaMetrics answers a one-point range query at "now" with nothing.
        let body = self.account("progress", self.progress.query(&query, now_ms()).await)?;
        // A marker value that cannot be a tick makes the answer an error, like one that does not
        // decode: both mean the progress API cannot be trusted right now.
        let resume =
            decode_matrix(&body)
                .map_err(ReadFailure::from)
                .and_then(
                    |matrix| match matrix.first().and_then(|s| s.points.last()) {
                        None => Ok(None),
                        Some(&(_, value)) => resume_tick(
                            value,
                            self.step_ms(),
                            now_ms(),
                            self.config.backfill_max_age.as_millis() as i64,
                        )
                        .map_err(ReadFailure::from),
                    },
                );
        self.outcome("progress", resume)
    }
}

/// The tick to resume after, from the newest marker value (the tick's Unix time in seconds) found
/// in the last `window_ms`. A value that cannot be such a tick (NaN, infinite, older than the
/// window the query looked at) is an error, so the resume is retried rather than trusted and the
/// abandoned-tick count stays bounded; a marker in the future (another writer, or this machine's
/// clock went back) is ignored with a warning and the estimator starts live. Markers written with
/// another `--interval` are rounded down to this one's ticks.
pub fn resume_tick(
    value: f64,
    step_ms: i64,
    now_ms: i64,
    window_ms: i64,
) -> Result<Option<i64>, MarkerError> {
    let oldest = now_ms - window_ms - step_ms;
    if !(value.is_finite() && value * 1000.0 >= oldest as f64 && value < 1e13) {
        return Err(MarkerError { value, window_ms });
    }
    let tick = align_down((value * 1000.0).round() as i64, step_ms);
    if tick > now_ms + step_ms {
        warn!(
            marker_ms = tick,
            now_ms, "the newest progress marker is in the future; ignoring it and starting live"
        );
        return Ok(None);
    }
    Ok(Some(tick))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_500;
    const HOUR: i64 = 3_600_000;

    #[test]
    fn a_plausible_marker_is_the_resume_point() {
        let v = 1_699_999_990.0;
        assert_eq!(
            resume_tick(v, 1000, NOW, HOUR).unwrap(),
            Some(1_699_999_990_000)
        );
        // Written with --interval 1s, read with 15s: rounded down to a 15 s tick.
        assert_eq!(
            resume_tick(1_699_999_991.0, 15_000, NOW, HOUR).unwrap(),
            Some(1_699_999_980_000)
        );
    }

    #[test]
    fn a_bogus_marker_is_not_trusted() {
        // The 1.8e19 abandoned ticks came from markers like these.
        for v in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -1.0,
            1.0,
            1e300,
        ] {
            assert!(resume_tick(v, 1000, NOW, HOUR).is_err(), "{v}");
        }
        let stale = (NOW - 2 * HOUR) as f64 / 1000.0;
        assert!(resume_tick(stale, 1000, NOW, HOUR).is_err());
        let future = (NOW + HOUR) as f64 / 1000.0;
        assert_eq!(resume_tick(future, 1000, NOW, HOUR).unwrap(), None);
    }
}
