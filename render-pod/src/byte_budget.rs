//! Byte budgets: bytes the supervisor may hold at once for one purpose (request bodies being
//! read, answers waiting to be written), reserved before the bytes are, and given back when the
//! reservation is dropped. A reservation can be attached to the bytes it stands for
//! ([`Reservation::hold`]): the bytes are then counted until the last copy of them is gone
//! (for an answer, until hyper has written it to the socket or the connection died), not until
//! the handler that made them returns. Bytes a cache keeps on its own count too, and are given
//! back to a reservation that does not fit otherwise ([`Reclaim`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use bytes::Bytes;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

/// Bytes that may be reserved at once.
#[derive(Debug)]
pub struct ByteBudget {
    total: u64,
    used: AtomicU64,
    /// The budget's reserved-bytes gauge (`renderpod_upload_reserved_bytes`,
    /// `renderpod_answer_reserved_bytes`).
    gauge: Gauge,
    /// Woken whenever bytes are given back.
    freed: Notify,
    /// What holds reserved bytes only for later use, asked to give them back when a
    /// reservation does not fit.
    reclaimer: OnceLock<Weak<dyn Reclaim>>,
}

/// A holder of reserved bytes it keeps only in case they are wanted again (the documents the pod
/// holds by digest): bytes it holds alone are as good as free to a reservation that needs them.
pub trait Reclaim: Send + Sync {
    /// Gives back held bytes, least wanted first, until `bytes` more fit in the budget or it
    /// holds nothing more that it alone holds.
    fn reclaim(&self, bytes: u64);
}

impl ByteBudget {
    /// A budget of `total` bytes whose reserved amount `gauge` shows.
    pub fn new(total: u64, gauge: Gauge) -> Arc<Self> {
        Arc::new(Self {
            total,
            used: AtomicU64::new(0),
            gauge,
            freed: Notify::new(),
            reclaimer: OnceLock::new(),
        })
    }

    /// Makes `holder` give bytes back whenever a reservation does not fit (one holder per
    /// budget; a second is ignored). Weak: the holder keeps the budget, not the reverse.
    pub fn reclaim_from(&self, holder: Weak<dyn Reclaim>) {
        let _ = self.reclaimer.set(holder);
    }

    /// Bytes not reserved now.
    pub fn free(&self) -> u64 {
        self.total.saturating_sub(self.used())
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
        if self.try_take(bytes) {
            return true;
        }
        match self.reclaimer.get().and_then(Weak::upgrade) {
            Some(holder) if bytes <= self.total => {
                holder.reclaim(bytes);
                self.try_take(bytes)
            }
            _ => false,
        }
    }

    fn try_take(&self, bytes: u64) -> bool {
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
        self.freed.notify_waiters();
    }
}

/// Bytes held for one request (its document, or an answer); returned when dropped.
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

    /// Reserves `more` bytes on top, waiting until `until` for other reservations to give back
    /// room (an ordinary upload holds its bytes for milliseconds); false when none came by then,
    /// or at once when this reservation could not grow so far even alone.
    pub async fn grow_by(&self, more: u64, until: Instant) -> bool {
        if self.bytes().saturating_add(more) > self.budget.total {
            return false;
        }
        loop {
            let freed = self.budget.freed.notified();
            tokio::pin!(freed);
            // Registered before trying, so bytes given back in between still wake it.
            freed.as_mut().enable();
            if self.grow(more) {
                return true;
            }
            if tokio::time::timeout_at(until.into(), freed).await.is_err() {
                return false;
            }
        }
    }

    /// Gives back what this reservation holds past `bytes` (an upload kept for its document
    /// alone, without the rest of its form).
    pub fn shrink_to(&self, bytes: u64) {
        let before = self.bytes.fetch_min(bytes, Ordering::AcqRel);
        if before > bytes {
            self.budget.give_back(before - bytes);
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    /// `bytes` as [`Bytes`] that keep this reservation until their last clone or slice is
    /// dropped, without copying them.
    pub fn hold<T: AsRef<[u8]> + Send + 'static>(self, bytes: T) -> Bytes {
        Bytes::from_owner(Held { bytes, _reservation: self })
    }
}

/// Bytes and the reservation that counts them.
struct Held<T> {
    bytes: T,
    _reservation: Reservation,
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Held<T> {
    fn as_ref(&self) -> &[u8] {
        self.bytes.as_ref()
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

    #[tokio::test]
    async fn growing_waits_for_room_given_back_and_gives_up_in_time() {
        let budget = ByteBudget::new(100, Gauge::default());
        let growing = budget.reserve(40).unwrap();
        let other = budget.reserve(60).unwrap();
        let soon = || Instant::now() + std::time::Duration::from_secs(5);
        // Past what the budget could ever give it: refused at once, without waiting.
        let at_once = Instant::now();
        assert!(!growing.grow_by(61, soon()).await);
        assert!(at_once.elapsed() < std::time::Duration::from_secs(1));
        // No room until the other gives its bytes back.
        let waiting =
            tokio::spawn(async move { growing.grow_by(50, soon()).await.then_some(growing) });
        tokio::task::yield_now().await;
        drop(other);
        let grown = waiting.await.unwrap().expect("the room given back was taken");
        assert_eq!((grown.bytes(), budget.used()), (90, 90));
        // No room comes: false at the bound, nothing more held.
        let late = Instant::now() + std::time::Duration::from_millis(50);
        let blocker = budget.reserve(10).unwrap();
        assert!(!grown.grow_by(5, late).await);
        assert_eq!(budget.used(), 100);
        drop(blocker);
    }

    #[test]
    fn held_bytes_keep_their_reservation_until_the_last_slice_goes() {
        let budget = ByteBudget::new(100, Gauge::default());
        let held = budget.reserve(10).unwrap().hold(b"0123456789".to_vec());
        let tail = held.slice(5..);
        drop(held);
        assert_eq!((budget.used(), &tail[..]), (10, &b"56789"[..]), "a slice still holds it");
        drop(tail);
        assert_eq!(budget.used(), 0);
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
