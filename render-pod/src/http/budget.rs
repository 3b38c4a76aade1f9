//! The front's byte budget: request bodies reserve their bytes before they are read, so the
//! uploads the supervisor holds at once never add up past its share of the pod's memory. One
//! body reserves at most a share of it when admitted (the rest as its bytes arrive), so a slow
//! sender of a large body cannot hold the whole budget while it trickles in.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::gauge::Gauge;

use renderpool_sizing::SUPERVISOR_AT_REST;

/// The default budget: the supervisor's share of the pod's memory less what it needs at rest
/// and the Office cache's budget; `None` when those leave nothing.
pub fn derived_budget(supervisor_overhead: u64, office_cache_bytes: u64) -> Option<u64> {
    supervisor_overhead
        .checked_sub(SUPERVISOR_AT_REST)?
        .checked_sub(office_cache_bytes)
        .filter(|left| *left > 0)
}

/// The default `--upload-admit-share`: a body declared larger than a quarter of the budget
/// holds that quarter when admitted, and the rest only as it arrives. Uploads of up to a
/// quarter (every ordinary document) keep the promise that an admitted body always fits; three
/// slow largest senders at once still leave a quarter for everyone else.
pub const ADMIT_SHARE: f64 = 0.25;

/// Bytes of a budget of `total` one body reserves at most when admitted: `share` of it
/// (0 to 1), rounded down. Float to int casts saturate, so no `total` wraps.
pub fn admit_bytes(total: u64, share: f64) -> u64 {
    (total as f64 * share.clamp(0.0, 1.0)) as u64
}

/// Bytes that may be reserved at once.
#[derive(Debug)]
pub struct ByteBudget {
    total: u64,
    used: AtomicU64,
    /// `renderpod_upload_reserved_bytes`.
    gauge: Gauge,
}

impl ByteBudget {
    /// A budget of `total` bytes whose reserved amount `gauge` shows.
    pub fn new(total: u64, gauge: Gauge) -> Arc<Self> {
        Arc::new(Self { total, used: AtomicU64::new(0), gauge })
    }

    /// Bytes in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes reserved now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Reserves `bytes`, or `None` when they do not fit now.
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        self.take(bytes).then(|| Reservation { budget: self.clone(), bytes: AtomicU64::new(bytes) })
    }

    fn take(&self, bytes: u64) -> bool {
        let taken = self.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(bytes).filter(|after| *after <= self.total)
        });
        if taken.is_ok() {
            self.gauge.inc_by(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        taken.is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        self.gauge.dec_by(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

/// Bytes held for one request while its document is; returned when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<ByteBudget>,
    bytes: AtomicU64,
}

impl Reservation {
    /// Reserves `more` bytes on top (a chunked upload, as it comes in); false when they do not
    /// fit, and then nothing more is held.
    pub fn grow(&self, more: u64) -> bool {
        if !self.budget.take(more) {
            return false;
        }
        self.bytes.fetch_add(more, Ordering::AcqRel);
        true
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(*self.bytes.get_mut());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_default_leaves_the_supervisor_its_rest_and_the_cache_its_share() {
        let mib = 1u64 << 20;
        assert_eq!(derived_budget(128 * mib, 64 * mib), Some(32 * mib));
        assert_eq!(derived_budget(256 * mib, 0), Some(224 * mib));
        assert_eq!(derived_budget(96 * mib, 64 * mib), None);
        assert_eq!(derived_budget(16 * mib, 0), None);
    }

    #[test]
    fn one_body_is_admitted_with_its_share_of_the_budget() {
        let mib = 1u64 << 20;
        assert_eq!(admit_bytes(100 * mib, ADMIT_SHARE), 25 * mib);
        assert_eq!(admit_bytes(100 * mib, 1.0), 100 * mib);
        assert_eq!(admit_bytes(7, 0.5), 3, "rounded down");
        assert_eq!(admit_bytes(u64::MAX, 1.0), u64::MAX, "saturates");
        assert_eq!(admit_bytes(100, 2.0), 100, "never past the budget");
    }

    #[test]
    fn reservations_never_exceed_the_total_and_come_back_on_drop() {
        let gauge = Gauge::default();
        let budget = ByteBudget::new(100, gauge.clone());
        let a = budget.reserve(60).unwrap();
        assert!(budget.reserve(41).is_none(), "60 + 41 > 100");
        let b = budget.reserve(40).unwrap();
        assert_eq!((budget.used(), gauge.get()), (100, 100));
        assert!(!b.grow(1));
        drop(a);
        assert!(b.grow(50));
        assert_eq!((b.bytes(), budget.used()), (90, 90));
        drop(b);
        assert_eq!((budget.used(), gauge.get()), (0, 0));
        // A request larger than the whole budget never fits, even alone.
        assert!(budget.reserve(101).is_none());
        assert!(budget.reserve(u64::MAX).is_none());
    }

    #[test]
    fn concurrent_reservations_add_up_exactly() {
        let budget = ByteBudget::new(1000, Gauge::default());
        let held: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..100).filter_map(|_| budget.reserve(7)).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(held.len(), 1000 / 7);
        assert_eq!(budget.used(), 7 * (1000 / 7));
        drop(held);
        assert_eq!(budget.used(), 0);
    }
}
