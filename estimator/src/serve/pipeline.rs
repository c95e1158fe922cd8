//! The tick loop: resume, read, estimate, write, advance.
//!
//! Ticks are multiples of `--interval` since the Unix epoch and every sample carries its tick's
//! time, so a tick computed twice yields the same samples. Ticks are written strictly in order,
//! `--read.ticks-per-query` at a time (one sample per tick in each series), and each group ends
//! with its ticks' marker samples, which is how a restarted estimator finds where it left off. A
//! group interrupted half-way is redone from its first tick: the samples it had already written
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
use crate::energy::Ledger;
use crate::estimate::{estimate_tick, marker_series, write_ticks, SkipReason};
use crate::model_registry::ModelRegistry;
use crate::model_registry::RegistryError;
use crate::models;
use crate::promql::{
    decode_answer, decode_matrix, Answer, DecodeError, Engine, Prometheus, QueryError, QueryFailure,
};
use crate::readout::{assemble, node_list_query, node_matcher, QuerySet, Tick};
use crate::remote_write::{BatchLimits, Protocol, RetryPolicy, Sender};
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
    /// Idle split.
    pub idle_split: IdleSplit,
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

/// A model set in force and the queries that read its inputs.
struct Active {
    models: Arc<ModelFile>,
    queries: QuerySet,
}

impl Active {
    fn new(models: Arc<ModelFile>, rate_window: Duration, matcher: &str) -> Active {
        let queries = queries_for(&[&models], rate_window, matcher);
        Active { models, queries }
    }
}

/// The queries reading every input of every model of `sets`, `matcher` (empty: none) in every
/// selector.
fn queries_for(sets: &[&ModelFile], rate_window: Duration, matcher: &str) -> QuerySet {
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
        matcher,
    )
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

/// Which series of the source one read selects.
enum Scope {
    /// The precomputed queries: the whole fleet, or this shard through its label.
    Fixed,
    /// These nodes only (may be none).
    Nodes(Vec<String>),
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

/// Why a read, the resume or the progress lookup failed: the query (its `queries` counter name)
/// and why.
#[derive(Debug, thiserror::Error)]
#[error("query {query}")]
pub struct ReadError {
    /// `node_features`, `progress`, …
    pub query: String,
    /// Why.
    #[source]
    pub cause: ReadFailure,
}

/// The cause of a [`ReadError`].
#[derive(Debug, thiserror::Error)]
pub enum ReadFailure {
    /// The request failed.
    #[error(transparent)]
    Request(#[from] QueryError),
    /// The answer did not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The progress marker cannot be a tick.
    #[error(transparent)]
    Marker(#[from] MarkerError),
}

impl ReadFailure {
    /// The failure the tick loop acts on (fewer ticks per query) and counts by kind.
    pub fn failure(&self) -> Option<&QueryFailure> {
        match self {
            ReadFailure::Request(QueryError::Failure(f))
            | ReadFailure::Decode(DecodeError::Failure(f)) => Some(f),
            _ => None,
        }
    }
}

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
                let error = crate::error_chain(&e);
                warn!(%error, "reading the model files failed; models unchanged");
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
        let active = Arc::new(Active::new(
            candidate.clone(),
            self.config.rate_window,
            &self.shard_matcher,
        ));
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
        // samples, the labels encoded and compressed once, not N times. Their markers go last,
        // after every sample of the group, so a group cut short is redone whole on resume.
        for group in ticks.chunks(self.config.read_ticks.max(1)) {
            let mut estimates = Vec::with_capacity(group.len());
            let mut energy = Vec::with_capacity(group.len());
            for tick in group {
                let e = estimate_tick(&active.models, tick, self.config.idle_split);
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
            // Laid out straight into request bodies: building the series first cost more than
            // the rest of the tick at fleet scale.
            let mut writer = self.sender.writer();
            write_ticks(&estimates, &energy, &mut writer);
            let shard = self.config.shard.to_string();
            writer.push(&marker_series(&shard, group.iter().map(|t| t.timestamp_ms)));
            self.sender.send_encoded(writer.finish()).await;
            // After remote write: what OTLP receives was recorded where the estimator resumes.
            if let Some(otlp) = &self.otlp {
                otlp.export(&crate::estimate::ticks_series(&estimates, &energy));
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
        debug_assert_eq!(ticks.len() as i64, (last - first) / step + 1);
        Ok(())
    }

    /// Which series this shard reads for ticks `first..=last`.
    async fn scope(&self, first: i64, last: i64) -> Result<Scope, ReadError> {
        if !self.config.shard.is_partial() || self.config.shard_label.is_some() {
            return Ok(Scope::Fixed);
        }
        // One series per node: cheap next to the feature queries, and each of those then
        // touches only this shard's series.
        let span = Duration::from_millis((last - first) as u64) + self.config.rate_window;
        let body = self.account(
            "node_list",
            self.source.query(&node_list_query(span), last).await,
        )?;
        let mut nodes: Vec<String> = self
            .outcome("node_list", decode_matrix(&body))?
            .iter()
            .map(|s| s.label(label::NODE))
            .filter(|n| !n.is_empty() && self.config.shard.owns(n))
            .map(str::to_string)
            .collect();
        nodes.sort_unstable();
        Ok(Scope::Nodes(nodes))
    }

    /// Runs the tick queries over `first..=last` and assembles them.
    /// `q` reads every input of the models of `sets` (with the shard label's matcher, if any);
    /// a shard selecting its nodes by name builds its own from `sets`.
    pub async fn read(
        &self,
        sets: &[&ModelFile],
        q: &QuerySet,
        first: i64,
        last: i64,
    ) -> Result<Vec<Tick>, ReadError> {
        let step = self.config.interval;
        let count = ((last - first) / step.as_millis() as i64 + 1) as usize;
        let scoped;
        let q = match self.scope(first, last).await? {
            Scope::Fixed => q,
            Scope::Nodes(nodes) if nodes.is_empty() => {
                return Ok(assemble(
                    first,
                    step.as_millis() as i64,
                    count,
                    &[],
                    &[],
                    &[],
                    self.config.shard,
                ))
            }
            Scope::Nodes(nodes) => {
                let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
                scoped = queries_for(sets, self.config.rate_window, &node_matcher(&names));
                &scoped
            }
        };
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
        let node = self.decode("node_features", &node)?;
        let container = self.decode("container_features", &container)?;
        let labels = match &labels {
            Some(body) => self.decode("node_labels", body)?,
            None => Vec::new(),
        };
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

    /// Decodes an answer, counting (and logging) the warnings the engine attached.
    fn decode<'b>(
        &self,
        name: &str,
        body: &'b [u8],
    ) -> Result<Vec<crate::promql::RangeSeries<'b>>, ReadError> {
        let decoded = self.outcome(name, decode_answer(body))?;
        if !decoded.warnings.is_empty() {
            warn!(query = name, warnings = ?decoded.warnings, "the engine attached warnings");
            self.telemetry
                .query_warnings
                .with_label_values(&[name])
                .inc_by(decoded.warnings.len() as u64);
        }
        Ok(decoded.series)
    }

    async fn query_source(
        &self,
        name: &str,
        query: &str,
        first: i64,
        last: i64,
    ) -> Result<Vec<u8>, ReadError> {
        self.query(&self.source, name, query, first, last).await
    }

    async fn query(
        &self,
        api: &Prometheus,
        name: &str,
        query: &str,
        first: i64,
        last: i64,
    ) -> Result<Vec<u8>, ReadError> {
        let result = api
            .query_range(query, first, last, self.config.interval)
            .await;
        self.account(name, result)
    }

    /// Counts a failed request; a request that got an answer is counted by [`Self::outcome`] once
    /// its body has been decoded, so an answer that does not decode is never an `ok`.
    fn account(
        &self,
        name: &str,
        result: Result<Answer, QueryError>,
    ) -> Result<Vec<u8>, ReadError> {
        let answer = result.map_err(|e| self.failed(name, e.into()))?;
        self.telemetry
            .query_duration
            .with_label_values(&[name])
            .observe(answer.elapsed.as_secs_f64());
        Ok(answer.body)
    }

    /// Counts the outcome of a query whose answer was decoded (and checked): `ok`, the engine's
    /// failure kind, or `error` for a body that does not decode or holds impossible values.
    fn outcome<T, E: Into<ReadFailure>>(
        &self,
        name: &str,
        decoded: Result<T, E>,
    ) -> Result<T, ReadError> {
        match decoded {
            Ok(v) => {
                self.telemetry
                    .queries
                    .with_label_values(&[name, "ok"])
                    .inc();
                Ok(v)
            }
            Err(e) => Err(self.failed(name, e.into())),
        }
    }

    /// Counts a failure of query `name` by kind and names the query in the error.
    fn failed(&self, name: &str, cause: ReadFailure) -> ReadError {
        let outcome = cause
            .failure()
            .map_or_else(|| "error".to_string(), QueryFailure::outcome);
        self.telemetry
            .queries
            .with_label_values(&[name, &outcome])
            .inc();
        ReadError {
            query: name.to_string(),
            cause,
        }
    }

    /// Finds the last tick this shard wrote and restores the energy counters as they were
    /// written at that tick.
    async fn resume(&mut self) -> Result<Option<i64>, ReadError> {
        let Some(last) = self.resume_point().await? else {
            return Ok(None);
        };
        let window_s = self.config.backfill_max_age.as_secs().max(1);
        let at = |metric: &str| format!("last_over_time({metric}[{window_s}s])");
        let (node_query, container_query) = (
            at(estimate::NODE_ENERGY_JOULES_TOTAL),
            at(estimate::CONTAINER_ENERGY_JOULES_TOTAL),
        );
        let (node, container) = tokio::try_join!(
            self.progress.query(&node_query, last),
            self.progress.query(&container_query, last),
        )
        .map_err(|e| ReadError {
            query: "energy_resume".to_string(),
            cause: e.into(),
        })?;
        let node = self.account("energy_resume", Ok(node))?;
        let container = self.account("energy_resume", Ok(container))?;
        let mut energy = Ledger::new(self.config.backfill_max_age.as_millis() as i64);
        energy.restore(
            &self.outcome("energy_resume", decode_matrix(&node))?,
            &self.outcome("energy_resume", decode_matrix(&container))?,
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_500;
    const HOUR: i64 = 3_600_000;

    #[test]
    fn a_read_error_names_the_query_and_keeps_the_failure_kind() {
        let partial =
            br#"{"status":"success","isPartial":true,"warnings":["store b down"],"data":{"resultType":"matrix","result":[]}}"#;
        let e = ReadError {
            query: "node_features".into(),
            cause: decode_answer(partial).unwrap_err().into(),
        };
        assert_eq!(
            e.cause.failure().map(QueryFailure::outcome).as_deref(),
            Some("partial")
        );
        assert_eq!(
            crate::error_chain(&e),
            "query node_features: partial PromQL answer refused: store b down"
        );
        let too_big = ReadError {
            query: "container_features".into(),
            cause: QueryError::from(QueryFailure::Status {
                status: 422,
                detail: "too many samples".into(),
            })
            .into(),
        };
        assert!(too_big
            .cause
            .failure()
            .is_some_and(QueryFailure::is_too_big));
        let json = ReadError {
            query: "progress".into(),
            cause: decode_matrix(b"{").unwrap_err().into(),
        };
        assert!(json.cause.failure().is_none());
        let text = crate::error_chain(&json);
        assert!(
            text.starts_with("query progress: decoding the PromQL answer: EOF"),
            "{text}"
        );
    }

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
