//! Edge push: the exporter sends its own samples by Prometheus remote write 1.0
//! (`--push.remote-write-url`), for nodes behind NAT or on links that drop, where no Prometheus
//! can scrape them and a Prometheus per board costs too much memory. `/metrics` is still served.
//!
//! Data flow, one way: the sampler thread hands every tick (its [`MetricSet`] and the time it was
//! taken) to [`Handle::offer`]; the writer thread ([`writer`]) gathers `ticks_per_push` ticks,
//! encodes them ([`encode`]) and writes each request body as a segment file of the on-disk
//! [`buffer`] (fsync'd) before anything is sent; the sender task ([`sender`]) sends segments
//! oldest first and deletes each once the receiver acknowledged it. A link outage only grows the
//! buffer, up to `--push.buffer.max-age` and `--push.buffer.max-bytes`; what the bounds drop is
//! counted. A restart resends what is on disk.

pub mod buffer;
pub mod encode;
pub mod options;
mod sender;

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::Notify;
use tracing::warn;

use crate::metrics::MetricSet;
use buffer::{Buffer, BufferError, DropReason, Segment, Stats};
use encode::Pending;
pub use options::{PushConfig, PushFile, PushFlags, PushOptionsError};

/// The buffer, shared by the writer thread, the sender task and the self metrics.
pub type SharedBuffer = Arc<Mutex<Buffer>>;

/// Ticks the writer may be behind before a tick is dropped (and counted `queue_full`).
const QUEUE_TICKS: usize = 64;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What the sampler holds: where ticks go and where the push's self metrics come from.
#[derive(Clone)]
pub struct Handle {
    ticks: SyncSender<(i64, MetricSet)>,
    buffer: SharedBuffer,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("push::Handle").finish_non_exhaustive()
    }
}

impl Handle {
    /// Hands over a tick taken at `at_ms`. Never blocks the sampler: with the writer
    /// [`QUEUE_TICKS`] ticks behind, the tick is dropped and counted.
    pub fn offer(&self, at_ms: i64, set: MetricSet) {
        match self.ticks.try_send((at_ms, set)) {
            Ok(()) => {}
            Err(TrySendError::Full((_, set))) => self
                .lock()
                .count_drop(DropReason::QueueFull, set.len() as u64),
            // The writer stopped (shutdown): nothing is left to count it.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// The push's counters and gauges now.
    pub fn stats(&self) -> Stats {
        self.lock().stats()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The running push: the writer thread (joined by [`Push::finish`]) and the sender task.
pub struct Push {
    handle: Handle,
    writer: JoinHandle<()>,
}

impl Push {
    /// Opens the buffer (an unusable directory is an error naming it), starts the writer thread
    /// and spawns the sender on `runtime`.
    pub fn start(
        config: &PushConfig,
        node: &str,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Push, BufferError> {
        let buffer = Arc::new(Mutex::new(Buffer::open(config.buffer.clone(), now_ms())?));
        let wake = Arc::new(Notify::new());
        let (ticks, rx) = mpsc::sync_channel(QUEUE_TICKS);
        let writer = {
            let labels = Labels {
                node: node.to_string(),
                job: config.job.clone(),
                instance: config.instance.clone(),
            };
            let (buffer, wake, per_push) = (buffer.clone(), wake.clone(), config.ticks_per_push);
            std::thread::Builder::new()
                .name("push-writer".into())
                .spawn(move || writer(rx, per_push, labels, buffer, wake))
                .map_err(|source| BufferError::Dir {
                    path: config.buffer.dir.clone(),
                    what: "starting its writer thread",
                    source,
                })?
        };
        runtime.spawn(sender::run(
            config.endpoint.clone(),
            config.retry,
            buffer.clone(),
            wake,
        ));
        Ok(Push {
            handle: Handle { ticks, buffer },
            writer,
        })
    }

    /// The sampler's side.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Waits until the writer has put every tick handed over on disk; call once the sampler has
    /// stopped (and dropped its handle). What was not sent yet is resent by the next start.
    pub fn finish(self) {
        drop(self.handle);
        let _ = self.writer.join();
    }
}

struct Labels {
    node: String,
    job: String,
    instance: String,
}

/// Gathers ticks and writes them as segments, every `per_push` ticks and once more when the
/// sampler goes away.
fn writer(
    rx: Receiver<(i64, MetricSet)>,
    per_push: u32,
    labels: Labels,
    buffer: SharedBuffer,
    wake: Arc<Notify>,
) {
    let dir = buffer
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .limits()
        .dir
        .clone();
    let mut pending = Pending::default();
    let mut failing = false;
    loop {
        let open = match rx.recv() {
            Ok((at_ms, set)) => {
                pending.add(at_ms, set);
                true
            }
            Err(_) => false,
        };
        if open && pending.ticks() < per_push.max(1) {
            continue;
        }
        for body in pending.take_bodies(&labels.node, &labels.job, &labels.instance) {
            let lock = || buffer.lock().unwrap_or_else(|e| e.into_inner());
            let segment = Segment {
                seq: lock().reserve(),
                oldest_ms: body.oldest_ms,
                newest_ms: body.newest_ms,
                samples: body.samples,
                bytes: 0,
            };
            match Buffer::write_file(&dir, segment, &body.body) {
                Ok(segment) => {
                    failing = false;
                    lock().commit(segment, now_ms());
                    wake.notify_one();
                }
                Err(e) => {
                    if !failing {
                        warn!(error = %greenpipe_common::error_chain(&e), "push buffer not written; its samples are dropped");
                    }
                    failing = true;
                    lock().count_drop(DropReason::WriteError, body.samples);
                }
            }
        }
        if !open {
            return;
        }
    }
}
