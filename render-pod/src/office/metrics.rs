//! Prometheus metrics of the Office path: admission, conversions, retries, strikes and the PDF
//! cache.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{Labels, Register, seconds_histogram};

/// The Office metrics, registered under `renderpod_office_*`.
pub struct OfficeMetrics {
    /// Conversions holding a place now.
    pub in_flight: Gauge,
    /// Requests waiting for a place.
    pub waiting: Gauge,
    /// The current share (places).
    pub share: Gauge,
    /// Seconds from asking for a place to getting one.
    pub wait: Histogram,
    /// Seconds Gotenberg took, retries included.
    pub conversion: Histogram,
    /// Conversions finished, by result code (`ok` or an error code).
    pub conversions: Family<Labels, Counter>,
    /// Requests Gotenberg answered busy (429) or failed (500, once), or that found no connection,
    /// retried on a new connection.
    pub retries: Family<Labels, Counter>,
    /// Documents struck for a conversion that timed out or failed in LibreOffice, by whether
    /// the strike quarantined them (`quarantined="true"`).
    pub strikes: Family<Labels, Counter>,
    /// Cache lookups: `hit`, `miss` (a new conversion), `shared` (joined one in flight).
    pub cache_lookups: Family<Labels, Counter>,
    /// PDF bytes in the cache.
    pub cache_bytes: Gauge,
    /// PDFs in the cache.
    pub cache_entries: Gauge,
}

impl Default for OfficeMetrics {
    fn default() -> Self {
        Self {
            in_flight: Gauge::default(),
            waiting: Gauge::default(),
            share: Gauge::default(),
            wait: seconds_histogram(),
            conversion: seconds_histogram(),
            conversions: Family::default(),
            retries: Family::default(),
            strikes: Family::default(),
            cache_lookups: Family::default(),
            cache_bytes: Gauge::default(),
            cache_entries: Gauge::default(),
        }
    }
}

impl Register for OfficeMetrics {
    fn register(&self, registry: &mut Registry) {
        let office = registry.sub_registry_with_prefix("office");
        office.register("in_flight", "Office conversions holding a place", self.in_flight.clone());
        office.register("waiting", "Office requests waiting for a place", self.waiting.clone());
        office.register("share", "Office conversions this pod may run at once", self.share.clone());
        office.register("wait_seconds", "Time waiting for an Office place", self.wait.clone());
        office.register(
            "conversion_seconds",
            "Time Gotenberg took for a conversion, retries included",
            self.conversion.clone(),
        );
        office.register("conversions", "Office conversions by result", self.conversions.clone());
        office.register(
            "retries",
            "Gotenberg requests retried on a new connection, by reason",
            self.retries.clone(),
        );
        office.register(
            "strikes",
            "Office documents struck for timing out or failing in LibreOffice",
            self.strikes.clone(),
        );
        office.register("cache_lookups", "Converted-PDF cache lookups", self.cache_lookups.clone());
        office.register("cache_bytes", "Converted-PDF bytes cached", self.cache_bytes.clone());
        office.register("cache_entries", "Converted PDFs cached", self.cache_entries.clone());
    }
}
