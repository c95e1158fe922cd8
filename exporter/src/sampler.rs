//! The collection loop: runs every enabled collector once per tick and publishes the encoded
//! sample, so a scrape only copies bytes and two scrapes of one tick return identical values.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use greenpipe_common::contract;
use greenpipe_common::names::label;
use tracing::{info, warn};

use crate::board;
use crate::collector::{self, CollectError, Collector, Report};
use crate::config::Config;
use crate::metrics::MetricSet;
use crate::push;
use crate::selfstat;

/// The last published sample, shared with the HTTP handler.
#[derive(Debug, Clone, Default)]
pub struct Published {
    /// Prometheus text exposition of the sample.
    pub text: Arc<Vec<u8>>,
    /// Number of completed collection cycles.
    pub cycles: u64,
}

/// Handle the HTTP side reads from.
pub type Shared = Arc<RwLock<Published>>;

struct Slot {
    name: &'static str,
    collector: Option<Box<dyn Collector>>,
    /// `None` = available; `Some(reason)` = unavailable, as exposed and logged.
    unavailable: Option<String>,
    success: bool,
    duration: Duration,
    malformed_total: u64,
}

/// Owns the collectors and the state of the self metrics.
pub struct Sampler {
    config: Config,
    slots: Vec<Slot>,
    cycles: u64,
    last_cycle: Duration,
    push: Option<push::Handle>,
    /// `greenpipe_node_board_info`'s labels; None when detection could not read its files.
    board: Option<[(&'static str, &'static str); 4]>,
    /// The last sample's series, reused by the next ([`MetricSet::with_spare`]).
    spare: Vec<crate::metrics::Series>,
}

/// A collector enabled on the command line or in the file that cannot run here.
#[derive(Debug, thiserror::Error)]
#[error("collector {collector} was enabled explicitly but {error}")]
pub struct BuildError {
    /// The collector.
    pub collector: &'static str,
    /// Why it cannot be built (its text is part of the message).
    pub error: CollectError,
}

impl Sampler {
    /// Builds every enabled collector. A collector the user enabled explicitly that cannot be
    /// built is an error; a default one is reported unavailable and the exporter goes on.
    pub fn new(config: Config) -> Result<Sampler, BuildError> {
        // Which bundled profile fits this board, so the operator sees it (and a fallback) at
        // start, and queries and dashboards can join on greenpipe_node_board_info.
        let board = match board::detect_host(&config.paths) {
            Ok(d) => {
                if d.is_fallback() {
                    warn!(board = ?d.board.map(|b| b.name()), profile = d.profile, "{d}");
                } else {
                    info!(board = ?d.board.map(|b| b.name()), profile = d.profile, "{d}");
                }
                Some(d.labels())
            }
            Err(e) => {
                warn!(error = %e, "board detection failed; greenpipe_node_board_info is left out");
                None
            }
        };
        let mut slots = Vec::new();
        for name in &config.collectors {
            let spec = collector::spec(name).expect("config only holds registry names");
            let (collector, unavailable) = match (spec.build)(&config.context()) {
                Ok(c) => (Some(c), None),
                Err(CollectError::Unavailable(reason)) if !config.explicit.contains(name) => {
                    warn!(collector = name, %reason, "collector unavailable");
                    (None, Some(reason))
                }
                Err(error) => {
                    return Err(BuildError {
                        collector: name,
                        error,
                    })
                }
            };
            slots.push(Slot {
                name,
                collector,
                unavailable,
                success: false,
                duration: Duration::ZERO,
                malformed_total: 0,
            });
        }
        Ok(Sampler {
            config,
            slots,
            cycles: 0,
            last_cycle: Duration::ZERO,
            push: None,
            board,
            spare: Vec::new(),
        })
    }

    /// Hands every tick [`Sampler::run`] takes to the push as well, and adds the push's self
    /// metrics to the sample.
    pub fn push_to(&mut self, handle: push::Handle) {
        self.push = Some(handle);
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Runs one collection cycle and returns the sample, self metrics included.
    pub fn collect_once(&mut self) -> MetricSet {
        let started = Instant::now();
        let mut all = MetricSet::new();
        for slot in &mut self.slots {
            let Some(collector) = slot.collector.as_mut() else {
                slot.success = false;
                continue;
            };
            let t0 = Instant::now();
            let mut out = MetricSet::with_spare(std::mem::take(&mut self.spare));
            let mut report = Report::default();
            let result = collector.collect(&mut out, &mut report);
            slot.duration = t0.elapsed();
            slot.malformed_total += report.malformed_lines;
            self.spare = out.take_spare();
            match result {
                Ok(()) => {
                    if let Some(reason) = slot.unavailable.take() {
                        info!(collector = slot.name, %reason, "collector available again");
                    }
                    slot.success = true;
                    all.merge(out);
                }
                Err(CollectError::Unavailable(reason)) => {
                    if slot.unavailable.as_deref() != Some(reason.as_str()) {
                        warn!(collector = slot.name, %reason, "collector unavailable");
                    }
                    slot.unavailable = Some(reason);
                    slot.success = false;
                }
                Err(CollectError::Failed(err)) => {
                    // Failures can repeat every tick; the success gauge carries them, the log
                    // only shows them at debug level after the first.
                    if slot.success || self.cycles == 0 {
                        warn!(collector = slot.name, error = %err, "collector failed");
                    } else {
                        tracing::debug!(collector = slot.name, error = %err, "collector failed");
                    }
                    slot.success = false;
                }
            }
        }
        self.cycles += 1;
        // The self metrics below take what is left of the spare series.
        all.merge(MetricSet::with_spare(std::mem::take(&mut self.spare)));
        self.self_metrics(&mut all);
        self.last_cycle = started.elapsed();
        all
    }

    fn self_metrics(&self, out: &mut MetricSet) {
        out.push(
            &contract::exporter::BUILD_INFO,
            &[(label::VERSION, env!("CARGO_PKG_VERSION"))],
            1.0,
        );
        if let Some(labels) = &self.board {
            out.push(&contract::node::BOARD_INFO, labels, 1.0);
        }
        for slot in &self.slots {
            let c = [(label::COLLECTOR, slot.name)];
            out.push(
                &contract::exporter::COLLECTOR_SUCCESS,
                &c,
                if slot.success { 1.0 } else { 0.0 },
            );
            out.push(
                &contract::exporter::COLLECTOR_DURATION_SECONDS,
                &c,
                slot.duration.as_secs_f64(),
            );
            out.push(
                &contract::exporter::MALFORMED_LINES_TOTAL,
                &c,
                slot.malformed_total as f64,
            );
            let reason = slot.unavailable.as_deref().unwrap_or("");
            out.push(
                &contract::exporter::COLLECTOR_AVAILABLE,
                &[(label::COLLECTOR, slot.name), (label::REASON, reason)],
                if slot.unavailable.is_none() { 1.0 } else { 0.0 },
            );
        }
        out.push(
            &contract::exporter::COLLECTION_DURATION_SECONDS,
            &[],
            self.last_cycle.as_secs_f64(),
        );
        out.push(
            &contract::exporter::COLLECTIONS_TOTAL,
            &[],
            self.cycles as f64,
        );
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        out.push(
            &contract::exporter::LAST_COLLECTION_TIMESTAMP_SECONDS,
            &[],
            now,
        );
        out.push(
            &contract::exporter::CPU_SECONDS_TOTAL,
            &[],
            selfstat::cpu_seconds(),
        );
        if let Some(rss) = selfstat::resident_bytes() {
            out.push(&contract::exporter::RESIDENT_MEMORY_BYTES, &[], rss as f64);
        }
        if let Some(handle) = &self.push {
            push_metrics(out, &handle.stats());
        }
    }

    /// Collects and encodes one sample.
    pub fn sample_text(&mut self) -> Vec<u8> {
        let set = self.collect_once();
        let text = set.encode_text(&self.config.node_name);
        self.spare = set.into_spare();
        text
    }

    /// Runs the loop on the current thread until `stop` returns true, publishing into `shared`.
    /// Whoever makes `stop` true unparks this thread, or the loop notices at the next tick.
    /// Ticks are aligned to a fixed schedule so a slow cycle does not shift later ones.
    pub fn run(mut self, shared: Shared, stop: impl Fn() -> bool) {
        let interval = self.config.interval;
        let mut next = Instant::now();
        while !stop() {
            // The push stamps each sample with the time its tick was taken.
            let taken_ms = push::now_ms();
            let set = self.collect_once();
            let text = set.encode_text(&self.config.node_name);
            match &self.push {
                Some(handle) => handle.offer(taken_ms, set),
                None => self.spare = set.into_spare(),
            }
            {
                let mut p = shared.write().unwrap_or_else(|e| e.into_inner());
                p.text = Arc::new(text);
                p.cycles = self.cycles;
            }
            next += interval;
            let now = Instant::now();
            if next <= now {
                // Overran: skip missed ticks instead of bursting to catch up.
                while next <= now {
                    next += interval;
                }
            }
            // One wake-up per tick: shutdown sets `stop` and unparks this thread.
            while !stop() {
                let now = Instant::now();
                if now >= next {
                    break;
                }
                std::thread::park_timeout(next - now);
            }
        }
    }
}

/// The push's counters and gauges (only with `--push.remote-write-url`).
fn push_metrics(out: &mut MetricSet, stats: &push::buffer::Stats) {
    use contract::exporter as e;
    out.push(&e::PUSH_SAMPLES_SENT_TOTAL, &[], stats.sent as f64);
    for &reason in push::buffer::DropReason::ALL {
        out.push(
            &e::PUSH_SAMPLES_DROPPED_TOTAL,
            &[(label::REASON, reason.as_str())],
            stats.dropped[reason as usize] as f64,
        );
    }
    out.push(&e::PUSH_FAILURES_TOTAL, &[], stats.failures as f64);
    if let Some(up) = stats.receiver_up {
        out.push(&e::PUSH_RECEIVER_UP, &[], if up { 1.0 } else { 0.0 });
    }
    out.push(&e::PUSH_BUFFER_BYTES, &[], stats.bytes as f64);
    out.push(&e::PUSH_BUFFER_SEGMENTS, &[], stats.segments as f64);
    if let Some(ms) = stats.oldest_unsent_ms {
        out.push(
            &e::PUSH_OLDEST_UNSENT_TIMESTAMP_SECONDS,
            &[],
            ms as f64 / 1000.0,
        );
    }
}
