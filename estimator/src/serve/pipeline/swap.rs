//! Hot model swap: the model files are polled between batches, and a changed set is put in force
//! at the first tick of a batch, unless it cannot estimate a node the current set estimates.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use greenpipe_common::contract::outcome;
use greenpipe_common::model::ModelFile;
use tracing::{info, warn};

use super::Pipeline;
use crate::estimate::{estimate_tick, SkipReason};
use crate::models;
use crate::readout::{QuerySet, Tick};
use crate::telemetry::Telemetry;

/// A model set in force and the queries that read its inputs.
pub(super) struct Active {
    pub(super) models: Arc<ModelFile>,
    pub(super) queries: QuerySet,
}

impl Active {
    pub(super) fn new(models: Arc<ModelFile>, rate_window: Duration, matcher: &str) -> Active {
        let queries = queries_for(&[&models], rate_window, matcher);
        Active { models, queries }
    }
}

/// The queries reading every input of every model of `sets`, `matcher` (empty: none) in every
/// selector.
pub(super) fn queries_for(sets: &[&ModelFile], rate_window: Duration, matcher: &str) -> QuerySet {
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

impl Pipeline {
    /// Set it (from a SIGHUP handler) to have every model file read again at the next tick
    /// boundary, changed or not.
    pub fn reload_flag(&self) -> Arc<AtomicBool> {
        self.reload_requested.clone()
    }

    /// The model set in force.
    pub fn models(&self) -> Arc<ModelFile> {
        self.active_set().models.clone()
    }

    pub(super) fn active_set(&self) -> Arc<Active> {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Polls the model files (a few `stat`s); returns a changed model set, not yet in force.
    pub(super) fn poll_models(&self) -> Option<ModelFile> {
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
            .with_label_values(&[outcome::REFUSED])
            .inc();
        self.telemetry.model_reload_success.set(0);
    }

    /// Decides between the model set in force and a candidate on the first tick of a batch: the
    /// candidate is refused if it cannot estimate a node the current set estimates (a feature
    /// the node lacks). Returns the set to estimate the whole batch with.
    pub(super) fn choose(
        &self,
        current: &Arc<Active>,
        candidate: ModelFile,
        tick: &Tick,
    ) -> Arc<Active> {
        let now = estimate_tick(&current.models, tick, self.config.policy);
        let next = estimate_tick(&candidate, tick, self.config.policy);
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
            .with_label_values(&[outcome::APPLIED])
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
}

/// Sets the loaded-models gauge to exactly the models of `models`, by their versioned label.
pub(super) fn show_models(telemetry: &Telemetry, models: &ModelFile) {
    telemetry.models_loaded.reset();
    for m in &models.models {
        telemetry
            .models_loaded
            .with_label_values(&[&m.label()])
            .set(1.0);
    }
}
