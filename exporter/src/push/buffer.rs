//! The on-disk buffer of pushed samples: a directory of segment files, each one remote-write
//! request body (raw snappy of a `prometheus.WriteRequest`, exactly what is sent), written and
//! fsync'd before it is sent and deleted once the receiver acknowledged it.
//!
//! A segment's file name carries what the buffer needs to know without reading it:
//! `<sequence>-<oldest ms>-<newest ms>-<samples>.rw`. The sequence orders the segments: they are
//! sent strictly oldest first, one at a time, so a receiver without an out-of-order window
//! (Prometheus' TSDB) accepts every sample. A file is written as `<name>.tmp`, fsync'd, renamed
//! and the directory fsync'd, so a crash leaves either the whole segment or a `.tmp` that the
//! next start deletes.
//!
//! Bounds: a segment whose newest sample is older than `max_age` is dropped, and while the
//! files add up to more than `max_bytes` the oldest is dropped; either way its samples are
//! counted by reason. The segment being sent is never dropped under the sender's feet (the
//! bytes may exceed the bound by that one segment for the length of one request).
//!
//! At start the directory is read back: every segment is decoded once, and one that does not
//! decode (a torn disk, a foreign file with our name pattern) is logged with its path, counted
//! as `corrupt` and deleted, never sent and never a panic.

use std::collections::VecDeque;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use super::options::BufferLimits;

/// Why samples left the buffer unsent (`reason` of the dropped-samples counter), declared with
/// its label values in the contract.
pub use greenpipe_common::contract::reason::PushDropped as DropReason;

/// One segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Position in send order.
    pub seq: u64,
    /// Time of its oldest sample, ms since the Unix epoch.
    pub oldest_ms: i64,
    /// Time of its newest sample.
    pub newest_ms: i64,
    /// Samples in it.
    pub samples: u64,
    /// Size of the file.
    pub bytes: u64,
}

impl Segment {
    /// The file name.
    pub fn file_name(&self) -> String {
        format!(
            "{:020}-{}-{}-{}.rw",
            self.seq, self.oldest_ms, self.newest_ms, self.samples
        )
    }

    /// Parses a file name written by [`Segment::file_name`] (the size is the file's).
    fn parse(name: &str, bytes: u64) -> Option<Segment> {
        let stem = name.strip_suffix(".rw")?;
        let mut parts = stem.split('-');
        let seg = Segment {
            seq: parts.next()?.parse().ok()?,
            oldest_ms: parts.next()?.parse().ok()?,
            newest_ms: parts.next()?.parse().ok()?,
            samples: parts.next()?.parse().ok()?,
            bytes,
        };
        parts.next().is_none().then_some(seg)
    }
}

/// Counters and gauges of the push, read into the exporter's self metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Samples acknowledged by the receiver.
    pub sent: u64,
    /// Samples dropped, by [`DropReason`] (indexed as [`DropReason::ALL`]).
    pub dropped: [u64; 6],
    /// Attempts that failed and will be retried (network errors, 5xx, 429).
    pub failures: u64,
    /// Whether the last attempt reached the receiver and got an answer it meant (2xx or a
    /// refusal); `None` before the first.
    pub receiver_up: Option<bool>,
    /// Segment files on disk.
    pub segments: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Oldest sample not acknowledged yet, or the newest handed over when none is waiting;
    /// `None` before the first.
    pub oldest_unsent_ms: Option<i64>,
}

/// Why the buffer directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BufferError {
    /// Creating, listing or writing to the directory failed.
    #[error("push buffer directory {}: {what}", path.display())]
    Dir {
        /// The directory or file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The buffer's index of the directory; the files are the truth, this is their order and sizes.
#[derive(Debug)]
pub struct Buffer {
    limits: BufferLimits,
    segments: VecDeque<Segment>,
    next_seq: u64,
    in_flight: Option<u64>,
    newest_ms: Option<i64>,
    stats: Stats,
}

impl Buffer {
    /// Opens (creating) the directory, deletes unfinished `.tmp` files, checks every segment
    /// left by an earlier run and applies the bounds at `now_ms`.
    pub fn open(limits: BufferLimits, now_ms: i64) -> Result<Buffer, BufferError> {
        let dir = limits.dir.clone();
        let io = |what| {
            let path = dir.clone();
            move |source| BufferError::Dir { path, what, source }
        };
        fs::create_dir_all(&dir).map_err(io("creating"))?;
        // Writable now, not at the first tick: a read-only mount is a start-up error.
        let probe = dir.join(".write-test");
        fs::write(&probe, b"").map_err(io("writing"))?;
        let _ = fs::remove_file(&probe);
        let mut buffer = Buffer {
            limits,
            segments: VecDeque::new(),
            next_seq: 0,
            in_flight: None,
            newest_ms: None,
            stats: Stats::default(),
        };
        let mut found = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io("listing"))? {
            let entry = entry.map_err(io("listing"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.ends_with(".tmp") {
                info!(file = %path.display(), "deleting an unfinished push segment");
                let _ = fs::remove_file(&path);
                continue;
            }
            let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
            match Segment::parse(&name, bytes) {
                Some(seg) => found.push(seg),
                None if name.starts_with('.') => {}
                None => warn!(file = %path.display(), "not a push segment; left alone"),
            }
        }
        found.sort_by_key(|s| s.seq);
        for seg in found {
            buffer.next_seq = buffer.next_seq.max(seg.seq + 1);
            let path = buffer.path(&seg);
            let check = fs::read(&path).map_err(|e| e.to_string()).and_then(|body| {
                greenpipe_remote_write::decode(&body)
                    .map(|_| ())
                    .map_err(|e| greenpipe_common::error_chain(&e))
            });
            match check {
                Ok(()) => {
                    buffer.newest_ms =
                        Some(buffer.newest_ms.unwrap_or(i64::MIN).max(seg.newest_ms));
                    buffer.segments.push_back(seg);
                }
                Err(why) => {
                    warn!(file = %path.display(), error = %why, samples = seg.samples,
                        "push segment does not decode; dropping it");
                    buffer.count_drop(DropReason::Corrupt, seg.samples);
                    let _ = fs::remove_file(&path);
                }
            }
        }
        if !buffer.segments.is_empty() {
            let samples: u64 = buffer.segments.iter().map(|s| s.samples).sum();
            info!(segments = buffer.segments.len(), samples, dir = %dir.display(),
                "resending the push buffer left by an earlier run");
        }
        buffer.enforce(now_ms);
        Ok(buffer)
    }

    /// The limits in force.
    pub fn limits(&self) -> &BufferLimits {
        &self.limits
    }

    fn path(&self, seg: &Segment) -> PathBuf {
        self.limits.dir.join(seg.file_name())
    }

    /// The next sequence number; the writer names its next segment with it.
    pub fn reserve(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Writes one segment file (outside the lock the buffer is shared under: this is the
    /// fsync), returning the segment with its size.
    pub fn write_file(dir: &Path, mut seg: Segment, body: &[u8]) -> Result<Segment, BufferError> {
        let name = seg.file_name();
        let path = dir.join(&name);
        let tmp = dir.join(format!("{name}.tmp"));
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| BufferError::Dir { path, what, source }
        };
        let mut file = fs::File::create(&tmp).map_err(io("creating", &tmp))?;
        file.write_all(body).map_err(io("writing", &tmp))?;
        file.sync_all().map_err(io("syncing", &tmp))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(io("renaming", &tmp))?;
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("syncing", dir))?;
        seg.bytes = body.len() as u64;
        Ok(seg)
    }

    /// Adds a segment written by [`Buffer::write_file`] and applies the bounds at `now_ms`.
    pub fn commit(&mut self, seg: Segment, now_ms: i64) {
        self.newest_ms = Some(self.newest_ms.unwrap_or(i64::MIN).max(seg.newest_ms));
        self.segments.push_back(seg);
        self.enforce(now_ms);
    }

    /// [`Buffer::reserve`], [`Buffer::write_file`] and [`Buffer::commit`] in one (tests, and
    /// callers that hold the buffer alone).
    pub fn append(
        &mut self,
        body: &[u8],
        oldest_ms: i64,
        newest_ms: i64,
        samples: u64,
        now_ms: i64,
    ) -> Result<(), BufferError> {
        let seg = Segment {
            seq: self.reserve(),
            oldest_ms,
            newest_ms,
            samples,
            bytes: 0,
        };
        let seg = Buffer::write_file(&self.limits.dir, seg, body)?;
        self.commit(seg, now_ms);
        Ok(())
    }

    /// Counts samples that never reached the buffer.
    pub fn count_drop(&mut self, reason: DropReason, samples: u64) {
        self.stats.dropped[reason as usize] += samples;
    }

    /// Drops what is too old or too much, oldest first, never the segment in flight.
    pub fn enforce(&mut self, now_ms: i64) {
        let cutoff = now_ms.saturating_sub(self.limits.max_age.as_millis() as i64);
        let mut i = 0;
        while i < self.segments.len() {
            let seg = self.segments[i];
            if Some(seg.seq) == self.in_flight {
                i += 1;
                continue;
            }
            let reason = if seg.newest_ms < cutoff {
                DropReason::MaxAge
            } else if self.bytes() > self.limits.max_bytes {
                DropReason::MaxBytes
            } else {
                break;
            };
            warn!(file = %self.path(&seg).display(), samples = seg.samples, reason = reason.as_str(),
                "dropping unsent push samples");
            self.remove(i);
            self.count_drop(reason, seg.samples);
        }
    }

    fn remove(&mut self, index: usize) {
        if let Some(seg) = self.segments.remove(index) {
            if let Err(e) = fs::remove_file(self.path(&seg)) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    warn!(file = %self.path(&seg).display(), error = %e, "deleting a push segment");
                }
            }
        }
    }

    fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// The oldest segment, marked in flight until [`Buffer::ack`], [`Buffer::reject`] or
    /// [`Buffer::release`]; its file's path.
    pub fn begin(&mut self) -> Option<(Segment, PathBuf)> {
        let seg = *self.segments.front()?;
        self.in_flight = Some(seg.seq);
        Some((seg, self.path(&seg)))
    }

    fn finish(&mut self, seq: u64) -> Option<Segment> {
        if self.in_flight == Some(seq) {
            self.in_flight = None;
        }
        let index = self.segments.iter().position(|s| s.seq == seq)?;
        let seg = self.segments[index];
        self.remove(index);
        Some(seg)
    }

    /// The receiver stored segment `seq`: delete it, count its samples sent.
    pub fn ack(&mut self, seq: u64) {
        if let Some(seg) = self.finish(seq) {
            self.stats.sent += seg.samples;
        }
        self.stats.receiver_up = Some(true);
    }

    /// The receiver refused segment `seq` for good (or its file is unreadable): delete it,
    /// count its samples dropped.
    pub fn reject(&mut self, seq: u64, reason: DropReason) {
        if let Some(seg) = self.finish(seq) {
            self.count_drop(reason, seg.samples);
        }
        if reason == DropReason::Rejected {
            self.stats.receiver_up = Some(true);
        }
    }

    /// Sending segment `seq` failed and will be retried: it goes back to the head of the queue
    /// (where the bounds may now drop it).
    pub fn release(&mut self, seq: u64, now_ms: i64) {
        if self.in_flight == Some(seq) {
            self.in_flight = None;
        }
        self.stats.failures += 1;
        self.stats.receiver_up = Some(false);
        self.enforce(now_ms);
    }

    /// The counters and gauges now.
    pub fn stats(&self) -> Stats {
        Stats {
            segments: self.segments.len() as u64,
            bytes: self.bytes(),
            oldest_unsent_ms: self
                .segments
                .front()
                .map(|s| s.oldest_ms)
                .or(self.newest_ms),
            ..self.stats.clone()
        }
    }

    /// Segments waiting, oldest first (tests).
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenpipe_remote_write::{encode, Sample, TimeSeries};
    use std::time::Duration;

    fn limits(dir: &Path, max_age: Duration, max_bytes: u64) -> BufferLimits {
        BufferLimits {
            dir: dir.to_path_buf(),
            max_age,
            max_bytes,
        }
    }

    fn body(t: i64, n: usize) -> Vec<u8> {
        let series = (0..n)
            .map(|i| {
                let mut ts = TimeSeries::new("m", &[("i", &i.to_string())]);
                ts.samples.push(Sample {
                    value: t as f64,
                    timestamp: t,
                });
                ts
            })
            .collect();
        encode(series)
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const T0: i64 = 1_790_000_000_000;

    #[test]
    fn segments_leave_oldest_first_and_acks_delete_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Buffer::open(limits(dir.path(), HOUR, 1 << 30), T0).unwrap();
        for k in 0..5 {
            let t = T0 + k * 1000;
            b.append(&body(t, 3), t, t, 3, t).unwrap();
        }
        let mut seen = Vec::new();
        while let Some((seg, path)) = b.begin() {
            let got = greenpipe_remote_write::decode(&fs::read(&path).unwrap()).unwrap();
            seen.push(got.timeseries[0].samples[0].timestamp);
            assert_eq!(seg.oldest_ms, seen[seen.len() - 1]);
            b.ack(seg.seq);
            assert!(!path.exists(), "acknowledged segments are deleted");
        }
        assert_eq!(seen, (0..5).map(|k| T0 + k * 1000).collect::<Vec<_>>());
        let stats = b.stats();
        assert_eq!((stats.sent, stats.segments, stats.bytes), (15, 0, 0));
        assert_eq!(
            stats.oldest_unsent_ms,
            Some(T0 + 4000),
            "caught up: the newest"
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_failed_send_keeps_the_segment_at_the_head() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Buffer::open(limits(dir.path(), HOUR, 1 << 30), T0).unwrap();
        b.append(&body(T0, 1), T0, T0, 1, T0).unwrap();
        b.append(&body(T0 + 1000, 1), T0 + 1000, T0 + 1000, 1, T0 + 1000)
            .unwrap();
        let (first, _) = b.begin().unwrap();
        b.release(first.seq, T0 + 1000);
        assert_eq!(b.begin().unwrap().0, first, "the same segment again");
        b.reject(first.seq, DropReason::Rejected);
        let stats = b.stats();
        assert_eq!(stats.failures, 1);
        assert_eq!(stats.dropped[DropReason::Rejected as usize], 1);
        assert_eq!(b.begin().unwrap().0.oldest_ms, T0 + 1000);
    }

    #[test]
    fn past_max_age_the_oldest_are_dropped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Buffer::open(limits(dir.path(), Duration::from_secs(10), 1 << 30), T0).unwrap();
        for k in 0..20 {
            let t = T0 + k * 1000;
            b.append(&body(t, 2), t, t, 2, t).unwrap();
        }
        // At T0 + 19 s, samples before T0 + 9 s are past 10 s.
        let left: Vec<i64> = b.segments().map(|s| s.oldest_ms).collect();
        assert_eq!(left, (9..20).map(|k| T0 + k * 1000).collect::<Vec<_>>());
        assert_eq!(b.stats().dropped[DropReason::MaxAge as usize], 18);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 11);
    }

    #[test]
    fn over_max_bytes_the_oldest_are_dropped_but_not_the_one_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let one = body(T0, 10).len() as u64;
        let mut b = Buffer::open(limits(dir.path(), HOUR, 3 * one + one / 2), T0).unwrap();
        b.append(&body(T0, 10), T0, T0, 10, T0).unwrap();
        let (in_flight, _) = b.begin().unwrap();
        for k in 1..6 {
            let t = T0 + k * 1000;
            b.append(&body(t, 10), t, t, 10, t).unwrap();
        }
        let left: Vec<i64> = b.segments().map(|s| s.oldest_ms).collect();
        assert_eq!(left, [T0, T0 + 4000, T0 + 5000], "the one in flight stays");
        assert_eq!(b.stats().dropped[DropReason::MaxBytes as usize], 30);
        b.ack(in_flight.seq);
        assert!(b.stats().bytes <= 3 * one + one / 2);
        assert_eq!(b.stats().sent, 10);
    }

    #[test]
    fn a_restart_resends_what_is_on_disk_in_order() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut b = Buffer::open(limits(dir.path(), HOUR, 1 << 30), T0).unwrap();
            for k in 0..3 {
                let t = T0 + k * 1000;
                b.append(&body(t, 1), t, t, 1, t).unwrap();
            }
            let (seg, _) = b.begin().unwrap();
            b.ack(seg.seq);
        }
        // A crash between create and rename leaves a .tmp: deleted, not sent.
        fs::write(
            dir.path().join("00000000000000000099-1-1-1.rw.tmp"),
            b"half",
        )
        .unwrap();
        let mut b = Buffer::open(limits(dir.path(), HOUR, 1 << 30), T0 + 3000).unwrap();
        let left: Vec<i64> = b.segments().map(|s| s.oldest_ms).collect();
        assert_eq!(left, [T0 + 1000, T0 + 2000]);
        assert!(!dir
            .path()
            .join("00000000000000000099-1-1-1.rw.tmp")
            .exists());
        // New segments are numbered after the old ones, so they go after them.
        b.append(&body(T0 + 3000, 1), T0 + 3000, T0 + 3000, 1, T0 + 3000)
            .unwrap();
        let mut order = Vec::new();
        while let Some((seg, _)) = b.begin() {
            order.push(seg.oldest_ms);
            b.ack(seg.seq);
        }
        assert_eq!(order, [T0 + 1000, T0 + 2000, T0 + 3000]);
    }

    #[test]
    fn a_corrupt_segment_is_counted_and_skipped_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut b = Buffer::open(limits(dir.path(), HOUR, 1 << 30), T0).unwrap();
            b.append(&body(T0, 4), T0, T0, 4, T0).unwrap();
            b.append(&body(T0 + 1000, 4), T0 + 1000, T0 + 1000, 4, T0 + 1000)
                .unwrap();
        }
        let first = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .min()
            .unwrap();
        fs::write(&first, b"\xff\x00 torn write").unwrap();
        let logs = capture_logs(|| {
            let b = Buffer::open(limits(dir.path(), HOUR, 1 << 30), T0 + 2000).unwrap();
            assert_eq!(b.stats().dropped[DropReason::Corrupt as usize], 4);
            let left: Vec<i64> = b.segments().map(|s| s.oldest_ms).collect();
            assert_eq!(left, [T0 + 1000]);
        });
        let name = first.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            logs.contains(&name) && logs.contains("does not decode"),
            "{logs}"
        );
        assert!(!first.exists());
    }

    #[test]
    fn an_unusable_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        fs::write(&file, b"").unwrap();
        let err = Buffer::open(limits(&file.join("push"), HOUR, 1), T0).unwrap_err();
        let text = greenpipe_common::error_chain(&err);
        assert!(text.contains("a-file/push"), "{text}");
    }

    #[test]
    fn file_names_round_trip() {
        let seg = Segment {
            seq: 7,
            oldest_ms: T0,
            newest_ms: T0 + 5,
            samples: 12,
            bytes: 99,
        };
        assert_eq!(Segment::parse(&seg.file_name(), 99), Some(seg));
        assert_eq!(Segment::parse("7-1-2.rw", 1), None);
        assert_eq!(Segment::parse("7-1-2-3-4.rw", 1), None);
        assert_eq!(Segment::parse("notes.txt", 1), None);
    }

    /// Runs `f` with a subscriber that keeps the log text.
    fn capture_logs(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8_lossy(&sink.0.lock().unwrap()).into_owned();
        text
    }
}
