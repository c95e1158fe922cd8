//! The tick loop: resume, read, estimate, write, advance.
//!
//! Ticks are multiples of `--interval` since the Unix epoch and every sample carries its tick's
//! time, so a tick computed twice yields the same samples. Ticks are written strictly in order,
//! `--read.ticks-per-query` at a time (one sample per tick in each series), and each group ends
//! with its ticks' marker samples, which is how a restarted estimator finds where it left off. A
//! group interrupted half-way is redone from its first tick: the samples it had already written
//! are sent again with the same timestamp and value, which Prometheus accepts (only a different
//! value at the same timestamp, or an older timestamp, is refused).
//!
//! This file holds the loop; its roles have a file each: [`read`] (the feature queries),
//! [`swap`] (model files polled and put in force between batches), [`write`] (estimate, energy,
//! remote write) and [`resume`] (where a restarted estimator goes on).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{info, warn};

use crate::endpoint::Endpoint;
use crate::energy::Ledger;
use crate::estimate::Policy;
use crate::model_registry::{ModelRegistry, RegistryError};
use crate::promql::{Engine, Prometheus};
use crate::remote_write::{BatchLimits, Protocol, RetryPolicy, Sender};
use crate::shard::Shard;
use crate::telemetry::Telemetry;

mod read;
mod resume;
mod swap;
mod write;

use crate::promql::QueryFailure;
pub use read::{ReadError, ReadFailure};
pub use resume::{resume_tick, MarkerError};
use std::sync::atomic::Ordering;
use swap::{queries_for, show_models, Active};

/// What the loop needs (built from the flags by `ServeArgs::into_config`).
#[derive(Debug)]
pub struct PipelineConfig {
    /// Source of the exporters' metrics.
    pub prometheus: Endpoint,
    /// Where the estimator's own output can be queried.
    pub progress: Endpoint,
    /// Remote-write receiver.
    pub remote_write: Endpoint,
    /// OTLP receiver, if any (`--otlp.endpoint`).
    pub otlp: Option<Endpoint>,
    /// Models, and the files they come from (read again at tick boundaries when they change).
    pub models: ModelRegistry,
    /// Tick spacing.
    pub interval: Duration,
    /// `rate()` window.
    pub rate_window: Duration,
    /// Evaluation delay after a tick.
    pub delay: Duration,
    /// This replica's nodes.
    pub shard: Shard,
    /// Label that the source's `hashmod` relabel rule sets to the shard index; `None`: select
    /// this shard's nodes by name, from a node-list query.
    pub shard_label: Option<String>,
    /// What serves `prometheus`.
    pub engine: Engine,
    /// Per-request timeout, also passed to the engine.
    pub http_timeout: Duration,
    /// Which power a node reports, and the idle split.
    pub policy: Policy,
    /// Oldest tick to backfill.
    pub backfill_max_age: Duration,
    /// Ticks per range query.
    pub backfill_max_ticks: usize,
    /// Live ticks read together.
    pub read_ticks: usize,
    /// Remote-write request limits.
    pub batch: BatchLimits,
    /// Remote-write retries.
    pub retry: RetryPolicy,
    /// Remote-write message.
    pub protocol: Protocol,
}

/// The running loop.
pub struct Pipeline {
    config: PipelineConfig,
    registry: Mutex<ModelRegistry>,
    active: Mutex<Arc<Active>>,
    reload_requested: Arc<AtomicBool>,
    /// The shard label's matcher (or nothing), added to every selector.
    shard_matcher: String,
    source: Prometheus,
    progress: Prometheus,
    sender: Sender,
    otlp: Option<crate::otlp::Exporter>,
    energy: Ledger,
    /// Ticks read by one range query; halved when the engine refuses the amount of work.
    chunk_ticks: usize,
    telemetry: Arc<Telemetry>,
}

/// `t` rounded down to a multiple of `step` (ms).
pub fn align_down(t_ms: i64, step_ms: i64) -> i64 {
    t_ms.div_euclid(step_ms) * step_ms
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Pipeline {
    /// Prepares the queries and clients.
    pub fn new(
        mut config: PipelineConfig,
        telemetry: Arc<Telemetry>,
    ) -> Result<Pipeline, RegistryError> {
        let shard_matcher = match &config.shard_label {
            Some(name) if config.shard.is_partial() => {
                format!("{name}=\"{}\"", config.shard.index)
            }
            _ => String::new(),
        };
        let models = config.models.active();
        let active = Active::new(models.clone(), config.rate_window, &shard_matcher);
        show_models(&telemetry, &models);
        telemetry.model_reload_success.set(1);
        info!(
            models = ?models.models.iter().map(|m| m.label()).collect::<Vec<_>>(),
            queries = ?active.queries,
            shard = %config.shard,
            "estimator ready"
        );
        let registry = std::mem::replace(&mut config.models, ModelRegistry::open(&[])?);
        Ok(Pipeline {
            registry: Mutex::new(registry),
            active: Mutex::new(Arc::new(active)),
            reload_requested: Arc::default(),
            shard_matcher,
            source: Prometheus::of_engine(config.prometheus.clone(), config.engine)
                .with_server_timeout(config.http_timeout),
            progress: Prometheus::new(config.progress.clone())
                .with_server_timeout(config.http_timeout),
            sender: Sender::new(
                config.remote_write.clone(),
                config.batch,
                config.retry,
                telemetry.clone(),
            )
            .with_protocol(config.protocol),
            otlp: config.otlp.clone().map(|endpoint| {
                crate::otlp::Exporter::start(endpoint, config.retry, telemetry.clone())
            }),
            energy: Ledger::new(config.backfill_max_age.as_millis() as i64),
            chunk_ticks: config.backfill_max_ticks,
            config,
            telemetry,
        })
    }

    fn step_ms(&self) -> i64 {
        self.config.interval.as_millis() as i64
    }

    /// The newest tick whose data should be complete now.
    fn ready_tick(&self) -> i64 {
        align_down(
            now_ms() - self.config.delay.as_millis() as i64,
            self.step_ms(),
        )
    }

    /// Runs until the future is dropped. Nothing here is fatal: failed queries are retried with
    /// backoff, failed writes inside the sender (bad configuration was refused at start).
    /// Runs the tick loop; it never ends (failures are retried).
    pub async fn run(mut self) -> std::convert::Infallible {
        let step = self.step_ms();
        let mut next: Option<i64> = None;
        let mut failures = 0u32;
        loop {
            let next_tick = match next {
                Some(t) => t,
                None => match self.resume().await {
                    Ok(Some(last)) => {
                        info!(
                            last_tick_ms = last,
                            energy_series = self.energy.len(),
                            "resuming after the last tick written"
                        );
                        last + step
                    }
                    Ok(None) => {
                        let t = self.ready_tick();
                        info!(first_tick_ms = t, "no earlier output found; starting live");
                        t
                    }
                    Err(e) => {
                        failures += 1;
                        self.backoff("finding where the estimator left off", &e, failures)
                            .await;
                        continue;
                    }
                },
            };
            let ready = self.ready_tick();
            let horizon = align_down(
                now_ms() - self.config.backfill_max_age.as_millis() as i64,
                step,
            ) + step;
            let first = if next_tick < horizon {
                // Bounded by the horizon: a resume point can never make this absurd.
                let lost = horizon.saturating_sub(next_tick) / step;
                warn!(
                    ticks = lost,
                    "ticks older than --backfill.max-age are given up"
                );
                self.telemetry.ticks_abandoned.inc_by(lost as u64);
                horizon
            } else {
                next_tick
            };
            // Live, wait until --read.ticks-per-query ticks are ready (backfill has them all).
            let batch_last = first + (self.config.read_ticks as i64 - 1) * step;
            if batch_last > ready {
                let wait_ms = batch_last + self.config.delay.as_millis() as i64 - now_ms();
                tokio::time::sleep(Duration::from_millis(wait_ms.clamp(1, 60_000) as u64)).await;
                next = Some(first);
                continue;
            }
            let last = ready.min(first + (self.chunk_ticks as i64 - 1) * step);
            match self.process(first, last, ready).await {
                Ok(()) => {
                    failures = 0;
                    next = Some(last + step);
                    self.chunk_ticks = (self.chunk_ticks * 2).min(self.config.backfill_max_ticks);
                }
                Err(e) => {
                    next = Some(first);
                    let too_big = e.cause.failure().is_some_and(QueryFailure::is_too_big);
                    if too_big && last > first {
                        // Fewer ticks per query, at once: the same range would fail again.
                        self.chunk_ticks = (((last - first) / step + 1) as usize / 2).max(1);
                        warn!(
                            error = %crate::error_chain(&e),
                            ticks_per_query = self.chunk_ticks,
                            "the engine refused the query's size; asking for fewer ticks"
                        );
                        continue;
                    }
                    failures += 1;
                    self.backoff("reading the fleet's usage", &e, failures)
                        .await;
                }
            }
        }
    }

    async fn backoff(&self, what: &str, e: &ReadError, failures: u32) {
        let wait = self.config.retry.backoff(failures.saturating_sub(1));
        warn!(error = %crate::error_chain(e), ?wait, "{what} failed; retrying");
        tokio::time::sleep(wait).await;
    }

    /// Reads ticks `first..=last`, then estimates and writes them in order, `--read.ticks-per-query`
    /// at a time.
    async fn process(&mut self, first: i64, last: i64, ready: i64) -> Result<(), ReadError> {
        let step = self.step_ms();
        // Models change only here, between batches: every tick is estimated with one set.
        let mut active = self.active_set();
        let candidate = self.poll_models();
        let read = match &candidate {
            None => {
                self.read(&[&active.models], &active.queries, first, last)
                    .await
            }
            Some(c) => {
                let sets = [&*active.models, c];
                let both = queries_for(&sets, self.config.rate_window, &self.shard_matcher);
                self.read(&sets, &both, first, last).await
            }
        };
        // The registry has seen the change already: when this batch cannot decide, the next
        // one reads the files again.
        let retry_later = || self.reload_requested.store(true, Ordering::SeqCst);
        let ticks = match read {
            Ok(t) => t,
            Err(e) => {
                if candidate.is_some() {
                    retry_later();
                }
                return Err(e);
            }
        };
        match (candidate, ticks.first()) {
            (Some(c), Some(tick)) => active = self.choose(&active, c, tick),
            (Some(_), None) => retry_later(),
            _ => {}
        }
        // --read.ticks-per-query N ticks go out together: one series per label set with N
        // samples, the labels encoded and compressed once, not N times.
        for group in ticks.chunks(self.config.read_ticks.max(1)) {
            self.write_group(&active.models, group, ready).await;
        }
        debug_assert_eq!(ticks.len() as i64, (last - first) / step + 1);
        Ok(())
    }
}
