//! A scrape target that serves fixed exposition text, standing in for sources that cannot run
//! on a test machine: a power meter (no meter hardware here) and kube-state-metrics (no
//! Kubernetes API server here). Everything else in the tests is real.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Serves `GET /metrics` with the current text until dropped.
pub struct StaticTarget {
    /// `127.0.0.1:PORT`, for a scrape config.
    pub address: String,
    body: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StaticTarget {
    /// Starts serving `body` (Prometheus text format).
    pub fn start(body: &str) -> std::io::Result<StaticTarget> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?.to_string();
        let body = Arc::new(Mutex::new(body.to_string()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let body = body.clone();
            let stop = stop.clone();
            std::thread::spawn(move || serve(listener, &body, &stop))
        };
        Ok(StaticTarget {
            address,
            body,
            stop,
            thread: Some(thread),
        })
    }

    /// Replaces the served text.
    pub fn set(&self, body: &str) {
        *self.body.lock().expect("body lock") = body.to_string();
    }
}

fn serve(listener: TcpListener, body: &Mutex<String>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let text = body.lock().expect("body lock").clone();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

impl Drop for StaticTarget {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
