//! The network peer of the network and request-loop benchmarks: a TCP echo server and a UDP
//! echo socket on the same port (`greenpipe-workload peer` on another node, or in-process on
//! loopback when `--peer` is not given).
//!
//! TCP connections carry either plain echo traffic or, for the request loop, framed requests:
//! a connection whose first byte is [`REQUEST_MAGIC`] is answered with [`answer`] per frame.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// First byte of a request-loop connection.
pub const REQUEST_MAGIC: u8 = 0xfe;

/// Why the peer could not start; each names the address (the `--listen-address` of
/// `greenpipe-workload peer`, or the loopback one a benchmark asked for).
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("peer TCP {addr}")]
    BindTcp {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("peer TCP {addr}: reading the bound address")]
    BoundAddr {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("peer UDP {addr}")]
    BindUdp {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("peer UDP {addr}: setting the read timeout")]
    UdpTimeout {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("peer {addr}: starting thread {thread}")]
    Thread {
        addr: SocketAddr,
        thread: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// A running peer; stops its threads when dropped.
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// Binds TCP and UDP on `addr` (port 0: any free one, the same for both) and serves in
/// background threads.
pub fn spawn(addr: &str) -> Result<Running, PeerError> {
    let listener = TcpListener::bind(addr).map_err(|source| PeerError::BindTcp {
        addr: addr.to_string(),
        source,
    })?;
    let bound = listener
        .local_addr()
        .map_err(|source| PeerError::BoundAddr {
            addr: addr.to_string(),
            source,
        })?;
    let udp = UdpSocket::bind(bound).map_err(|source| PeerError::BindUdp {
        addr: bound,
        source,
    })?;
    udp.set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|source| PeerError::UdpTimeout {
            addr: bound,
            source,
        })?;
    let thread = |thread| {
        move |source| PeerError::Thread {
            addr: bound,
            thread,
            source,
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::Builder::new()
        .name("peer-udp".into())
        .spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !s.load(Ordering::Relaxed) {
                if let Ok((n, from)) = udp.recv_from(&mut buf) {
                    let _ = udp.send_to(&buf[..n], from);
                }
            }
        })
        .map_err(thread("peer-udp"))?;
    let s = stop.clone();
    std::thread::Builder::new()
        .name("peer-tcp".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s = s.clone();
                let _ = std::thread::Builder::new()
                    .name("peer-conn".into())
                    .spawn(move || serve_connection(conn, s));
            }
        })
        .map_err(thread("peer-tcp"))?;
    Ok(Running { addr: bound, stop })
}

fn serve_connection(mut conn: TcpStream, stop: Arc<AtomicBool>) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
    let mut first = [0u8; 1];
    loop {
        match conn.read(&mut first) {
            Ok(0) => return,
            Ok(_) => break,
            Err(_) if !stop.load(Ordering::Relaxed) => continue,
            Err(_) => return,
        }
    }
    if first[0] == REQUEST_MAGIC {
        let _ = request_loop(&mut conn, &stop);
        return;
    }
    if conn.write_all(&first).is_err() {
        return;
    }
    let mut buf = vec![0u8; 1 << 16];
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if conn.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// Frames: u32 little-endian length, then the payload; the answer is one frame of 4000 bytes
/// (a class-score vector).
fn request_loop(conn: &mut TcpStream, stop: &AtomicBool) -> std::io::Result<()> {
    let mut len = [0u8; 4];
    let mut payload = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match conn.read_exact(&mut len) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        }
        payload.resize(u32::from_le_bytes(len) as usize, 0);
        conn.read_exact(&mut payload)?;
        let reply = answer(&payload);
        conn.write_all(&(reply.len() as u32).to_le_bytes())?;
        conn.write_all(&reply)?;
    }
    Ok(())
}

/// The request loop's computation: a 1000-output projection of the payload's bytes, 16 passes
/// (comparable work per byte to a small convolutional layer).
pub fn answer(payload: &[u8]) -> Vec<u8> {
    let mut scores = [0f32; 1000];
    for pass in 0..16u32 {
        for (i, b) in payload.iter().enumerate() {
            let j = (i + pass as usize * 7) % 1000;
            scores[j] = scores[j] * 0.999 + f32::from(*b) * 1e-3;
        }
    }
    scores.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_is_named_with_the_os_reason_once() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let err = spawn(&addr).unwrap_err();
        assert!(matches!(err, PeerError::BindTcp { .. }), "{err:?}");
        let text = crate::error_chain(&err);
        assert!(text.starts_with(&format!("peer TCP {addr}: ")), "{text}");
        assert_eq!(text.matches("os error").count(), 1, "{text}");
    }
}
