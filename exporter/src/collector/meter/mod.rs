//! Power-meter readings: every configured meter channel, read on the sampler's tick.
//!
//! The collector asks all channel threads for a reading at once and waits for them until one
//! deadline (`--meter.timeout`), so power lines up with the resource metrics of the same tick and
//! a hanging device delays the tick by at most the timeout. A channel that fails is `up 0`, its
//! error counter grows by reason, and its power, voltage and current are withdrawn rather than
//! left at a stale value; its energy total stays (a counter never disappears or goes down).
//! `greenpipe_meter_energy_integrated` says, once a channel has read, whether that total follows
//! the device's own counter (0) or power integrated by the exporter (1, a device without one).

pub mod options;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use greenpipe_common::contract;
use greenpipe_common::names::label;
use tracing::{info, warn};

use super::{CollectError, Collector, Context, Failure, Report, Spec};
use crate::meter::energy::EnergyTotal;
use crate::meter::worker::{Backoff, Outcome, Worker};
use crate::meter::{self, ReadError, Reason};
use crate::metrics::MetricSet;

/// Registry entry.
pub const SPEC: Spec = Spec {
    name: "meter",
    default_enabled: true,
    help: "power-meter readings (--meter KIND:TARGET; `greenpipe-exporter meters` lists the kinds)",
    build,
};

/// Longest pause between reopen attempts of a failed meter.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

struct ChannelState {
    worker: Worker,
    energy: EnergyTotal,
    errors: BTreeMap<Reason, u64>,
    last_good_unix: Option<f64>,
    /// `None` until the first outcome; then whether the last one was good.
    up: Option<bool>,
}

struct MeterCollector {
    channels: Vec<ChannelState>,
    seq: u64,
    timeout: Duration,
}

fn build(ctx: &Context<'_>) -> Result<Box<dyn Collector>, CollectError> {
    if ctx.meter.specs.is_empty() {
        return Err(CollectError::Unavailable(
            "no meter configured (--meter KIND:TARGET)".into(),
        ));
    }
    let backoff = Backoff {
        base: ctx.interval / 2,
        max: MAX_BACKOFF,
    };
    let mut channels = Vec::new();
    let mut missing = Vec::new();
    let mut names = BTreeSet::new();
    for spec in &ctx.meter.specs {
        match meter::build(spec, ctx.paths, ctx.meter.timeout) {
            Ok(built) => {
                for channel in built {
                    if !names.insert(channel.name.clone()) {
                        return Err(Failure::DuplicateMeter { name: channel.name }.into());
                    }
                    info!(meter = %channel.name, kind = %channel.kind, %spec, "meter configured");
                    let worker = Worker::spawn(channel, backoff).map_err(Failure::MeterThread)?;
                    channels.push(ChannelState {
                        worker,
                        // Readings further apart than a few ticks are not integrated.
                        energy: EnergyTotal::new(ctx.interval * 3),
                        errors: BTreeMap::new(),
                        last_good_unix: None,
                        up: None,
                    });
                }
            }
            Err(why) => {
                warn!(%spec, reason = %why, "meter unavailable");
                missing.push(format!("{spec}: {why}"));
            }
        }
    }
    if channels.is_empty() {
        return Err(CollectError::Unavailable(missing.join("; ")));
    }
    Ok(Box::new(MeterCollector {
        channels,
        seq: 0,
        timeout: ctx.meter.timeout,
    }))
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

impl ChannelState {
    fn note_failure(&mut self, err: &ReadError) {
        *self.errors.entry(err.reason).or_default() += 1;
        if self.up != Some(false) {
            warn!(meter = %self.worker.name, error = %err, "meter read failed; retrying with backoff");
        } else {
            tracing::debug!(meter = %self.worker.name, error = %err, "meter read failed");
        }
    }
}

impl Collector for MeterCollector {
    fn collect(&mut self, out: &mut MetricSet, _report: &mut Report) -> Result<(), CollectError> {
        self.seq += 1;
        let seq = self.seq;
        for ch in &self.channels {
            ch.worker.request(seq);
        }
        // A little slack past the meters' own timeout, so a device that times out reports its
        // own, more precise error (short frame, no answer) rather than the collector's.
        let deadline = Instant::now() + self.timeout + Duration::from_millis(50);
        for ch in &mut self.channels {
            let outcome = ch.worker.wait(seq, deadline).unwrap_or_else(|| {
                Outcome::Failed(ReadError::new(
                    Reason::Timeout,
                    format!("no reading within {:?} (device hangs)", self.timeout),
                ))
            });
            let name = ch.worker.name.clone();
            let kind = ch.worker.kind.name();
            let labels = [(label::METER, name.as_str()), (label::KIND, kind)];
            let good = match outcome {
                Outcome::Good(reading, at) => {
                    if ch.up == Some(false) {
                        info!(meter = %name, "meter answers again");
                    }
                    ch.energy.observe(&reading, at);
                    ch.last_good_unix = Some(unix_now());
                    emit_reading(out, &labels, &reading);
                    true
                }
                Outcome::Failed(err) => {
                    ch.note_failure(&err);
                    ch.energy.gap();
                    false
                }
                Outcome::BackingOff => {
                    ch.energy.gap();
                    false
                }
            };
            ch.up = Some(good);
            out.push(&contract::meter::UP, &labels, if good { 1.0 } else { 0.0 });
            out.push(
                &contract::meter::ENERGY_JOULES_TOTAL,
                &labels,
                ch.energy.joules(),
            );
            if let Some(integrated) = ch.energy.integrated() {
                let v = if integrated { 1.0 } else { 0.0 };
                out.push(&contract::meter::ENERGY_INTEGRATED, &labels, v);
            }
            for reason in ch.worker.kind.def().reasons {
                ch.errors.entry(*reason).or_default();
            }
            for (reason, n) in &ch.errors {
                out.push(
                    &contract::meter::READ_ERRORS_TOTAL,
                    &[labels[0], labels[1], (label::REASON, reason.as_str())],
                    *n as f64,
                );
            }
            if let Some(t) = ch.last_good_unix {
                out.push(&contract::meter::LAST_READING_TIMESTAMP_SECONDS, &labels, t);
            }
        }
        Ok(())
    }
}

fn emit_reading(out: &mut MetricSet, labels: &[(&'static str, &str)], r: &meter::Reading) {
    let finite = |v: Option<f64>| v.filter(|x| x.is_finite());
    if let Some(w) = finite(r.power_watts) {
        out.push(&contract::meter::POWER_WATTS, labels, w);
    }
    if let Some(v) = finite(r.voltage_volts) {
        out.push(&contract::meter::VOLTAGE_VOLTS, labels, v);
    }
    if let Some(a) = finite(r.current_amperes) {
        out.push(&contract::meter::CURRENT_AMPERES, labels, a);
    }
    if let Some(c) = finite(r.temperature_celsius) {
        out.push(&contract::meter::TEMPERATURE_CELSIUS, labels, c);
    }
}
