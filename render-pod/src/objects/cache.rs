//! Fetched documents by URL and ETag, within a byte bound, least recently used out first. An
//! entry keeps its document's reservation in the upload budget, so what the cache holds is
//! counted like any document in memory; a hit shares the bytes and the reservation.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use renderpool_api::jobs::ObjectUrl;
use serde::Serialize;

use super::Fetched;

/// The cache's size, for `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheStatus {
    /// Document bytes held.
    pub bytes: u64,
    /// Documents held.
    pub entries: usize,
    /// Most bytes held.
    pub budget: u64,
    /// Fetches answered by an unchanged ETag.
    pub hits: u64,
}

#[derive(Default)]
struct Lru {
    entries: HashMap<ObjectUrl, (Fetched, u64)>,
    /// Last use (a counter) to URL, oldest first.
    order: BTreeMap<u64, ObjectUrl>,
    bytes: u64,
    clock: u64,
}

/// The bounded cache.
pub(super) struct EtagCache {
    budget: u64,
    lru: Mutex<Lru>,
    pub(super) hits: AtomicU64,
}

impl EtagCache {
    /// An empty cache of at most `budget` bytes (0: it keeps nothing).
    pub(super) fn new(budget: u64) -> Self {
        Self { budget, lru: Mutex::new(Lru::default()), hits: AtomicU64::new(0) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The entry for `url`, marked as just used.
    pub(super) fn get(&self, url: &ObjectUrl) -> Option<Fetched> {
        let mut lru = self.lock();
        lru.clock += 1;
        let now = lru.clock;
        let (fetched, used) = lru.entries.get_mut(url)?;
        let (fetched, before) = (fetched.clone(), std::mem::replace(used, now));
        lru.order.remove(&before);
        lru.order.insert(now, url.clone());
        Some(fetched)
    }

    /// Keeps `fetched` for `url` (with an ETag to check it by), evicting the least recently
    /// used entries to make room; a document larger than the whole cache is not kept.
    pub(super) fn put(&self, url: &ObjectUrl, fetched: &Fetched) {
        let size = fetched.bytes.len() as u64;
        if fetched.etag.is_none() || size > self.budget {
            return;
        }
        let mut lru = self.lock();
        if let Some((old, used)) = lru.entries.remove(url) {
            lru.order.remove(&used);
            lru.bytes -= old.bytes.len() as u64;
        }
        while lru.bytes + size > self.budget {
            let Some((_, oldest)) = lru.order.pop_first() else { break };
            if let Some((gone, _)) = lru.entries.remove(&oldest) {
                lru.bytes -= gone.bytes.len() as u64;
            }
        }
        lru.clock += 1;
        let now = lru.clock;
        lru.order.insert(now, url.clone());
        lru.entries.insert(url.clone(), (fetched.clone(), now));
        lru.bytes += size;
    }

    pub(super) fn status(&self) -> CacheStatus {
        let lru = self.lock();
        CacheStatus {
            bytes: lru.bytes,
            entries: lru.entries.len(),
            budget: self.budget,
            hits: self.hits.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::byte_budget::ByteBudget;

    fn fetched(budget: &Arc<ByteBudget>, len: usize, etag: Option<&str>) -> Fetched {
        Fetched {
            bytes: Bytes::from(vec![0u8; len]),
            etag: etag.map(str::to_string),
            reservation: Arc::new(budget.reserve(len as u64).unwrap()),
        }
    }

    fn url(key: &str) -> ObjectUrl {
        ObjectUrl { bucket: "docs".into(), key: key.into() }
    }

    #[test]
    fn least_recently_used_goes_first_and_entries_hold_their_budget() {
        let budget = ByteBudget::new(1000, Default::default());
        let cache = EtagCache::new(250);
        cache.put(&url("a"), &fetched(&budget, 100, Some("1")));
        cache.put(&url("b"), &fetched(&budget, 100, Some("2")));
        assert_eq!(budget.used(), 200, "the cache holds its documents' reservations");
        assert!(cache.get(&url("a")).is_some());
        cache.put(&url("c"), &fetched(&budget, 100, Some("3")));
        assert!(cache.get(&url("b")).is_none(), "b was the least recently used");
        assert!(cache.get(&url("a")).is_some() && cache.get(&url("c")).is_some());
        assert_eq!(budget.used(), 200, "an evicted document gives its bytes back");
        // Without an ETag there is nothing to check a copy by; larger than the cache, no room.
        cache.put(&url("d"), &fetched(&budget, 10, None));
        cache.put(&url("e"), &fetched(&budget, 300, Some("5")));
        assert!(cache.get(&url("d")).is_none() && cache.get(&url("e")).is_none());
        // A new version replaces the old one.
        cache.put(&url("a"), &fetched(&budget, 50, Some("9")));
        assert_eq!(cache.get(&url("a")).unwrap().etag.as_deref(), Some("9"));
        assert_eq!(cache.status().bytes, 150);
        assert_eq!(budget.used(), 150);
    }
}
