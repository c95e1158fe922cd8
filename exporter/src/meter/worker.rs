//! One reader thread per channel, triggered by the sampler's tick.
//!
//! The sampler asks every channel for a reading at the start of the meter collector's run and
//! then waits for all answers until one shared deadline. A device that hangs past the deadline
//! costs that tick at most the timeout; its thread stays blocked on its own and the next request
//! is answered once it is free again. After a failure the thread leaves the device alone for a
//! growing while (exponential backoff), so a missing meter is reopened every few seconds, not
//! hammered on every tick.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use super::{Channel, Kind, Meter, ReadError, Reading};

/// What one request produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A reading, taken at the given instant.
    Good(Reading, Instant),
    /// The read failed.
    Failed(ReadError),
    /// Not attempted: backing off after failures.
    BackingOff,
}

/// Delay before the next attempt after `failures` consecutive failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// Upper bound.
    pub max: Duration,
}

impl Backoff {
    /// Delay after `failures` (>= 1) consecutive failures: base, 2·base, 4·base, ... up to max.
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(16);
        self.base.saturating_mul(1 << doublings).min(self.max)
    }
}

#[derive(Default)]
struct State {
    requested: u64,
    answered: u64,
    outcome: Option<Outcome>,
    stop: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// A channel's reader thread and its mailbox.
pub struct Worker {
    /// Value of the `meter` label.
    pub name: String,
    /// Kind of meter.
    pub kind: Kind,
    shared: Shared,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("name", &self.name).finish()
    }
}

impl Worker {
    /// Starts the thread of one channel.
    pub fn spawn(channel: Channel, backoff: Backoff) -> std::io::Result<Worker> {
        let shared: Shared = Arc::default();
        let theirs = shared.clone();
        let Channel { name, kind, meter } = channel;
        thread::Builder::new()
            .name(format!("meter-{name}"))
            // Reading a frame or a small JSON body needs little stack; a Pi has little memory.
            .stack_size(256 * 1024)
            .spawn(move || run(meter, theirs, backoff))?;
        Ok(Worker { name, kind, shared })
    }

    /// Asks for reading number `seq` (strictly increasing). Does not wait.
    pub fn request(&self, seq: u64) {
        let mut s = lock(&self.shared);
        s.requested = seq;
        self.shared.1.notify_all();
    }

    /// Waits until reading `seq` is done or `deadline` passes (`None`: still running).
    pub fn wait(&self, seq: u64, deadline: Instant) -> Option<Outcome> {
        let mut s = lock(&self.shared);
        while s.answered < seq {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            s = self
                .shared
                .1
                .wait_timeout(s, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if s.answered == seq {
            s.outcome.take()
        } else {
            None
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Not joined: a thread blocked in a device read must not block shutdown. It sees `stop`
        // when the read returns.
        lock(&self.shared).stop = true;
        self.shared.1.notify_all();
    }
}

fn run(mut meter: Box<dyn Meter>, shared: Shared, backoff: Backoff) {
    let mut failures = 0u32;
    let mut next_attempt = Instant::now();
    loop {
        let seq = {
            let mut s = lock(&shared);
            while !s.stop && s.requested <= s.answered {
                s = shared.1.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            if s.stop {
                return;
            }
            s.requested
        };
        let started = Instant::now();
        // A tick that lands a hair before the attempt time still attempts: the backoff is a
        // spacing between attempts, not a promise to skip a whole tick.
        let outcome = if started + backoff.base / 4 < next_attempt {
            Outcome::BackingOff
        } else {
            match meter.read() {
                Ok(reading) => {
                    failures = 0;
                    Outcome::Good(reading, started)
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    next_attempt = started + backoff.delay(failures);
                    Outcome::Failed(e)
                }
            }
        };
        let mut s = lock(&shared);
        s.answered = seq;
        s.outcome = Some(outcome);
        shared.1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::Reason;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Script {
        calls: Arc<AtomicU32>,
        fail: bool,
        sleep: Duration,
    }

    impl Meter for Script {
        fn read(&mut self) -> Result<Reading, ReadError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            thread::sleep(self.sleep);
            if self.fail {
                Err(ReadError::new(Reason::Unplugged, "gone"))
            } else {
                Ok(Reading {
                    power_watts: Some(1.0),
                    ..Reading::default()
                })
            }
        }
    }

    fn worker(fail: bool, sleep: Duration, backoff: Backoff) -> (Worker, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let meter = Script {
            calls: calls.clone(),
            fail,
            sleep,
        };
        let channel = Channel {
            name: "t".into(),
            kind: Kind::of(&crate::meter::hwmon::KIND),
            meter: Box::new(meter),
        };
        (Worker::spawn(channel, backoff).unwrap(), calls)
    }

    #[test]
    fn backoff_doubles_up_to_max() {
        let b = Backoff {
            base: Duration::from_millis(500),
            max: Duration::from_secs(30),
        };
        let d: Vec<_> = (1..=9).map(|n| b.delay(n).as_millis()).collect();
        assert_eq!(d, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn answers_requests_in_order() {
        let (w, calls) = worker(
            false,
            Duration::ZERO,
            Backoff {
                base: Duration::from_millis(1),
                max: Duration::from_millis(1),
            },
        );
        for seq in 1..=3 {
            w.request(seq);
            let far = Instant::now() + Duration::from_secs(60);
            assert!(matches!(w.wait(seq, far), Some(Outcome::Good(..))));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_hanging_read_is_left_behind_and_later_answers_belong_to_later_requests() {
        let (w, _) = worker(
            false,
            Duration::from_millis(300),
            Backoff {
                base: Duration::from_millis(1),
                max: Duration::from_millis(1),
            },
        );
        w.request(1);
        // The deadline passes while the read sleeps: no outcome for this request.
        assert_eq!(w.wait(1, Instant::now()), None);
        w.request(2);
        let far = Instant::now() + Duration::from_secs(60);
        assert!(matches!(w.wait(2, far), Some(Outcome::Good(..))));
    }

    #[test]
    fn failures_back_off_instead_of_retrying_every_request() {
        let (w, calls) = worker(
            true,
            Duration::ZERO,
            Backoff {
                base: Duration::from_secs(3600),
                max: Duration::from_secs(3600),
            },
        );
        let far = Instant::now() + Duration::from_secs(60);
        w.request(1);
        assert!(matches!(w.wait(1, far), Some(Outcome::Failed(_))));
        w.request(2);
        assert_eq!(w.wait(2, far), Some(Outcome::BackingOff));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
