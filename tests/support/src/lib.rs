//! Test helpers that need nothing but std, shared by the end-to-end harness (greenpipe-tests
//! re-exports them) and the crates whose own tests start servers: free loopback ports and
//! waiting with a deadline.

use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 for a child process to listen on.
///
/// Not from the kernel's ephemeral range (`ip_local_port_range`): a port found by binding port 0
/// and released is free for the next outgoing connection too, and with Prometheus scraping every
/// second and the tests polling, one took an exporter's port between its release and the
/// exporter's bind (CI: "Address already in use"). Ports below the range are only ever used by
/// whoever binds them by number; a counter keeps this process from handing one out twice, and a
/// start that depends on the process id keeps two test processes apart.
pub fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let low = ephemeral_low.saturating_sub(12_000).max(1024);
    let span = ephemeral_low.saturating_sub(low);
    assert!(
        span >= 1000,
        "ip_local_port_range starts at {ephemeral_low}: no room for test ports below it"
    );
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = (low + (start + i) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {low}..{ephemeral_low}");
}

/// Polls `f` every 100 ms until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
