//! Graceful drain: SIGTERM makes readiness false at once, new work stops after a delay, in-flight
//! requests finish within the grace period.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Where the pod is in its life: serving, draining (not ready, still taking work), or no longer
/// accepting new work.
#[derive(Debug)]
pub struct Lifecycle {
    draining: AtomicBool,
    accepting: AtomicBool,
}

impl Lifecycle {
    /// Serving.
    pub fn new() -> Self {
        Self { draining: AtomicBool::new(false), accepting: AtomicBool::new(true) }
    }

    /// Readiness goes false (endpoints are being removed); work is still taken.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// New work is refused with 503; in-flight work continues.
    pub fn stop_accepting(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.accepting.store(false, Ordering::SeqCst);
    }

    /// True once a termination signal arrived.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// False once new work is refused.
    pub fn is_accepting(&self) -> bool {
        self.accepting.load(Ordering::SeqCst)
    }
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self::new()
    }
}

/// SIGTERM and SIGINT handlers, installed before the service starts so an early signal drains
/// instead of killing the process.
pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> std::io::Result<Self> {
        Ok(Self { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    /// Resolves on the first SIGTERM or SIGINT, naming it.
    pub async fn wait(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// After a termination signal: not ready at once, then after `delay` no new work.
pub async fn drain(lifecycle: &Lifecycle, signal_name: &str, delay: Duration) {
    lifecycle.start_draining();
    tracing::info!(
        signal = signal_name,
        delay_ms = delay.as_millis() as u64,
        "draining: readiness is false"
    );
    tokio::time::sleep(delay).await;
    lifecycle.stop_accepting();
    tracing::info!("no longer taking new work; finishing in-flight requests");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn drain_turns_readiness_off_before_refusing_work() {
        let lifecycle = std::sync::Arc::new(Lifecycle::new());
        let task = {
            let lifecycle = lifecycle.clone();
            tokio::spawn(
                async move { drain(&lifecycle, "SIGTERM", Duration::from_millis(300)).await },
            )
        };
        // Every state (draining, accepting) the drain passes through, in order.
        let state = || (lifecycle.is_draining(), lifecycle.is_accepting());
        let mut seen = vec![state()];
        while !task.is_finished() {
            tokio::time::sleep(Duration::from_millis(1)).await;
            if seen.last() != Some(&state()) {
                seen.push(state());
            }
        }
        task.await.unwrap();
        if seen.last() != Some(&state()) {
            seen.push(state());
        }
        assert_eq!(seen, [(false, true), (true, true), (true, false)]);
    }
}
