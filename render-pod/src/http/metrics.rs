//! The front's metrics: bytes in and out, the upload and answer budgets, connections cut off
//! for not reading or reading too slowly, `304` answers; refusals go to the pod's shared [`Rejections`].

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::{Register, Rejections};

/// What the front counts.
pub struct FrontMetrics {
    /// Requests refused before running.
    pub rejections: Rejections,
    /// Document bytes received.
    pub bytes_in: Counter<u64, AtomicU64>,
    /// Response body bytes sent.
    pub bytes_out: Counter<u64, AtomicU64>,
    /// The front's byte budget for request bodies.
    pub upload_budget: Gauge<i64, AtomicI64>,
    /// Bytes of it reserved now.
    pub upload_reserved: Gauge<i64, AtomicI64>,
    /// The byte budget for answers waiting to be written.
    pub answer_budget: Gauge<i64, AtomicI64>,
    /// Bytes of it reserved now.
    pub answer_reserved: Gauge<i64, AtomicI64>,
    /// Connections cut off because a write waited past the write timeout.
    pub write_timeouts: Counter,
    /// Connections cut off because the client read below the write rate floor.
    pub write_too_slow: Counter,
    /// Answers `304 Not Modified` (no job ran).
    pub not_modified: Counter,
}

impl FrontMetrics {
    /// Fresh metrics counting refusals into `rejections`.
    pub fn new(rejections: Rejections) -> Self {
        Self {
            rejections,
            bytes_in: Counter::default(),
            bytes_out: Counter::default(),
            upload_budget: Gauge::default(),
            upload_reserved: Gauge::default(),
            answer_budget: Gauge::default(),
            answer_reserved: Gauge::default(),
            write_timeouts: Counter::default(),
            write_too_slow: Counter::default(),
            not_modified: Counter::default(),
        }
    }

    /// Counts a request refused before running.
    pub fn reject(&self, reason: &'static str) {
        self.rejections.reject(reason);
    }
}

impl Register for FrontMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register("bytes_in", "Document bytes received", self.bytes_in.clone());
        registry.register("bytes_out", "Response body bytes sent", self.bytes_out.clone());
        registry.register(
            "upload_budget_bytes",
            "Bytes request bodies may hold in the supervisor at once",
            self.upload_budget.clone(),
        );
        registry.register(
            "upload_reserved_bytes",
            "Bytes of the upload budget reserved now",
            self.upload_reserved.clone(),
        );
        registry.register(
            "answer_budget_bytes",
            "Bytes answers waiting to be written may hold in the supervisor at once",
            self.answer_budget.clone(),
        );
        registry.register(
            "answer_reserved_bytes",
            "Bytes of the answer budget reserved now (answers read from workers, not yet written)",
            self.answer_reserved.clone(),
        );
        registry.register(
            "write_timeouts",
            "Connections cut off because the client read nothing for the write timeout",
            self.write_timeouts.clone(),
        );
        registry.register(
            "write_too_slow",
            "Connections cut off because the client read below --write-min-rate over a spell of \
             writes that waited for it",
            self.write_too_slow.clone(),
        );
        registry.register(
            "not_modified",
            "Answers 304 Not Modified to a matching If-None-Match, without a job",
            self.not_modified.clone(),
        );
    }
}
