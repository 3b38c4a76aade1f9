//! The pool's job backlog, read from the broker every few seconds for `/readyz` (the operator
//! copies it from there into the RenderPool's status). Read in the background so `/readyz`
//! answers from memory, never waiting on the broker.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use renderpool_api::render_pod::JobsBacklog;

use super::Broker;

/// How often the backlog is read.
pub const PERIOD: Duration = Duration::from_secs(10);

/// The last reading: the figure and when it was read.
#[derive(Debug, Default)]
pub struct Backlog {
    last: Mutex<Option<(u64, Instant)>>,
}

impl Backlog {
    /// The last reading with its age; `None` before the first (or if the lock was poisoned).
    pub fn status(&self) -> Option<JobsBacklog> {
        let (pending, at) = (*self.last.lock().ok()?)?;
        let age_ms = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
        Some(JobsBacklog { pending, age_ms })
    }

    fn record(&self, pending: u64, at: Instant) {
        if let Ok(mut last) = self.last.lock() {
            *last = Some((pending, at));
        }
    }
}

/// Reads the backlog every [`PERIOD`] while the pod runs. A failed read keeps the last figure,
/// whose age then grows: a reader sees how stale it is.
pub async fn watch(backlog: Arc<Backlog>, broker: Broker) {
    loop {
        match broker.pending().await {
            Ok(pending) => backlog.record(pending, Instant::now()),
            Err(err) => tracing::debug!(error = %err, "could not read the job backlog"),
        }
        tokio::time::sleep(PERIOD).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn no_reading_is_none_and_a_reading_carries_its_age() {
        let backlog = Backlog::default();
        assert_eq!(backlog.status(), None);
        backlog.record(42, Instant::now() - Duration::from_secs(3));
        let status = backlog.status().unwrap();
        assert_eq!(status.pending, 42);
        assert!((3_000..60_000).contains(&status.age_ms), "{status:?}");
    }
}
