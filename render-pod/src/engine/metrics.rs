//! The engine's metrics: slots by state, the queue, job times and outcomes, worker restarts.

use std::sync::atomic::AtomicI64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{
    CounterFamily, HistogramFamily, Labels, Register, Rejections, count, seconds_histogram,
};

/// Every reason a worker is replaced (`renderpod_worker_restarts_total{reason}`). Each is
/// exported at 0 from the start, so a reader of one sees a series, never a gap that a renamed
/// reason would also leave.
pub const RESTART_REASONS: [&str; 10] = [
    "crash",
    "sandbox",
    "killed",
    "memory_limit",
    "deadline",
    "client_deadline",
    "cancelled",
    "recycle_jobs",
    "recycle_memory",
    "spawn_failed",
];

/// What the engine counts; refusals go to the pod's shared [`Rejections`].
pub struct EngineMetrics {
    /// Slots by state: `busy`, `idle` (alive, waiting) or `down` (worker starting or backing off).
    pub slots: Family<Labels, Gauge>,
    /// Jobs waiting in the global queue.
    pub queue_depth: Gauge<i64, AtomicI64>,
    /// Seconds from arrival to a slot taking the job.
    pub queue_wait: Histogram,
    /// Seconds a worker spent on a job, by op.
    pub job_duration: HistogramFamily,
    /// Jobs finished, by op and outcome.
    pub jobs: CounterFamily,
    /// Worker processes replaced, by reason.
    pub worker_restarts: CounterFamily,
    /// Requests refused before running.
    pub rejections: Rejections,
}

impl EngineMetrics {
    /// Fresh metrics counting refusals into `rejections`.
    pub fn new(rejections: Rejections) -> Self {
        let worker_restarts = CounterFamily::default();
        for reason in RESTART_REASONS {
            drop(worker_restarts.get_or_create(&vec![("reason", reason)]));
        }
        Self {
            slots: Family::default(),
            queue_depth: Gauge::default(),
            queue_wait: seconds_histogram(),
            job_duration: Family::new_with_constructor(seconds_histogram),
            jobs: CounterFamily::default(),
            worker_restarts,
            rejections,
        }
    }

    /// Counts a request refused before running.
    pub fn reject(&self, reason: &'static str) {
        self.rejections.reject(reason);
    }

    /// Counts a replaced worker.
    pub fn restart(&self, reason: &'static str) {
        debug_assert!(RESTART_REASONS.contains(&reason), "{reason} is not in RESTART_REASONS");
        count(&self.worker_restarts, "reason", reason);
    }

    /// Moves one slot from state `from` to state `to`.
    pub fn slot_state(&self, from: Option<&'static str>, to: &'static str) {
        if let Some(from) = from {
            self.slots.get_or_create(&vec![("state", from)]).dec();
        }
        self.slots.get_or_create(&vec![("state", to)]).inc();
    }
}

impl Register for EngineMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register("slots", "Worker slots by state", self.slots.clone());
        registry.register("queue_depth", "Jobs waiting for a slot", self.queue_depth.clone());
        registry.register(
            "queue_wait_seconds",
            "Time from arrival until a slot takes the job",
            self.queue_wait.clone(),
        );
        registry.register(
            "job_duration_seconds",
            "Time a worker spent on a job",
            self.job_duration.clone(),
        );
        registry.register("jobs", "Jobs finished by op and outcome", self.jobs.clone());
        registry.register(
            "worker_restarts",
            "Worker processes replaced, by reason",
            self.worker_restarts.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::metrics::Exposition;

    #[test]
    fn every_restart_reason_is_exported_at_zero_before_any_restart() {
        let metrics = EngineMetrics::new(Rejections::default());
        metrics.restart("killed");
        let mut exposition = Exposition::new();
        exposition.add(&metrics);
        let text = exposition.encode().unwrap();
        for reason in RESTART_REASONS {
            let want = if reason == "killed" { 1 } else { 0 };
            let line = format!("renderpod_worker_restarts_total{{reason=\"{reason}\"}} {want}");
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
    }
}
