//! Every GreenPipe program stops the same way: on SIGTERM (what Kubernetes sends before it kills
//! a pod) or SIGINT (Ctrl-C).
//!
//! The handlers are installed once, before the program starts its work, and the returned
//! [`Shutdown`] is awaited wherever the program can stop. A signal that arrives while it is busy
//! is kept for the next wait instead of being lost (a handler installed anew at every wait would
//! miss it, and the process would run on until it is killed).

use tokio::signal::unix::{signal, Signal, SignalKind};

/// The installed SIGTERM and SIGINT handlers.
#[derive(Debug)]
pub struct Shutdown {
    term: Signal,
    int: Signal,
}

/// Why the handlers could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("installing the {signal} handler")]
pub struct SignalError {
    /// `SIGTERM` or `SIGINT`.
    pub signal: &'static str,
    /// What the runtime said.
    #[source]
    pub source: std::io::Error,
}

impl Shutdown {
    /// Installs both handlers; call it inside a Tokio runtime.
    pub fn install() -> Result<Shutdown, SignalError> {
        let install = |kind, name| {
            signal(kind).map_err(|source| SignalError {
                signal: name,
                source,
            })
        };
        Ok(Shutdown {
            term: install(SignalKind::terminate(), "SIGTERM")?,
            int: install(SignalKind::interrupt(), "SIGINT")?,
        })
    }

    /// Resolves with the name of the first signal that arrives (or arrived since the last wait).
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_signal_sent_before_the_wait_is_not_lost() {
        let mut stop = Shutdown::install().unwrap();
        // SIGINT to this process: its handler is installed, so the default action (exit) is not
        // taken. It arrives before `recv` is awaited.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), stop.recv()).await;
        assert_eq!(got, Ok("SIGINT"));
    }
}
