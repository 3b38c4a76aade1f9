//! Which document an object was when last read: its URL to the ETag it had and the document's
//! hash. The bytes themselves live in the pod's one document cache ([`DocCache`]), beside
//! uploads named by digest, where the upload budget can take them back when it needs room; this
//! index only says which cached document an unchanged object is.
//!
//! [`DocCache`]: crate::doc_cache::DocCache

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use renderpool_api::jobs::ObjectUrl;
use serde::Serialize;

use crate::lru::ByteLru;
use crate::ops::DocHash;

/// Objects remembered at most (each costs its URL and ETag, a few hundred bytes).
const MAX_OBJECTS: u64 = 4096;

/// What the index holds, for `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EtagStatus {
    /// Objects whose last ETag and document are known.
    pub entries: usize,
    /// Reads answered from the document cache after the store said the object was unchanged.
    pub hits: u64,
}

/// An object's ETag when read, and the hash of the document it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    pub etag: String,
    pub hash: DocHash,
}

/// URLs to what they were when last read, the least recently used forgotten first.
pub(super) struct EtagIndex {
    seen: Mutex<ByteLru<ObjectUrl, Seen>>,
    hits: AtomicU64,
}

impl EtagIndex {
    pub(super) fn new() -> Self {
        Self { seen: Mutex::new(ByteLru::new(MAX_OBJECTS)), hits: AtomicU64::new(0) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByteLru<ObjectUrl, Seen>> {
        self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What `url` was when last read, marked as just used.
    pub(super) fn get(&self, url: &ObjectUrl) -> Option<Seen> {
        self.lock().get(url).cloned()
    }

    /// Remembers that `url` had `etag` and was the document `hash`.
    pub(super) fn put(&self, url: &ObjectUrl, seen: Seen) {
        // One unit each: the bound counts objects.
        self.lock().insert(url.clone(), seen, 1);
    }

    /// Forgets `url` (its document left the cache).
    pub(super) fn forget(&self, url: &ObjectUrl) {
        self.lock().remove(url);
    }

    /// Counts a read answered from the document cache.
    pub(super) fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn status(&self) -> EtagStatus {
        EtagStatus { entries: self.lock().len(), hits: self.hits.load(Ordering::Relaxed) }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn url(key: &str) -> ObjectUrl {
        ObjectUrl {
            scheme: renderpool_api::jobs::Scheme::S3,
            bucket: "docs".into(),
            key: key.into(),
        }
    }

    fn seen(etag: &str, document: &[u8]) -> Seen {
        Seen { etag: etag.into(), hash: DocHash::of(document) }
    }

    #[test]
    fn a_new_version_replaces_the_old_and_the_oldest_goes_past_the_bound() {
        let index = EtagIndex::new();
        index.put(&url("a"), seen("1", b"first"));
        index.put(&url("a"), seen("2", b"second"));
        assert_eq!(index.get(&url("a")), Some(seen("2", b"second")));
        for n in 0..MAX_OBJECTS {
            index.put(&url(&n.to_string()), seen("x", b"x"));
        }
        assert_eq!(index.get(&url("a")), None, "the least recently used went first");
        assert_eq!(index.status().entries as u64, MAX_OBJECTS);
        index.forget(&url("0"));
        assert_eq!(index.get(&url("0")), None);
        index.hit();
        assert_eq!(index.status().hits, 1);
    }
}
