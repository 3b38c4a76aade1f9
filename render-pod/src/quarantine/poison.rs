//! Poison pills: documents that crashed or exhausted a worker, refused fast for a while for
//! the work that did it.
//!
//! A document is quarantined at once when the worker's end points at it (its memory ceiling, a
//! fault of its own, the deadline), and on its second strike when the cause cannot be shown
//! (a signal from outside, the pod's OOM killer): one unlucky request does not lock a document
//! out, two in a row within the TTL do. Entries are keyed by document and [`WorkClass`], so a
//! document convicted by a 1200 dpi render is still served `info` and ordinary pages (a class
//! is refused by its own conviction and the cheaper ones that imply it:
//! [`WorkClass::refused_by`]). The list is bounded in time (each entry lasts the TTL) and in
//! entries (the oldest is evicted), so a flood of distinct crashing uploads, or one document
//! convicted in every class, cannot grow it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::work_class::WorkClass;
use crate::ops::DocHash;

/// Most documents and classes remembered at once.
pub const CAPACITY: usize = 4096;

/// One document and class of work on it.
type Key = (DocHash, WorkClass);

/// One remembered document and class.
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
    entries: Mutex<HashMap<Key, Entry>>,
}

impl PoisonList {
    /// An empty list whose entries last `ttl`, holding at most `capacity` of them.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self { ttl, capacity: capacity.max(1), entries: Mutex::new(HashMap::new()) }
    }

    /// Quarantines `hash` for `class` of work from `now`.
    pub fn convict(&self, hash: DocHash, class: WorkClass, now: Instant) {
        self.record((hash, class), now, |_| true);
    }

    /// Counts a strike against `hash` for `class`; the second within the TTL quarantines it.
    /// Returns whether it is quarantined now.
    pub fn strike(&self, hash: DocHash, class: WorkClass, now: Instant) -> bool {
        self.record((hash, class), now, |previous| previous.is_some())
    }

    fn record(
        &self,
        key: Key,
        now: Instant,
        quarantine: impl FnOnce(Option<Entry>) -> bool,
    ) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        let ttl = self.ttl;
        entries.retain(|_, entry| now.saturating_duration_since(entry.since) < ttl);
        let previous = entries.get(&key).copied();
        let quarantined = quarantine(previous);
        if previous.is_none() && entries.len() >= self.capacity {
            let oldest = entries.iter().min_by_key(|(_, entry)| entry.since).map(|(key, _)| *key);
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        entries.insert(key, Entry { since: now, quarantined });
        quarantined
    }

    /// Time left in quarantine for `class` of work on `hash`, if it is refused: the longest
    /// left of the convictions that refuse that class.
    pub fn remaining(&self, hash: &DocHash, class: WorkClass, now: Instant) -> Option<Duration> {
        let entries = self.entries.lock().ok()?;
        class
            .refused_by()
            .into_iter()
            .filter_map(|by| entries.get(&(*hash, by)).filter(|entry| entry.quarantined))
            .filter_map(|entry| (entry.since + self.ttl).checked_duration_since(now))
            .filter(|left| !left.is_zero())
            .max()
    }

    /// Entries remembered now (quarantined or struck).
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
    /// The class that refuses all work: what every conviction was before classes.
    const OPEN: WorkClass = WorkClass::Open;

    fn hash(n: u32) -> DocHash {
        DocHash::of(&n.to_le_bytes())
    }

    #[test]
    fn quarantine_expires() {
        let list = PoisonList::new(TTL, CAPACITY);
        let (a, b) = (hash(1), hash(2));
        let t0 = Instant::now();
        list.convict(a, OPEN, t0);
        assert_eq!(
            list.remaining(&a, OPEN, t0 + Duration::from_secs(10)),
            Some(Duration::from_secs(50))
        );
        assert_eq!(list.remaining(&b, OPEN, t0), None);
        assert_eq!(list.remaining(&a, OPEN, t0 + Duration::from_secs(61)), None);
    }

    #[test]
    fn the_second_strike_within_the_ttl_quarantines() {
        let list = PoisonList::new(TTL, CAPACITY);
        let t0 = Instant::now();
        assert!(!list.strike(hash(1), OPEN, t0));
        assert_eq!(list.remaining(&hash(1), OPEN, t0), None, "one strike refuses nothing");
        assert!(list.strike(hash(1), OPEN, t0 + Duration::from_secs(30)));
        let left = list.remaining(&hash(1), OPEN, t0 + Duration::from_secs(30));
        assert_eq!(left, Some(TTL), "quarantined for a full TTL from the second strike");
        // A strike that expired does not count towards the next one.
        assert!(!list.strike(hash(2), OPEN, t0));
        assert!(!list.strike(hash(2), OPEN, t0 + TTL + Duration::from_secs(1)));
    }

    #[test]
    fn the_list_is_bounded_and_evicts_the_oldest() {
        let list = PoisonList::new(TTL, 3);
        let t0 = Instant::now();
        for n in 0..3 {
            list.convict(hash(n), OPEN, t0 + Duration::from_secs(u64::from(n)));
        }
        list.convict(hash(3), OPEN, t0 + Duration::from_secs(3));
        assert_eq!(list.len(), 3);
        let now = t0 + Duration::from_secs(4);
        assert_eq!(list.remaining(&hash(0), OPEN, now), None, "the oldest made room");
        assert!((1..=3).all(|n| list.remaining(&hash(n), OPEN, now).is_some()));
        // Renewing an entry does not evict another.
        list.convict(hash(1), OPEN, now);
        assert_eq!(list.len(), 3);
        // Expired entries go first, before anything is evicted: 2 has, 1 (renewed) and 3 not.
        let later = t0 + TTL + Duration::from_secs(2);
        list.strike(hash(9), OPEN, later);
        assert_eq!(list.len(), 3);
        assert!(
            list.remaining(&hash(1), OPEN, later).is_some()
                && list.remaining(&hash(3), OPEN, later).is_some()
        );
    }

    #[test]
    fn a_conviction_refuses_its_class_and_costlier_renders_only() {
        let list = PoisonList::new(TTL, CAPACITY);
        let (doc, t0) = (hash(1), Instant::now());
        list.convict(doc, WorkClass::Render(3), t0);
        let now = t0 + Duration::from_secs(1);
        assert!(list.remaining(&doc, WorkClass::Render(3), now).is_some());
        for served in [OPEN, WorkClass::Text, WorkClass::Render(0), WorkClass::Render(2)] {
            assert_eq!(list.remaining(&doc, served, now), None, "{served:?}");
        }
        // A cheaper render's conviction refuses the costlier ones; an open one refuses all.
        list.convict(doc, WorkClass::Render(1), now);
        assert!(list.remaining(&doc, WorkClass::Render(2), now).is_some());
        assert_eq!(list.remaining(&doc, WorkClass::Render(0), now), None);
        list.convict(doc, OPEN, now);
        assert!(list.remaining(&doc, WorkClass::Watermark, now).is_some());
        // The longest time left of the convictions that apply.
        let later = t0 + Duration::from_secs(30);
        list.convict(doc, WorkClass::Render(3), later);
        assert_eq!(list.remaining(&doc, WorkClass::Render(3), later), Some(TTL));
        // Strikes count per class: one at each of two classes quarantines neither.
        let other = hash(2);
        assert!(!list.strike(other, WorkClass::Render(3), t0));
        assert!(!list.strike(other, WorkClass::Text, t0));
        assert_eq!(list.remaining(&other, WorkClass::Render(3), t0), None);
        assert!(list.strike(other, WorkClass::Render(3), t0));
    }

    #[test]
    fn one_document_in_every_class_stays_within_the_capacity() {
        let list = PoisonList::new(TTL, 4);
        let t0 = Instant::now();
        for tier in 0..8u8 {
            list.convict(
                hash(1),
                WorkClass::Render(tier),
                t0 + Duration::from_secs(u64::from(tier)),
            );
        }
        assert_eq!(list.len(), 4);
        let now = t0 + Duration::from_secs(8);
        // The cheapest tiers were the oldest: evicted, so a 150 dpi page is served again.
        assert_eq!(list.remaining(&hash(1), WorkClass::Render(0), now), None);
        assert!(list.remaining(&hash(1), WorkClass::Render(7), now).is_some());
    }
}
