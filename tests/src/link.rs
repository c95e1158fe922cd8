//! A network link the test controls: a TCP proxy on loopback in front of a real server, slow
//! (every chunk forwarded after a delay, each way) and cut at will. Cut, it closes every open
//! connection and drops each new one as soon as it is accepted, as a dead uplink behind NAT
//! looks to a client (connection reset, or a request that never gets its answer); restored, it
//! forwards again. Its own runtime runs on a thread of its own and stops when it is dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy. Dropping it stops it.
pub struct Link {
    /// Where clients connect (`127.0.0.1:PORT`).
    pub addr: SocketAddr,
    up: Arc<AtomicBool>,
    cuts: watch::Sender<u64>,
    refused: Arc<AtomicU64>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Link {
    /// A link to `upstream` that delays every forwarded chunk by `latency`, each way.
    pub fn start(upstream: SocketAddr, latency: Duration) -> anyhow::Result<Link> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("test-link")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let up = Arc::new(AtomicBool::new(true));
        let refused = Arc::new(AtomicU64::new(0));
        let (cuts, cut_rx) = watch::channel(0u64);
        {
            let (up, refused) = (up.clone(), refused.clone());
            runtime.spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    if !up.load(Ordering::SeqCst) {
                        refused.fetch_add(1, Ordering::Relaxed);
                        drop(client);
                        continue;
                    }
                    let mut cut = cut_rx.clone();
                    cut.borrow_and_update();
                    tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        tokio::select! {
                            _ = async { tokio::join!(pipe(cr, sw, latency), pipe(sr, cw, latency)) } => {}
                            // Dropping both sockets closes the connection mid-request.
                            _ = cut.changed() => {}
                        }
                    });
                }
            });
        }
        Ok(Link {
            addr,
            up,
            cuts,
            refused,
            runtime: Some(runtime),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Cuts the link: open connections are closed, new ones dropped on accept.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Restores the link.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    /// Connections dropped while the link was cut.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Copies `from` to `to`, each chunk after `latency`; closes `to`'s write side at the end.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    latency: Duration,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        tokio::time::sleep(latency).await;
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
