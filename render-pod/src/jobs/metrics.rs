//! Prometheus metrics of the durable jobs, registered under `renderpod_jobs_*`: how jobs ended
//! on this pod, how many run now, how long they took, how their webhooks went. (The backlog is
//! the broker's to tell: NATS's `/jsz`, which KEDA reads.)

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{Labels, Register, count, seconds_histogram};

/// The jobs' metrics.
pub struct JobsMetrics {
    /// Messages this pod finished with, by outcome: `done`, `failed`, `dead_lettered`,
    /// `handed_back` (a strike, a busy service or a drain), `cancelled`, `dropped` (its job had
    /// ended, or another message carries it).
    pub ended: Family<Labels, Counter>,
    /// Jobs computing now.
    pub running: Gauge,
    /// Seconds from a job's start on this pod to its last output.
    pub run: Histogram,
    /// Webhook deliveries, by result (`delivered`, `failed`).
    pub webhooks: Family<Labels, Counter>,
}

impl Default for JobsMetrics {
    fn default() -> Self {
        Self {
            ended: Family::default(),
            running: Gauge::default(),
            run: seconds_histogram(),
            webhooks: Family::default(),
        }
    }
}

impl JobsMetrics {
    /// Counts a message finished with `outcome`.
    pub fn ended(&self, outcome: &'static str) {
        count(&self.ended, "outcome", outcome);
    }
}

impl Register for JobsMetrics {
    fn register(&self, registry: &mut Registry) {
        let jobs = registry.sub_registry_with_prefix("jobs");
        jobs.register(
            "ended",
            "Job messages this pod finished with, by outcome",
            self.ended.clone(),
        );
        jobs.register("running", "Jobs computing on this pod now", self.running.clone());
        jobs.register(
            "run_seconds",
            "Seconds from a job's start on this pod to its last output",
            self.run.clone(),
        );
        jobs.register("webhooks", "Webhook deliveries, by result", self.webhooks.clone());
    }
}
