//! Serving the router over HTTP/1.1 connections with a header read timeout: a client whose
//! request head does not arrive in time, or whose idle keep-alive connection outlasts it, is
//! disconnected (axum::serve sets no timer, so such connections stayed open for good); one
//! that stops reading its answer, or reads a trickle, is cut off (`write_timeout`).
//! Shutdown stops accepting, closes idle connections and lets requests in flight finish.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use super::FrontMetrics;
use super::write_timeout::WriteTimeout;

/// How connections are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time a request head gets from the moment the connection is ready for one (accepted, or
    /// the previous answer sent, so it also bounds an idle keep-alive connection); `None` for
    /// no limit.
    pub header_read_timeout: Option<Duration>,
    /// Time a write may wait for the client to read; `None` for no limit.
    pub write_timeout: Option<Duration>,
    /// Bytes per second a client must average over a spell of writes that waited for it, after
    /// the first write timeout of it; `None` for no floor (nor without a write timeout).
    pub write_min_rate: Option<u64>,
}

/// Serves `router` on `listener` until `shutdown` completes, then waits for the connections
/// to finish their requests in flight (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    metrics: Arc<FrontMetrics>,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors and the like: pass, and let connections close.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let stream = WriteTimeout::new(
            stream,
            limits.write_timeout,
            limits.write_min_rate,
            metrics.write_timeouts.clone(),
            metrics.write_too_slow.clone(),
        );
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        let metrics = metrics.clone();
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                if error.is_timeout() {
                    metrics.reject("header_timeout");
                } else {
                    tracing::debug!(%error, "connection ended with an error");
                }
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
