//! The tick loop: resume, read, estimate, write, advance.
//!
//! Ticks are multiples of `--interval` since the Unix epoch and every sample carries its tick's
//! time, so a tick computed twice yields the same samples. Ticks are written strictly in order and
//! each tick ends with its marker series, which is how a restarted estimator finds where it left
//! off. A tick interrupted half-way is redone from the start: the samples it had already written
//! are sent again with the same timestamp and value, which Prometheus accepts (only a different
//! value at the same timestamp, or an older timestamp, is refused).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use greenpipe_common::model::ModelFile;
use greenpipe_common::names::{estimate, label};
use tracing::{info, warn};

use crate::attribution::IdleSplit;
use crate::endpoint::Endpoint;
use crate::estimate::{estimate_tick, tick_series, SkipReason};
use crate::model_registry::ModelRegistry;
use crate::models;
use crate::promql::{decode_matrix, Answer, Prometheus};
use crate::readout::{assemble, QuerySet, Tick};
use crate::remote_write::{BatchLimits, RetryPolicy, Sample, Sender, TimeSeries};
use crate::shard::Shard;
use crate::telemetry::Telemetry;

/// What the loop needs (built from the flags by `ServeArgs::into_config`).
#[derive(Debug)]
pub struct PipelineConfig {
    /// Source of the exporters' metrics.
    pub prometheus: Endpoint,
    /// Where the estimator's own output can be queried.
    pub progress: Endpoint,
    /// Remote-write receiver.
    pub remote_write: Endpoint,
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
    /// Idle split.
    pub idle_split: IdleSplit,
    /// Oldest tick to backfill.
    pub backfill_max_age: Duration,
    /// Ticks per range query.
    pub backfill_max_ticks: usize,
    /// Remote-write request limits.
    pub batch: BatchLimits,
    /// Remote-write retries.
    pub retry: RetryPolicy,
}

/// A model set in force and the queries that read its inputs.
struct Active {
    models: Arc<ModelFile>,
    queries: QuerySet,
}

impl Active {
    fn new(models: Arc<ModelFile>, rate_window: Duration) -> Active {
        let queries = queries_for(&[&models], rate_window);
        Active { models, queries }
    }
}

/// The queries reading every input of every model of `sets`.
fn queries_for(sets: &[&ModelFile], rate_window: Duration) -> QuerySet {
    let mut all = ModelFile {
        schema_version: greenpipe_common::model::SCHEMA_VERSION,
        models: Vec::new(),
    };
    for s in sets {
        all.models.extend(s.models.iter().cloned());
    }
    let (node_features, container_features) = models::features_to_read(&all);
    QuerySet::new(
        &node_features,
        &container_features,
        rate_window,
        &models::selector_label_keys(&all),
    )
}

/// The running loop.
pub struct Pipeline {
    config: PipelineConfig,
    registry: Mutex<ModelRegistry>,
    active: Mutex<Arc<Active>>,
    reload_requested: Arc<AtomicBool>,
    source: Prometheus,
    progress: Prometheus,
    sender: Sender,
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
    pub fn new(mut config: PipelineConfig, telemetry: Arc<Telemetry>) -> anyhow::Result<Pipeline> {
        let models = config.models.active();
        let active = Active::new(models.clone(), config.rate_window);
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
            source: Prometheus::new(config.prometheus.clone()),
            progress: Prometheus::new(config.progress.clone()),
            sender: Sender::new(
                config.remote_write.clone(),
                config.batch,
                config.retry,
                telemetry.clone(),
            ),
            config,
            telemetry,
        })
    }

    /// Set it (from a SIGHUP handler) to have every model file read again at the next tick
    /// boundary, changed or not.
    pub fn reload_flag(&self) -> Arc<AtomicBool> {
        self.reload_requested.clone()
    }

    /// The model set in force.
    pub fn models(&self) -> Arc<ModelFile> {
        self.active_set().models.clone()
    }

    fn active_set(&self) -> Arc<Active> {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Polls the model files (a few `stat`s); returns a changed model set, not yet in force.
    fn poll_models(&self) -> Option<ModelFile> {
        let force = self.reload_requested.swap(false, Ordering::SeqCst);
        let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        let poll = match registry.poll(force) {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %format!("{e:#}"), "reading the model files failed; models unchanged");
                self.refused();
                return None;
            }
        };
        for r in &poll.refused {
            warn!(file = %r.file.display(), error = %r.error, "model file refused; models unchanged");
            self.refused();
        }
        if force && poll.candidate.is_none() && poll.refused.is_empty() {
            info!("SIGHUP: model files read again, nothing changed");
        }
        poll.candidate
    }

    fn refused(&self) {
        self.telemetry
            .model_reloads
            .with_label_values(&["refused"])
            .inc();
        self.telemetry.model_reload_success.set(0);
    }

    /// Decides between the model set in force and a candidate on the first tick of a batch: the
    /// candidate is refused if it cannot estimate a node the current set estimates (a feature
    /// the node lacks). Returns the set to estimate the whole batch with.
    fn choose(&self, current: &Arc<Active>, candidate: ModelFile, tick: &Tick) -> Arc<Active> {
        let now = estimate_tick(&current.models, tick, self.config.idle_split);
        let next = estimate_tick(&candidate, tick, self.config.idle_split);
        let lost: Vec<&str> = next
            .skipped
            .iter()
            .filter(|(node, reason)| {
                *reason != SkipReason::NoModel && now.nodes.iter().any(|e| &e.node == node)
            })
            .map(|(node, _)| node.as_str())
            .collect();
        if !lost.is_empty() {
            warn!(
                nodes = ?lost,
                "new model set refused: it cannot estimate these nodes (features they lack); models unchanged"
            );
            self.refused();
            return current.clone();
        }
        let before: Vec<String> = current.models.models.iter().map(|m| m.label()).collect();
        let candidate = Arc::new(candidate);
        let active = Arc::new(Active::new(candidate.clone(), self.config.rate_window));
        self.registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .apply((*candidate).clone());
        *self.active.lock().unwrap_or_else(|e| e.into_inner()) = active.clone();
        show_models(&self.telemetry, &candidate);
        self.telemetry
            .model_reloads
            .with_label_values(&["applied"])
            .inc();
        self.telemetry.model_reload_success.set(1);
        info!(
            ?before,
            after = ?candidate.models.iter().map(|m| m.label()).collect::<Vec<_>>(),
            first_tick_ms = tick.timestamp_ms,
            "new model set in force from this tick on"
        );
        active
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
    pub async fn run(self) -> anyhow::Result<()> {
        let step = self.step_ms();
        let mut next: Option<i64> = None;
        let mut failures = 0u32;
        loop {
            let next_tick = match next {
                Some(t) => t,
                None => match self.resume_point().await {
                    Ok(Some(last)) => {
                        info!(last_tick_ms = last, "resuming after the last tick written");
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
                let lost = (horizon - next_tick) / step;
                warn!(
                    ticks = lost,
                    "ticks older than --backfill.max-age are given up"
                );
                self.telemetry.ticks_abandoned.inc_by(lost as u64);
                horizon
            } else {
                next_tick
            };
            if first > ready {
                let wait_ms = first + self.config.delay.as_millis() as i64 - now_ms();
                tokio::time::sleep(Duration::from_millis(wait_ms.clamp(1, 60_000) as u64)).await;
                next = Some(first);
                continue;
            }
            let last = ready.min(first + (self.config.backfill_max_ticks as i64 - 1) * step);
            match self.process(first, last, ready).await {
                Ok(()) => {
                    failures = 0;
                    next = Some(last + step);
                }
                Err(e) => {
                    failures += 1;
                    next = Some(first);
                    self.backoff("reading the fleet's usage", &e, failures)
                        .await;
                }
            }
        }
    }

    async fn backoff(&self, what: &str, e: &anyhow::Error, failures: u32) {
        let wait = self.config.retry.backoff(failures.saturating_sub(1));
        warn!(error = %format!("{e:#}"), ?wait, "{what} failed; retrying");
        tokio::time::sleep(wait).await;
    }

    /// Reads ticks `first..=last`, then estimates and writes them one by one, in order.
    async fn process(&self, first: i64, last: i64, ready: i64) -> anyhow::Result<()> {
        let step = self.step_ms();
        // Models change only here, between batches: every tick is estimated with one set.
        let mut active = self.active_set();
        let candidate = self.poll_models();
        let read = match &candidate {
            None => self.read(&active.queries, first, last).await,
            Some(c) => {
                let both = queries_for(&[&active.models, c], self.config.rate_window);
                self.read(&both, first, last).await
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
        for tick in &ticks {
            let estimates = estimate_tick(&active.models, tick, self.config.idle_split);
            for (node, reason) in &estimates.skipped {
                tracing::debug!(node, reason = reason.as_str(), "node skipped");
                self.telemetry
                    .nodes_skipped
                    .with_label_values(&[reason.as_str()])
                    .inc();
            }
            let mut series = tick_series(&estimates);
            series.push(self.marker(tick.timestamp_ms));
            self.sender.send(series).await;
            self.telemetry.ticks.inc();
            if tick.timestamp_ms < ready {
                self.telemetry.ticks_backfilled.inc();
            }
            self.telemetry
                .nodes_estimated
                .set(estimates.nodes.len() as i64);
            let t = tick.timestamp_ms as f64 / 1000.0;
            self.telemetry.last_tick.set(t);
            self.telemetry.lag_seconds.set(now_ms() as f64 / 1000.0 - t);
        }
        debug_assert_eq!(ticks.len() as i64, (last - first) / step + 1);
        Ok(())
    }

    /// The marker series of a tick: its own time as the value.
    fn marker(&self, t_ms: i64) -> TimeSeries {
        let shard = self.config.shard.to_string();
        let mut ts = TimeSeries::new(estimate::TICK_TIMESTAMP_SECONDS, &[(label::SHARD, &shard)]);
        ts.samples.push(Sample {
            value: t_ms as f64 / 1000.0,
            timestamp: t_ms,
        });
        ts
    }

    /// Runs the tick queries over `first..=last` and assembles them.
    pub async fn read(&self, q: &QuerySet, first: i64, last: i64) -> anyhow::Result<Vec<Tick>> {
        let step = self.config.interval;
        let labels = async {
            match &q.node_labels {
                Some(query) => self
                    .query_source("node_labels", query, first, last)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        };
        let (node, container, labels) = tokio::try_join!(
            self.query_source("node_features", &q.node, first, last),
            self.query_source("container_features", &q.container, first, last),
            labels,
        )?;
        let node = decode_matrix(&node)?;
        let container = decode_matrix(&container)?;
        let labels = match &labels {
            Some(body) => decode_matrix(body)?,
            None => Vec::new(),
        };
        let count = ((last - first) / step.as_millis() as i64 + 1) as usize;
        Ok(assemble(
            first,
            step.as_millis() as i64,
            count,
            &node,
            &container,
            &labels,
            self.config.shard,
        ))
    }

    async fn query_source(
        &self,
        name: &str,
        query: &str,
        first: i64,
        last: i64,
    ) -> anyhow::Result<Vec<u8>> {
        self.query(&self.source, name, query, first, last).await
    }

    async fn query(
        &self,
        api: &Prometheus,
        name: &str,
        query: &str,
        first: i64,
        last: i64,
    ) -> anyhow::Result<Vec<u8>> {
        let result = api
            .query_range(query, first, last, self.config.interval)
            .await;
        self.account(name, result)
    }

    fn account(&self, name: &str, result: anyhow::Result<Answer>) -> anyhow::Result<Vec<u8>> {
        let outcome = if result.is_ok() { "ok" } else { "error" };
        self.telemetry
            .queries
            .with_label_values(&[name, outcome])
            .inc();
        let answer = result.map_err(|e| e.context(format!("query {name}")))?;
        self.telemetry
            .query_duration
            .with_label_values(&[name])
            .observe(answer.elapsed.as_secs_f64());
        Ok(answer.body)
    }

    /// The last tick this shard wrote, from its marker series within the backfill horizon.
    async fn resume_point(&self) -> anyhow::Result<Option<i64>> {
        let window_s = self.config.backfill_max_age.as_secs().max(1);
        let query = format!(
            "max(max_over_time({}{{{}=\"{}\"}}[{window_s}s]))",
            estimate::TICK_TIMESTAMP_SECONDS,
            label::SHARD,
            self.config.shard
        );
        // An instant query: VictoriaMetrics answers a one-point range query at "now" with nothing.
        let body = self.account("progress", self.progress.query(&query, now_ms()).await)?;
        let matrix = decode_matrix(&body)?;
        Ok(matrix
            .first()
            .and_then(|s| s.points.last())
            .map(|&(_, v)| (v * 1000.0).round() as i64)
            .filter(|t| *t > 0))
    }
}

/// Sets the loaded-models gauge to exactly the models of `models`, by their versioned label.
fn show_models(telemetry: &Telemetry, models: &ModelFile) {
    telemetry.models_loaded.reset();
    for m in &models.models {
        telemetry
            .models_loaded
            .with_label_values(&[&m.label()])
            .set(1.0);
    }
}
