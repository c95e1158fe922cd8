//! An RDTech UM meter on a pseudo-terminal, speaking the wire protocol byte for byte: it waits
//! for the request byte `0xF0` on the pty master and answers with the 130-byte frame built from
//! the values it was given. The exporter opens the pty's slave through a stable symlink (like
//! `/dev/rfcomm0`) with its ordinary serial code, so tests exercise the real path: termios setup,
//! request, bounded reads, decoding. Faults are scripted with [`Answer`]; unplugging closes the
//! pty and removes the link, replugging creates a new pty behind the same link.
//!
//! It lives in the library rather than under `tests/` so the end-to-end tests (another crate)
//! can use it, but only behind feature `fake-meters` (and in unit tests): a production build of
//! the exporter does not contain it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::usb_um::{encode, Frame, FRAME_LEN, REQUEST};

/// How the emulated meter answers a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The frame of the current values.
    Frame,
    /// Only the first `n` bytes of the frame.
    Short(usize),
    /// 130 bytes that are no frame at all.
    Garbage,
    /// A well-formed frame of these values (of another model, typically).
    Other(Frame),
    /// Nothing (a hung meter).
    Silent,
}

struct Script {
    frame: Frame,
    answer: Answer,
}

struct Pty {
    /// Closed on unplug, which is what the exporter's side sees as the device going away.
    _master: File,
    /// Held open so the master never sees a hang-up while the exporter reopens the slave.
    _slave: OwnedFd,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// A UM meter behind a symlink to a pty.
pub struct Emulator {
    link: PathBuf,
    script: Arc<Mutex<Script>>,
    requests: Arc<AtomicU64>,
    pty: Option<Pty>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("link", &self.link)
            .finish()
    }
}

fn open_pty() -> std::io::Result<(OwnedFd, OwnedFd, PathBuf)> {
    let last = std::io::Error::last_os_error;
    // O_CLOEXEC on both ends: a child process (the exporter under test, Prometheus) must not
    // inherit the master, or closing it here would not hang up the line.
    // SAFETY: plain syscalls on an fd we own; ptsname_r gets the buffer's real length.
    let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if master < 0 {
        return Err(last());
    }
    // SAFETY: the fd was just returned by posix_openpt and is owned by nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(master) };
    let mut name = [0u8; 128];
    // SAFETY: as above; the buffer is writable for its whole length, which is passed.
    unsafe {
        if libc::grantpt(master.as_raw_fd()) != 0 || libc::unlockpt(master.as_raw_fd()) != 0 {
            return Err(last());
        }
        let rc = libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr().cast(), name.len());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
    }
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    let path = PathBuf::from(String::from_utf8_lossy(&name[..end]).into_owned());
    let slave = File::options()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&path)?;
    let slave = OwnedFd::from(slave);
    // Raw mode: the frame's bytes must not be translated by the line discipline.
    // SAFETY: termios is plain data filled by tcgetattr before use.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(slave.as_raw_fd(), &mut t) == 0 {
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t);
        }
    }
    Ok((master, slave, path))
}

/// Waits up to 50 ms for the fd to be readable.
fn readable(fd: &File) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, 50) };
    n > 0 && p.revents & libc::POLLIN != 0
}

fn serve(
    mut master: File,
    script: Arc<Mutex<Script>>,
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        if !readable(&master) {
            continue;
        }
        let n = match master.read(&mut buf) {
            Ok(0) | Err(_) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            Ok(n) => n,
        };
        for _ in buf[..n].iter().filter(|b| **b == REQUEST) {
            requests.fetch_add(1, Ordering::SeqCst);
            let reply: Vec<u8> = {
                let s = script.lock().unwrap_or_else(|e| e.into_inner());
                match &s.answer {
                    Answer::Frame => encode(&s.frame).to_vec(),
                    Answer::Short(k) => encode(&s.frame)[..(*k).min(FRAME_LEN)].to_vec(),
                    Answer::Garbage => (0..FRAME_LEN).map(|i| (i * 37 % 251) as u8).collect(),
                    Answer::Other(f) => encode(f).to_vec(),
                    Answer::Silent => Vec::new(),
                }
            };
            let _ = master.write_all(&reply);
        }
    }
}

impl Emulator {
    /// Plugs in a meter with `frame`'s values behind `link`.
    pub fn start(link: &Path, frame: Frame) -> std::io::Result<Emulator> {
        let mut e = Emulator {
            link: link.to_path_buf(),
            script: Arc::new(Mutex::new(Script {
                frame,
                answer: Answer::Frame,
            })),
            requests: Arc::default(),
            pty: None,
        };
        e.replug()?;
        Ok(e)
    }

    /// Changes the values of the next frames.
    pub fn set_frame(&self, frame: Frame) {
        self.script.lock().unwrap_or_else(|e| e.into_inner()).frame = frame;
    }

    /// Edits the values of the next frames.
    pub fn update(&self, edit: impl FnOnce(&mut Frame)) {
        edit(&mut self.script.lock().unwrap_or_else(|e| e.into_inner()).frame);
    }

    /// Changes how the next requests are answered.
    pub fn set_answer(&self, answer: Answer) {
        self.script.lock().unwrap_or_else(|e| e.into_inner()).answer = answer;
    }

    /// Request bytes received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Whether the meter is plugged in.
    pub fn plugged(&self) -> bool {
        self.pty.is_some()
    }

    /// Pulls the plug: closes the pty (the exporter's next read fails) and removes the link.
    pub fn unplug(&mut self) {
        if let Some(mut pty) = self.pty.take() {
            pty.stop.store(true, Ordering::Relaxed);
            if let Some(t) = pty.thread.take() {
                let _ = t.join();
            }
        }
        let _ = std::fs::remove_file(&self.link);
    }

    /// Plugs the meter back in on a fresh pty behind the same link.
    pub fn replug(&mut self) -> std::io::Result<()> {
        self.unplug();
        let (master, slave, path) = open_pty()?;
        std::os::unix::fs::symlink(&path, &self.link)?;
        let master = File::from(master);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let master = master.try_clone()?;
            let (script, requests, stop) =
                (self.script.clone(), self.requests.clone(), stop.clone());
            std::thread::Builder::new()
                .name("um-emulator".into())
                .spawn(move || serve(master, script, requests, stop))?
        };
        self.pty = Some(Pty {
            _master: master,
            _slave: slave,
            stop,
            thread: Some(thread),
        });
        Ok(())
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.unplug();
    }
}
