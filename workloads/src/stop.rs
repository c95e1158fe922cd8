//! SIGTERM/SIGINT handling ([`greenpipe_common::shutdown::Shutdown`]): the signal sets a flag that every run loop polls, so the window in
//! progress is closed (and logged as incomplete) before the process exits, as Kubernetes'
//! termination grace period allows.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use greenpipe_common::shutdown::SignalError;

/// Set once a termination signal arrived.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    notify: Arc<tokio::sync::Notify>,
}

impl Stop {
    /// Installs the handlers (call inside the runtime).
    pub fn install() -> Result<Stop, SignalError> {
        let stop = Stop::default();
        let mut signals = greenpipe_common::shutdown::Shutdown::install()?;
        let s = stop.clone();
        tokio::spawn(async move {
            let signal = signals.recv().await;
            tracing::info!(signal, "closing the current window");
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
