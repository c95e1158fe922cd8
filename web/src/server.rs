//! Serving a router with or without a web config: plain `axum::serve` when there is none, the
//! same plus the auth middleware over plain HTTP when the file has no TLS, and an accept loop with
//! a rustls handshake per connection (using the configuration in force at that moment, which is
//! how rotated certificates reach new connections) when it has.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tracing::{debug, info, warn};

use crate::auth::{self, Guard};
use crate::reload::WebConfig;

/// A client gets this long to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// ...and this long to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Open connections get this long to finish after shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The server stopped with an error (not by its shutdown signal).
#[derive(Debug, thiserror::Error)]
#[error("HTTP server")]
pub struct ServeError(#[source] std::io::Error);

/// How long a refused client gets to read the TLS alert before the socket closes.
const ALERT_LINGER: Duration = Duration::from_secs(1);

/// Closes a connection whose handshake was refused, after the alert (rustls wrote it). A TLS 1.3
/// client sends its request right after its certificate, before it learns the certificate was
/// refused; closing a socket with that input unread makes the kernel send a RST, which can
/// reach the client before it reads the alert, and the client then reports "broken pipe" or
/// "connection reset" instead of why it was refused. Half-closing and draining the input for a
/// moment lets the alert arrive first.
async fn close_after_alert(mut tcp: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tcp.shutdown().await;
    let mut discard = [0u8; 4096];
    let drain = async { while matches!(tcp.read(&mut discard).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(ALERT_LINGER, drain).await;
}

/// Applies the web config's per-request rules to every route of `router`.
pub fn guarded(router: Router, web: &Arc<WebConfig>) -> Router {
    router.layer(axum::middleware::from_fn_with_state(
        Guard::new(web.clone()),
        auth::check,
    ))
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    web: Option<Arc<WebConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let Some(web) = web else {
        return axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(ServeError);
    };
    let router = guarded(router, &web);
    if !web.tls() {
        info!("TLS is disabled");
        return axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(ServeError);
    }
    let http2 = web.current().http2;
    info!(http2, "TLS is enabled");
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let builder = if http2 { builder } else { builder.http1_only() };
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and the like: wait instead of spinning.
                    warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Some(tls) = web.current().tls.clone() else {
            continue;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        let service = TowerToHyperService::new(router.clone());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let handshake = acceptor.accept(tcp).into_fallible();
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                Ok(Ok(stream)) => stream,
                Ok(Err((e, tcp))) => {
                    debug!(%peer, error = %e, "TLS handshake failed");
                    close_after_alert(tcp).await;
                    return;
                }
                Err(_) => {
                    debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(connection).await {
                debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("connections still open after the drain timeout; closing them");
    }
    Ok(())
}
