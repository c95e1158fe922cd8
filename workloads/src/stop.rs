//! SIGTERM/SIGINT handling: the signal sets a flag that every run loop polls, so the window in
//! progress is closed (and logged as incomplete) before the process exits, as Kubernetes'
//! termination grace period allows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::signal::unix::SignalKind;

/// The OS refused a signal handler.
#[derive(Debug, thiserror::Error)]
#[error("installing the {signal} handler")]
pub struct StopError {
    pub signal: &'static str,
    #[source]
    pub source: std::io::Error,
}

/// Set once a termination signal arrived.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    notify: Arc<tokio::sync::Notify>,
}

impl Stop {
    /// Installs the handlers (call inside the runtime).
    pub fn install() -> Result<Stop, StopError> {
        let stop = Stop::default();
        let handler = |kind, signal| {
            tokio::signal::unix::signal(kind).map_err(|source| StopError { signal, source })
        };
        let mut term = handler(SignalKind::terminate(), "SIGTERM")?;
        let mut int = handler(SignalKind::interrupt(), "SIGINT")?;
        let s = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: closing the current window"),
                _ = int.recv() => tracing::info!("SIGINT: closing the current window"),
            }
            s.trigger();
        });
        Ok(stop)
    }

    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The flag itself, for blocking loops.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// Resolves once stopped.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }

    /// Sleeps `d` unless stopped first; returns false when stopped.
    pub async fn sleep(&self, d: std::time::Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => !self.is_set(),
            _ = self.wait() => false,
        }
    }
}
