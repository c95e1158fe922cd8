//! The write side of the tick loop: estimate a group of read ticks, advance the energy counters,
//! and send the group's series and then its markers.

use greenpipe_common::model::ModelFile;

use super::{now_ms, Pipeline};
use crate::estimate::estimate_tick;
use crate::readout::Tick;
use crate::series::{marker_series, ticks_series, write_ticks};

impl Pipeline {
    /// Estimates `group` with `models` and writes it: every series of every tick, then the
    /// group's markers, after every sample of the group, so a group cut short is redone whole on
    /// resume. Ticks before `ready` are counted as backfilled.
    pub(super) async fn write_group(&mut self, models: &ModelFile, group: &[Tick], ready: i64) {
        let step = self.step_ms();
        let mut estimates = Vec::with_capacity(group.len());
        let mut energy = Vec::with_capacity(group.len());
        for tick in group {
            let e = estimate_tick(models, tick, self.config.policy);
            energy.push(self.energy.record(&e, step));
            for (node, reason) in &e.skipped {
                tracing::debug!(node, reason = reason.as_str(), "node skipped");
                self.telemetry
                    .nodes_skipped
                    .with_label_values(&[reason.as_str()])
                    .inc();
            }
            estimates.push(e);
        }
        // Laid out straight into request bodies: building the series first cost more than the
        // rest of the tick at fleet scale.
        let mut writer = self.sender.writer();
        write_ticks(&estimates, &energy, &mut writer);
        let shard = self.config.shard.to_string();
        writer.push(&marker_series(&shard, group.iter().map(|t| t.timestamp_ms)));
        self.sender.send_encoded(writer.finish()).await;
        // After remote write: what OTLP receives was recorded where the estimator resumes.
        if let Some(otlp) = &self.otlp {
            otlp.export(&ticks_series(&estimates, &energy));
        }
        for e in &estimates {
            self.telemetry.ticks.inc();
            if e.timestamp_ms < ready {
                self.telemetry.ticks_backfilled.inc();
            }
            self.telemetry.nodes_estimated.set(e.nodes.len() as i64);
        }
        let t = group.last().map_or(0, |t| t.timestamp_ms) as f64 / 1000.0;
        self.telemetry.last_tick.set(t);
        self.telemetry.lag_seconds.set(now_ms() as f64 / 1000.0 - t);
    }
}
