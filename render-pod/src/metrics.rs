//! Prometheus metrics of the render pod: slots, queue, job times, rejections, restarts, bytes.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use renderpool_sizing::SlotPlan;

use crate::limits::DetectedLimits;
use crate::office::OfficeMetrics;

/// Every reason a worker is replaced (`renderpod_worker_restarts_total{reason}`). Each is
/// exported at 0 from the start, so a reader of one sees a series, never a gap that a renamed
/// reason would also leave.
pub const RESTART_REASONS: [&str; 9] = [
    "crash",
    "killed",
    "memory_limit",
    "deadline",
    "client_deadline",
    "cancelled",
    "recycle_jobs",
    "recycle_memory",
    "spawn_failed",
];

/// A label set of static names and values (op names, reasons, states).
pub type Labels = Vec<(&'static str, &'static str)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Every metric the service exports, registered once at start.
pub struct Metrics {
    registry: Registry,
    /// Slots by state: `busy`, `idle` (alive, waiting) or `down` (worker starting or backing off).
    pub slots: Family<Labels, Gauge>,
    /// Jobs waiting in the global queue.
    pub queue_depth: Gauge,
    /// Seconds from arrival to a slot taking the job.
    pub queue_wait: Histogram,
    /// Seconds a worker spent on a job, by op.
    pub job_duration: HistogramFamily,
    /// Jobs finished, by op and outcome.
    pub jobs: Family<Labels, Counter>,
    /// Requests refused without running, by reason.
    pub rejections: Family<Labels, Counter>,
    /// Worker processes replaced, by reason.
    pub worker_restarts: Family<Labels, Counter>,
    /// Document bytes received.
    pub bytes_in: Counter<u64, AtomicU64>,
    /// Response body bytes sent.
    pub bytes_out: Counter<u64, AtomicU64>,
    /// The front's byte budget for request bodies.
    pub upload_budget: Gauge,
    /// Bytes of it reserved now.
    pub upload_reserved: Gauge,
    /// Answers `304 Not Modified` (no job ran).
    pub not_modified: Counter,
    /// The Office path (`renderpod_office_*`).
    pub office: Arc<OfficeMetrics>,
}

/// A histogram of seconds, 1 ms to about 65 s.
pub fn seconds_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Metrics {
    /// Registers all metrics plus the slot plan and the limits it came from.
    pub fn new(plan: &SlotPlan, limits: &DetectedLimits) -> Self {
        let mut registry = Registry::with_prefix("renderpod");
        let slots = Family::<Labels, Gauge>::default();
        let queue_depth = Gauge::default();
        let queue_wait = seconds_histogram();
        let job_duration: HistogramFamily = Family::new_with_constructor(seconds_histogram);
        let jobs = Family::<Labels, Counter>::default();
        let rejections = Family::<Labels, Counter>::default();
        let worker_restarts = Family::<Labels, Counter>::default();
        for reason in RESTART_REASONS {
            drop(worker_restarts.get_or_create(&vec![("reason", reason)]));
        }
        let bytes_in = Counter::<u64, AtomicU64>::default();
        let bytes_out = Counter::<u64, AtomicU64>::default();
        let upload_budget = Gauge::default();
        let upload_reserved = Gauge::default();
        let not_modified = Counter::default();
        registry.register("slots", "Worker slots by state", slots.clone());
        registry.register("queue_depth", "Jobs waiting for a slot", queue_depth.clone());
        registry.register(
            "queue_wait_seconds",
            "Time from arrival until a slot takes the job",
            queue_wait.clone(),
        );
        registry.register(
            "job_duration_seconds",
            "Time a worker spent on a job",
            job_duration.clone(),
        );
        registry.register("jobs", "Jobs finished by op and outcome", jobs.clone());
        registry.register("rejections", "Requests refused before running", rejections.clone());
        registry.register(
            "worker_restarts",
            "Worker processes replaced, by reason",
            worker_restarts.clone(),
        );
        registry.register("bytes_in", "Document bytes received", bytes_in.clone());
        registry.register("bytes_out", "Response body bytes sent", bytes_out.clone());
        registry.register(
            "upload_budget_bytes",
            "Bytes request bodies may hold in the supervisor at once",
            upload_budget.clone(),
        );
        registry.register(
            "upload_reserved_bytes",
            "Bytes of the upload budget reserved now",
            upload_reserved.clone(),
        );
        registry.register(
            "not_modified",
            "Answers 304 Not Modified to a matching If-None-Match, without a job",
            not_modified.clone(),
        );
        let office = Arc::new(OfficeMetrics::default());
        office.register(&mut registry);
        let planned = |v: u32| {
            let g = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
            g.set(i64::from(v));
            g
        };
        registry.register("slots_planned", "Slots derived at start", planned(plan.slots));
        registry.register("slots_cpu", "Slots the CPU limit allows", planned(plan.cpu_slots));
        registry.register(
            "slots_memory",
            "Slots the memory limit allows",
            planned(plan.memory_slots),
        );
        let limit_gauge = |v: u64| {
            let g = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
            g.set(i64::try_from(v).unwrap_or(i64::MAX));
            g
        };
        registry.register(
            "limit_cpu_millicores",
            "CPU limit used for sizing",
            limit_gauge(limits.cpu_millis),
        );
        registry.register(
            "limit_memory_bytes",
            "Memory limit used for sizing",
            limit_gauge(limits.memory_bytes),
        );
        registry.register(
            "slot_plan",
            "Why the slot count is what it is",
            Info::new(vec![
                ("reason", plan.reason.clone()),
                ("cpu_source", limits.cpu_source.clone()),
                ("memory_source", limits.memory_source.clone()),
            ]),
        );
        Self {
            registry,
            slots,
            queue_depth,
            queue_wait,
            job_duration,
            jobs,
            rejections,
            worker_restarts,
            bytes_in,
            bytes_out,
            upload_budget,
            upload_reserved,
            not_modified,
            office,
        }
    }

    /// Counts a request refused before running.
    pub fn reject(&self, reason: &'static str) {
        self.rejections.get_or_create(&vec![("reason", reason)]).inc();
    }

    /// Counts a replaced worker.
    pub fn restart(&self, reason: &'static str) {
        debug_assert!(RESTART_REASONS.contains(&reason), "{reason} is not in RESTART_REASONS");
        self.worker_restarts.get_or_create(&vec![("reason", reason)]).inc();
    }

    /// Moves one slot from state `from` to state `to`.
    pub fn slot_state(&self, from: Option<&'static str>, to: &'static str) {
        if let Some(from) = from {
            self.slots.get_or_create(&vec![("state", from)]).dec();
        }
        self.slots.get_or_create(&vec![("state", to)]).inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
impl Metrics {
    /// The metrics of a one-slot pod with 1 CPU and 1 GiB, for unit tests.
    pub(crate) fn for_tests() -> Self {
        let reason = "test".to_string();
        let plan = SlotPlan { slots: 1, cpu_slots: 1, memory_slots: 1, overridden: true, reason };
        let limits = DetectedLimits {
            cpu_millis: 1000,
            cpu_source: "test".into(),
            memory_bytes: 1 << 30,
            memory_source: "test".into(),
        };
        Self::new(&plan, &limits)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_restart_reason_is_exported_at_zero_before_any_restart() {
        let metrics = Metrics::for_tests();
        metrics.restart("killed");
        let text = metrics.encode().unwrap();
        for reason in RESTART_REASONS {
            let want = if reason == "killed" { 1 } else { 0 };
            let line = format!("renderpod_worker_restarts_total{{reason=\"{reason}\"}} {want}");
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
    }
}
