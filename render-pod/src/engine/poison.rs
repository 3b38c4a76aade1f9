//! Poison pills: documents that crashed or exhausted a worker, refused fast for a while.
//!
//! A document is quarantined at once when the worker's end points at it (its memory ceiling, a
//! fault of its own, the deadline), and on its second strike when the cause cannot be shown
//! (a signal from outside, the pod's OOM killer): one unlucky request does not lock a document
//! out, two in a row within the TTL do. The list is bounded in time (each entry lasts the TTL)
//! and in entries (the oldest is evicted), so a flood of distinct crashing uploads cannot grow it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ops::DocHash;

/// Most documents remembered at once.
pub const CAPACITY: usize = 4096;

/// One remembered document.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// When the entry was made or last renewed (eviction takes the oldest).
    since: Instant,
    /// Quarantined (refused) or only struck once.
    quarantined: bool,
}

/// Quarantined and struck documents, each expiring `ttl` after its last event.
#[derive(Debug)]
pub struct PoisonList {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<DocHash, Entry>>,
}

impl PoisonList {
    /// An empty list whose entries last `ttl`, holding at most `capacity` documents.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self { ttl, capacity: capacity.max(1), entries: Mutex::new(HashMap::new()) }
    }

    /// Quarantines `hash` from `now`.
    pub fn convict(&self, hash: DocHash, now: Instant) {
        self.record(hash, now, |_| true);
    }

    /// Counts a strike against `hash`; the second within the TTL quarantines it. Returns
    /// whether it is quarantined now.
    pub fn strike(&self, hash: DocHash, now: Instant) -> bool {
        self.record(hash, now, |previous| previous.is_some())
    }

    fn record(
        &self,
        hash: DocHash,
        now: Instant,
        quarantine: impl FnOnce(Option<Entry>) -> bool,
    ) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        let ttl = self.ttl;
        entries.retain(|_, entry| now.saturating_duration_since(entry.since) < ttl);
        let previous = entries.get(&hash).copied();
        let quarantined = quarantine(previous);
        if previous.is_none() && entries.len() >= self.capacity {
            let oldest = entries.iter().min_by_key(|(_, entry)| entry.since).map(|(hash, _)| *hash);
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        entries.insert(hash, Entry { since: now, quarantined });
        quarantined
    }

    /// Time left in quarantine for `hash`, if it is quarantined.
    pub fn remaining(&self, hash: &DocHash, now: Instant) -> Option<Duration> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.get(hash).filter(|entry| entry.quarantined)?;
        (entry.since + self.ttl).checked_duration_since(now).filter(|left| !left.is_zero())
    }

    /// Documents remembered now (quarantined or struck).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|entries| entries.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    fn hash(n: u32) -> DocHash {
        DocHash::of(&n.to_le_bytes())
    }

    #[test]
    fn quarantine_expires() {
        let list = PoisonList::new(TTL, CAPACITY);
        let (a, b) = (hash(1), hash(2));
        let t0 = Instant::now();
        list.convict(a, t0);
        assert_eq!(list.remaining(&a, t0 + Duration::from_secs(10)), Some(Duration::from_secs(50)));
        assert_eq!(list.remaining(&b, t0), None);
        assert_eq!(list.remaining(&a, t0 + Duration::from_secs(61)), None);
    }

    #[test]
    fn the_second_strike_within_the_ttl_quarantines() {
        let list = PoisonList::new(TTL, CAPACITY);
        let t0 = Instant::now();
        assert!(!list.strike(hash(1), t0));
        assert_eq!(list.remaining(&hash(1), t0), None, "one strike refuses nothing");
        assert!(list.strike(hash(1), t0 + Duration::from_secs(30)));
        let left = list.remaining(&hash(1), t0 + Duration::from_secs(30));
        assert_eq!(left, Some(TTL), "quarantined for a full TTL from the second strike");
        // A strike that expired does not count towards the next one.
        assert!(!list.strike(hash(2), t0));
        assert!(!list.strike(hash(2), t0 + TTL + Duration::from_secs(1)));
    }

    #[test]
    fn the_list_is_bounded_and_evicts_the_oldest() {
        let list = PoisonList::new(TTL, 3);
        let t0 = Instant::now();
        for n in 0..3 {
            list.convict(hash(n), t0 + Duration::from_secs(u64::from(n)));
        }
        list.convict(hash(3), t0 + Duration::from_secs(3));
        assert_eq!(list.len(), 3);
        let now = t0 + Duration::from_secs(4);
        assert_eq!(list.remaining(&hash(0), now), None, "the oldest made room");
        assert!((1..=3).all(|n| list.remaining(&hash(n), now).is_some()));
        // Renewing an entry does not evict another.
        list.convict(hash(1), now);
        assert_eq!(list.len(), 3);
        // Expired entries go first, before anything is evicted: 2 has, 1 (renewed) and 3 not.
        let later = t0 + TTL + Duration::from_secs(2);
        list.strike(hash(9), later);
        assert_eq!(list.len(), 3);
        assert!(
            list.remaining(&hash(1), later).is_some() && list.remaining(&hash(3), later).is_some()
        );
    }
}
