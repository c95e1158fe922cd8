//! Helpers of the workload tests: the real binary as a child process, free ports, scraping.

#![allow(dead_code)]

use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_greenpipe-workload");

pub use greenpipe_test_support::free_port;

/// A child process killed on drop.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    pub fn spawn(args: &[&str]) -> Proc {
        let child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting greenpipe-workload");
        Proc { child }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGTERM, then the exit status and stdout.
    pub fn terminate(self) -> (std::process::ExitStatus, String) {
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(self.pid(), libc::SIGTERM);
        }
        self.wait()
    }

    pub fn wait(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().expect("waiting for the child");
        let mut out = String::new();
        if let Some(mut s) = self.child.stdout.take() {
            use std::io::Read;
            s.read_to_string(&mut out).expect("reading stdout");
        }
        (status, out)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until something listens on `port` (the server binds once its model is built).
pub fn wait_listening(port: u16, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET http://127.0.0.1:port/metrics` with a plain HTTP/1.1 request.
pub fn scrape(port: u16) -> String {
    use std::io::Read;
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connecting to /metrics");
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The value of the sample `name{labels}` (labels given as `k="v"` pieces, all required).
pub fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            let (series, _) = l.rsplit_once(' ').unwrap_or((l, ""));
            let bare = series.split('{').next().unwrap_or("");
            bare == name && labels.iter().all(|want| series.contains(want))
        })
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

/// `promtool check metrics` on the text: Ok or its complaints.
pub fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running promtool (Debian's prometheus package, scripts/setup.sh)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every JSON line of a campaign log.
pub fn windows(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The last stdout line as JSON (each subcommand prints its last window).
pub fn totals(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.lines().last().expect("a totals line")).expect("JSON totals")
}
