//! The test harness's daemons: a child process stopped when dropped ([`Guard`]), and [`start`],
//! which spawns a server with its output in a log file and waits until its readiness URL
//! answers. Prometheus 2 and 3, VictoriaMetrics, Thanos and Mimir all start through it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::wait_for;

/// A child process killed (SIGTERM, then SIGKILL) when dropped.
pub struct Guard {
    child: Option<Child>,
    name: String,
}

impl Guard {
    /// Wraps a spawned child.
    pub fn new(name: &str, child: Child) -> Guard {
        Guard {
            child: Some(child),
            name: name.to_string(),
        }
    }

    /// The name it was started under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// The child's exit status if it has exited (reaped here), `None` while it runs.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Waits up to `timeout` for the child to exit by itself (then terminates it); returns the
    /// exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.child.as_mut()?.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    return Some(status);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(_) => break,
            }
        }
        eprintln!("{} did not exit within {timeout:?}", self.name);
        self.terminate();
        None
    }

    /// Sends SIGTERM and waits up to 10 s; returns the exit status.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: kill(2) on a pid we spawned and have not reaped.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} ignored SIGTERM; killing", self.name);
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Spawns `command` with stdout and stderr in `log` and stdin closed.
pub fn spawn(name: &str, mut command: Command, log: &Path) -> anyhow::Result<Guard> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let child = command
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {name} ({:?})", command.get_program()))?;
    Ok(Guard::new(name, child))
}

/// [`spawn`], then waits up to `timeout` for `ready_url` to answer 2xx. Fails, with the log's
/// last lines, when it cannot start, exits first, or is not ready in time (the process is then
/// stopped).
pub fn start(
    name: &str,
    command: Command,
    log: &Path,
    ready_url: &str,
    timeout: Duration,
) -> anyhow::Result<Guard> {
    let mut guard = spawn(name, command, log)?;
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let mut exited = None;
    let ready = wait_for(timeout, || {
        if let Some(status) = guard.exited() {
            exited = Some(status);
            return Some(false);
        }
        let ok = http
            .get(ready_url)
            .send()
            .is_ok_and(|r| r.status().is_success());
        ok.then_some(true)
    });
    let tail = || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    match (ready, exited) {
        (Some(true), _) => Ok(guard),
        (_, Some(status)) => bail!(
            "{name} exited ({status}); last lines of {}:\n{}",
            log.display(),
            tail()
        ),
        _ => bail!(
            "{name} not ready at {ready_url} after {timeout:?}; last lines of {}:\n{}",
            log.display(),
            tail()
        ),
    }
}

/// Blocks SIGTERM and SIGINT in the calling thread (call it before any other thread starts) and
/// returns a waiter for them: a program that starts daemons, then waits for its stop signal
/// with [`StopSignals::wait`] and drops its [`Guard`]s, stops them all.
pub fn block_stop_signals() -> anyhow::Result<StopSignals> {
    // SAFETY: a zeroed sigset_t is initialised by sigemptyset before any other use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            bail!("pthread_sigmask: {}", std::io::Error::from_raw_os_error(rc));
        }
        Ok(StopSignals { set })
    }
}

/// SIGTERM and SIGINT, blocked by [`block_stop_signals`].
pub struct StopSignals {
    set: libc::sigset_t,
}

impl StopSignals {
    /// Waits for one of them.
    pub fn wait(&self) -> anyhow::Result<()> {
        let mut signal = 0;
        // SAFETY: sigwait on an initialised set that is blocked in this thread.
        let rc = unsafe { libc::sigwait(&self.set, &mut signal) };
        if rc != 0 {
            bail!("sigwait: {}", std::io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }
}
