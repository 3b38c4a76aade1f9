//! The pool's job backlog, read from the broker every few seconds for `/readyz` (the operator
//! copies it from there into the RenderPool's status) and for `/metrics` (how many jobs, and how
//! long the oldest has waited: the job-backlog alert reads it). Read in the background so
//! `/readyz` answers from memory, never waiting on the broker.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use renderpool_api::render_pod::JobsBacklog;

use super::Broker;
use crate::metrics::Register;

/// How often the backlog is read.
pub const PERIOD: Duration = Duration::from_secs(10);

/// The job stream as one reading found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamBacklog {
    /// Jobs in the stream: queued or running.
    pub pending: u64,
    /// Seconds the oldest of them has been in the stream (0 with none).
    pub oldest_seconds: u64,
}

impl StreamBacklog {
    /// The reading of a stream holding `messages`, the first published at `first` (Unix
    /// seconds; meaningless when it holds none), at `now`.
    pub fn at(messages: u64, first: i64, now: i64) -> Self {
        let oldest = if messages == 0 { 0 } else { now.saturating_sub(first).max(0) };
        Self { pending: messages, oldest_seconds: u64::try_from(oldest).unwrap_or(0) }
    }
}

/// The last reading, as the gauges `/metrics` shows, and when it was read.
#[derive(Debug, Default)]
pub struct Backlog {
    read_at: Mutex<Option<Instant>>,
    pending: Gauge,
    oldest_seconds: Gauge,
}

impl Backlog {
    /// The last reading with its age; `None` before the first (or if the lock was poisoned).
    pub fn status(&self) -> Option<JobsBacklog> {
        let at = (*self.read_at.lock().ok()?)?;
        let age_ms = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
        let pending = u64::try_from(self.pending.get()).unwrap_or(0);
        Some(JobsBacklog { pending, age_ms })
    }

    fn record(&self, reading: StreamBacklog, at: Instant) {
        self.pending.set(i64::try_from(reading.pending).unwrap_or(i64::MAX));
        self.oldest_seconds.set(i64::try_from(reading.oldest_seconds).unwrap_or(i64::MAX));
        if let Ok(mut read_at) = self.read_at.lock() {
            *read_at = Some(at);
        }
    }
}

impl Register for Backlog {
    fn register(&self, registry: &mut Registry) {
        let jobs = registry.sub_registry_with_prefix("jobs");
        jobs.register(
            "backlog",
            "Jobs in the pool's stream, queued or running, at the last reading (every 10 s)",
            self.pending.clone(),
        );
        jobs.register(
            "backlog_oldest_seconds",
            "Seconds the oldest job in the pool's stream had been there at the last reading (0 with none)",
            self.oldest_seconds.clone(),
        );
    }
}

/// Reads the backlog every [`PERIOD`] while the pod runs. A failed read keeps the last figure,
/// whose age then grows: a reader sees how stale it is.
pub async fn watch(backlog: Arc<Backlog>, broker: Broker) {
    loop {
        match broker.backlog().await {
            Ok(reading) => backlog.record(reading, Instant::now()),
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
        let reading = StreamBacklog { pending: 42, oldest_seconds: 7 };
        backlog.record(reading, Instant::now() - Duration::from_secs(3));
        let status = backlog.status().unwrap();
        assert_eq!(status.pending, 42);
        assert!((3_000..60_000).contains(&status.age_ms), "{status:?}");
        assert_eq!((backlog.pending.get(), backlog.oldest_seconds.get()), (42, 7));
    }

    #[test]
    fn the_oldest_job_waits_from_its_publication_and_an_empty_stream_has_none() {
        assert_eq!(
            StreamBacklog::at(3, 1_000, 1_900),
            StreamBacklog { pending: 3, oldest_seconds: 900 }
        );
        // An empty stream's first timestamp means nothing.
        assert_eq!(StreamBacklog::at(0, 0, 1_900), StreamBacklog { pending: 0, oldest_seconds: 0 });
        // A clock behind the server's: no negative wait.
        assert_eq!(StreamBacklog::at(1, 2_000, 1_900).oldest_seconds, 0);
    }
}
