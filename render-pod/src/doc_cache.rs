//! Documents the pod holds after they arrived, by digest, so a client that names one by its
//! digest is answered without sending it again (a viewer paging through a manual uploads it
//! once, not once a page). An upload whose bytes were reserved and hashed as they arrived is
//! kept ([`DocCache::insert`]) and found again by digest ([`DocCache::get`]).
//!
//! The bytes stay in the upload budget while the cache keeps them (each document with the
//! reservation it arrived with), so the budget counts every document in the supervisor's memory
//! once, held by a request or by the cache alone; bytes the cache alone holds are given back,
//! least recently used first, as soon as a reservation does not fit otherwise
//! ([`Reclaim`]). Past its own bound the least recently used go too.
//!
//! A document is found only by digests computed from its own bytes: its BLAKE3 (the pod's
//! [`DocHash`]) and the SHA-256 a client declared for it and the pod checked on arrival.

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

use crate::byte_budget::{ByteBudget, Reclaim, Reservation};
use crate::lru::ByteLru;
use crate::metrics::{CounterFamily, Register, count};
use crate::ops::DocHash;

/// A digest a client may name a document by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Digest {
    /// BLAKE3, the pod's own hash (`blake3` in `Repr-Digest`).
    Blake3(DocHash),
    /// SHA-256 (`sha-256`).
    Sha256([u8; 32]),
}

/// A document in the supervisor's memory, and its bytes' reservation in the upload budget
/// (held as long as any holder keeps this).
#[derive(Debug, Clone)]
pub struct HeldDocument {
    /// The document.
    pub bytes: Bytes,
    /// `DocHash::of(bytes)`.
    pub hash: DocHash,
    /// Its bytes in the upload budget.
    pub reservation: Arc<Reservation>,
}

impl HeldDocument {
    /// True when nothing but the cache holds it: dropping it gives its bytes back.
    fn held_alone(&self) -> bool {
        Arc::strong_count(&self.reservation) == 1
    }
}

/// What the cache holds, for `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DocCacheStatus {
    /// Document bytes held.
    pub bytes: u64,
    /// Documents held.
    pub entries: usize,
    /// Most document bytes held.
    pub budget: u64,
}

struct Entry {
    document: HeldDocument,
    /// The SHA-256 checked for it, when a client declared one.
    sha256: Option<[u8; 32]>,
}

struct Inner {
    lru: ByteLru<DocHash, Entry>,
    by_sha256: HashMap<[u8; 32], DocHash>,
}

impl Inner {
    /// Forgets the aliases of entries that went.
    fn forget(&mut self, gone: &[Entry]) {
        for entry in gone {
            if let Some(sha256) = &entry.sha256 {
                self.by_sha256.remove(sha256);
            }
        }
    }
}

/// The documents the pod holds.
pub struct DocCache {
    inner: Mutex<Inner>,
    /// The upload budget its documents are reserved in.
    budget: Arc<ByteBudget>,
    metrics: DocCacheMetrics,
}

impl DocCache {
    /// An empty cache of at most `bound` bytes (0 turns it off) whose documents are reserved in
    /// `budget`; the budget asks it for room when a reservation does not fit.
    pub fn new(bound: u64, budget: Arc<ByteBudget>) -> Arc<Self> {
        let inner = Inner { lru: ByteLru::new(bound), by_sha256: HashMap::new() };
        let cache = Arc::new(Self {
            inner: Mutex::new(inner),
            budget: budget.clone(),
            metrics: DocCacheMetrics::default(),
        });
        let holder: Arc<dyn Reclaim> = cache.clone();
        budget.reclaim_from(Arc::downgrade(&holder));
        cache
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The document any of `digests` names, marked as just used; counted as a hit or a miss.
    pub fn get(&self, digests: &[Digest]) -> Option<HeldDocument> {
        let found = self.get_uncounted(digests);
        count(&self.metrics.lookups, "result", if found.is_some() { "hit" } else { "miss" });
        found
    }

    /// As [`DocCache::get`], not counted: for a caller that counts its own hits (the object
    /// store's, whose copy a conditional request may yet find stale).
    pub fn get_uncounted(&self, digests: &[Digest]) -> Option<HeldDocument> {
        let mut inner = self.lock();
        let hash = digests.iter().find_map(|digest| match digest {
            Digest::Blake3(hash) => inner.lru.peek(hash).map(|_| *hash),
            Digest::Sha256(sha256) => inner.by_sha256.get(sha256).copied(),
        });
        hash.and_then(|hash| inner.lru.get(&hash)).map(|entry| entry.document.clone())
    }

    /// Keeps `document` (whose `hash` is its bytes' BLAKE3), and finds it by `sha256` too when
    /// given (the caller checked it against the bytes). Returns the document the cache holds
    /// under that hash: this one, or the copy it held already (so every request for it shares
    /// one copy and one reservation).
    pub fn insert(&self, document: HeldDocument, sha256: Option<[u8; 32]>) -> HeldDocument {
        // Exactly the document's bytes stay reserved (an upload in a form reserved the form).
        document.reservation.shrink_to(document.bytes.len() as u64);
        let mut guard = self.lock();
        let inner = &mut *guard;
        if let Some(entry) = inner.lru.get(&document.hash) {
            if let Some(sha256) = sha256 {
                entry.sha256 = Some(sha256);
                inner.by_sha256.insert(sha256, document.hash);
            }
            return entry.document.clone();
        }
        let size = document.bytes.len() as u64;
        let entry = Entry { document: document.clone(), sha256 };
        let gone = inner.lru.insert(document.hash, entry, size);
        inner.forget(&gone);
        if let Some(sha256) = sha256
            && inner.lru.peek(&document.hash).is_some()
        {
            inner.by_sha256.insert(sha256, document.hash);
        }
        self.metrics.show(&inner.lru);
        document
    }

    /// What it holds now.
    pub fn status(&self) -> DocCacheStatus {
        let inner = self.lock();
        DocCacheStatus {
            bytes: inner.lru.bytes(),
            entries: inner.lru.len(),
            budget: inner.lru.budget(),
        }
    }

    /// Its metrics, for the exposition.
    pub fn metrics(&self) -> &DocCacheMetrics {
        &self.metrics
    }
}

impl Reclaim for DocCache {
    fn reclaim(&self, bytes: u64) {
        let mut inner = self.lock();
        let mut dropped = 0u64;
        while self.budget.free() < bytes {
            let Some((_, entry)) = inner.lru.pop_oldest(|e| e.document.held_alone()) else {
                break;
            };
            inner.forget(std::slice::from_ref(&entry));
            // Its bytes go back now: the caller retries its reservation right after.
            drop(entry);
            dropped += 1;
        }
        if dropped > 0 {
            self.metrics.reclaimed.inc_by(dropped);
            self.metrics.show(&inner.lru);
        }
    }
}

/// The cache's metrics.
#[derive(Default)]
pub struct DocCacheMetrics {
    /// Lookups by digest, by result (`hit`, `miss`).
    lookups: CounterFamily,
    /// Documents given back to the upload budget for a reservation that did not fit.
    reclaimed: prometheus_client::metrics::counter::Counter,
    bytes: Gauge<i64, AtomicI64>,
    entries: Gauge<i64, AtomicI64>,
}

impl DocCacheMetrics {
    fn show(&self, lru: &ByteLru<DocHash, Entry>) {
        self.bytes.set(i64::try_from(lru.bytes()).unwrap_or(i64::MAX));
        self.entries.set(i64::try_from(lru.len()).unwrap_or(i64::MAX));
    }
}

impl Register for DocCacheMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "document_cache_lookups",
            "Requests that named their document by digest, by whether the pod held it",
            self.lookups.clone(),
        );
        registry.register(
            "document_cache_reclaimed",
            "Held documents dropped to make room in the upload budget",
            self.reclaimed.clone(),
        );
        registry.register(
            "document_cache_bytes",
            "Bytes of documents the pod holds by digest (within the upload budget)",
            self.bytes.clone(),
        );
        registry.register(
            "document_cache_entries",
            "Documents the pod holds by digest",
            self.entries.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use prometheus_client::metrics::gauge::Gauge;
    use sha2::{Digest as _, Sha256};

    use super::*;

    /// `content` arrived as an upload that reserved `reserved` bytes of `budget`.
    fn arrived(budget: &Arc<ByteBudget>, content: &[u8], reserved: u64) -> HeldDocument {
        HeldDocument {
            bytes: Bytes::copy_from_slice(content),
            hash: DocHash::of(content),
            reservation: Arc::new(budget.reserve(reserved).expect("room for the upload")),
        }
    }

    fn sha256(content: &[u8]) -> [u8; 32] {
        Sha256::digest(content).into()
    }

    #[test]
    fn a_document_is_found_by_its_own_digests_only() {
        let budget = ByteBudget::new(1000, Gauge::default());
        let cache = DocCache::new(1000, budget.clone());
        let (a, b) = (b"document a".as_slice(), b"document b".as_slice());
        cache.insert(arrived(&budget, a, 10), Some(sha256(a)));
        cache.insert(arrived(&budget, b, 10), None);
        let by_sha = cache.get(&[Digest::Sha256(sha256(a))]).unwrap();
        let by_blake3 = cache.get(&[Digest::Blake3(DocHash::of(a))]).unwrap();
        assert_eq!((&by_sha.bytes[..], &by_blake3.bytes[..]), (a, a));
        assert_eq!(&cache.get(&[Digest::Blake3(DocHash::of(b))]).unwrap().bytes[..], b);
        // b was kept without a SHA-256: it is not found by one, nor is anything else.
        assert!(cache.get(&[Digest::Sha256(sha256(b))]).is_none());
        assert!(cache.get(&[Digest::Blake3(DocHash::of(b"document c"))]).is_none());
        // The first digest the cache knows wins; an unknown one beside it does no harm.
        let mixed = [Digest::Sha256(sha256(b"unknown")), Digest::Blake3(DocHash::of(b))];
        assert_eq!(&cache.get(&mixed).unwrap().bytes[..], b);
        assert_eq!(cache.status(), DocCacheStatus { bytes: 20, entries: 2, budget: 1000 });
    }

    #[test]
    fn only_counted_lookups_count() {
        let budget = ByteBudget::new(1000, Gauge::default());
        let cache = DocCache::new(1000, budget.clone());
        cache.insert(arrived(&budget, b"kept", 4), None);
        let hash = [Digest::Blake3(DocHash::of(b"kept"))];
        assert!(cache.get_uncounted(&hash).is_some());
        let lookups = |result: &'static str| {
            let labels: crate::metrics::Labels = vec![("result", result)];
            cache.metrics.lookups.get_or_create(&labels).get()
        };
        assert_eq!((lookups("hit"), lookups("miss")), (0, 0));
        assert!(cache.get(&hash).is_some());
        assert_eq!(lookups("hit"), 1);
    }

    #[test]
    fn a_second_arrival_shares_the_first_copy_and_adds_its_sha256() {
        let budget = ByteBudget::new(1000, Gauge::default());
        let cache = DocCache::new(1000, budget.clone());
        let first = cache.insert(arrived(&budget, b"same", 4), None);
        let second = cache.insert(arrived(&budget, b"same", 4), Some(sha256(b"same")));
        assert!(Arc::ptr_eq(&first.reservation, &second.reservation));
        assert_eq!(budget.used(), 4, "the second copy went with its reservation");
        assert!(cache.get(&[Digest::Sha256(sha256(b"same"))]).is_some());
    }

    #[test]
    fn exactly_the_document_stays_reserved() {
        let budget = ByteBudget::new(1000, Gauge::default());
        let cache = DocCache::new(1000, budget.clone());
        // A form of 300 bytes carried a document of 100.
        let kept = cache.insert(arrived(&budget, &[7u8; 100], 300), None);
        assert_eq!((kept.reservation.bytes(), budget.used()), (100, 100));
    }

    #[test]
    fn documents_held_alone_give_their_room_to_an_upload() {
        let budget = ByteBudget::new(100, Gauge::default());
        let cache = DocCache::new(100, budget.clone());
        let held_by_a_request = cache.insert(arrived(&budget, &[1u8; 40], 40), None);
        drop(cache.insert(arrived(&budget, &[2u8; 40], 40), Some(sha256(&[2u8; 40]))));
        assert_eq!(budget.free(), 20);
        // 50 bytes fit once the document nothing but the cache holds goes.
        let upload = budget.reserve(50).expect("room reclaimed");
        assert_eq!(budget.used(), 90);
        assert!(cache.get(&[Digest::Sha256(sha256(&[2u8; 40]))]).is_none(), "its alias went");
        assert!(cache.get(&[Digest::Blake3(DocHash::of(&[2u8; 40]))]).is_none());
        // The one a request holds stays, and room it cannot give is not found.
        assert!(budget.reserve(20).is_none());
        assert!(cache.get(&[Digest::Blake3(held_by_a_request.hash)]).is_some());
        drop(upload);
        assert_eq!(cache.status().entries, 1);
    }

    #[test]
    fn past_its_bound_the_least_recently_used_go() {
        let budget = ByteBudget::new(1000, Gauge::default());
        let cache = DocCache::new(50, budget.clone());
        cache.insert(arrived(&budget, &[1u8; 30], 30), Some(sha256(&[1u8; 30])));
        cache.insert(arrived(&budget, &[2u8; 30], 30), None);
        assert!(cache.get(&[Digest::Sha256(sha256(&[1u8; 30]))]).is_none());
        assert_eq!(cache.status().entries, 1);
        assert_eq!(budget.used(), 30, "the document that went gave its bytes back");
        // Off: nothing is kept, and nothing stays reserved for it.
        let off = DocCache::new(0, budget.clone());
        drop(off.insert(arrived(&budget, &[3u8; 10], 10), None));
        assert_eq!((off.status().entries, budget.used()), (0, 30));
    }
}
