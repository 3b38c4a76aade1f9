//! The `renderpod_*` metrics registry and the shapes the subsystems' metrics share. Each
//! subsystem keeps its own metrics beside its code (`engine`, `http`, `office`, `limits`) and
//! registers them here at start; nothing here knows a subsystem.

use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A label set of static names and values (op names, reasons, states).
pub type Labels = Vec<(&'static str, &'static str)>;
/// Counters by label set.
pub type CounterFamily = Family<Labels, Counter>;
/// Histograms of seconds by label set.
pub type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// A subsystem's metrics, registered once at start.
pub trait Register {
    /// Registers every metric in `registry` (its prefix applies).
    fn register(&self, registry: &mut Registry);
}

/// What `/metrics` exposes: the metrics every subsystem registered.
pub struct Exposition(Registry);

impl Exposition {
    /// An empty registry under the `renderpod` prefix.
    pub fn new() -> Self {
        Self(Registry::with_prefix("renderpod"))
    }

    /// Registers one subsystem's metrics.
    pub fn add(&mut self, metrics: &dyn Register) {
        metrics.register(&mut self.0);
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.0)?;
        Ok(out)
    }
}

impl Default for Exposition {
    fn default() -> Self {
        Self::new()
    }
}

/// A histogram of seconds, 1 ms to about 65 s.
pub fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Counts one label value of a family.
pub fn count(family: &CounterFamily, name: &'static str, value: &'static str) {
    family.get_or_create(&vec![(name, value)]).inc();
}

/// A gauge holding `value` (figures known at start), saturated to the gauge's range.
pub fn fixed_gauge(value: u64) -> Gauge<i64, AtomicI64> {
    let gauge = Gauge::<i64, AtomicI64>::default();
    gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    gauge
}

/// Requests refused before running, by reason (`renderpod_rejections`): the front and the
/// engine both refuse, into one family.
#[derive(Debug, Clone, Default)]
pub struct Rejections(CounterFamily);

impl Rejections {
    /// Counts a request refused before running.
    pub fn reject(&self, reason: &'static str) {
        count(&self.0, "reason", reason);
    }
}

impl Register for Rejections {
    fn register(&self, registry: &mut Registry) {
        registry.register("rejections", "Requests refused before running", self.0.clone());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn registered_metrics_are_exposed_under_the_prefix() {
        let rejections = Rejections::default();
        let mut exposition = Exposition::new();
        exposition.add(&rejections);
        rejections.reject("queue_full");
        rejections.reject("queue_full");
        let text = exposition.encode().unwrap();
        assert!(text.contains("renderpod_rejections_total{reason=\"queue_full\"} 2"), "{text}");
        assert_eq!(fixed_gauge(u64::MAX).get(), i64::MAX);
    }
}
