//! Prometheus metrics: reconciles, errors, duration, writes and leadership.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::time::Duration;

type Labels = Vec<(String, String)>;

/// The operator's metrics and the registry that renders them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    duration: Histogram,
    writes: Family<Labels, Counter>,
    requests: Family<Labels, Counter>,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let reconciles = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let writes = Family::<Labels, Counter>::default();
        let requests = Family::<Labels, Counter>::default();
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        let leader = Gauge::default();
        let mut registry = Registry::with_prefix("renderpool_operator");
        registry.register("reconciles", "Reconciles by outcome", reconciles.clone());
        registry.register("reconcile_errors", "Failed reconciles by error kind", errors.clone());
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile took",
            duration.clone(),
        );
        registry.register(
            "api_writes",
            "Write requests sent to the API server, by kind and verb",
            writes.clone(),
        );
        registry.register(
            "api_requests",
            "Every request the kube client sent (reads, watches, writes, lease renewals), by verb",
            requests.clone(),
        );
        registry.register("leader", "1 while this process holds the lease", leader.clone());
        Self { registry, reconciles, errors, duration, writes, requests, leader }
    }
}

impl Metrics {
    /// Records one finished reconcile.
    pub fn reconciled(&self, outcome: &str, took: Duration) {
        self.reconciles.get_or_create(&vec![("outcome".into(), outcome.into())]).inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// Records one failed reconcile.
    pub fn failed(&self, kind: &str) {
        self.errors.get_or_create(&vec![("kind".into(), kind.into())]).inc();
    }

    /// Records one write request (apply, delete, status, event).
    pub fn write(&self, kind: &str, verb: &str) {
        self.writes
            .get_or_create(&vec![("kind".into(), kind.into()), ("verb".into(), verb.into())])
            .inc();
    }

    /// Records one request sent by the kube client.
    pub fn request(&self, verb: &str) {
        self.requests.get_or_create(&vec![("verb".into(), verb.into())]).inc();
    }

    /// Records whether this process leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The text exposition format.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn writes_and_reconciles_are_rendered_with_labels() {
        let m = Metrics::default();
        m.write("Deployment", "apply");
        m.write("Deployment", "apply");
        m.reconciled("applied", Duration::from_millis(3));
        m.set_leader(true);
        let text = m.render().unwrap();
        assert!(
            text.contains(
                r#"renderpool_operator_api_writes_total{kind="Deployment",verb="apply"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"renderpool_operator_reconciles_total{outcome="applied"} 1"#));
        assert!(text.contains("renderpool_operator_leader 1"));
        assert!(text.contains("renderpool_operator_reconcile_duration_seconds_count 1"));
    }
}
