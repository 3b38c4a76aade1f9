//! Converted PDFs by upload and options, within a byte budget, least recently used out first, so
//! a 20-page filmstrip of a DOCX converts once, not 20 times.

use std::sync::Mutex;

use serde::Serialize;

use super::{ConvertOptions, Converted};
use crate::lru::ByteLru;
use crate::ops::DocHash;

/// What a conversion is keyed by: the upload's hash and the options that shape the PDF.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The uploaded Office document's hash.
    pub upload: DocHash,
    /// The conversion options.
    pub options: ConvertOptions,
}

/// The cache's size, for `/readyz` and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheStatus {
    /// PDF bytes held.
    pub bytes: u64,
    /// PDFs held.
    pub entries: usize,
    /// Most PDF bytes held.
    pub budget: u64,
}

/// The bounded cache.
pub struct PdfCache {
    lru: Mutex<ByteLru<CacheKey, Converted>>,
}

impl PdfCache {
    /// An empty cache holding at most `budget` PDF bytes (0 turns it off).
    pub fn new(budget: u64) -> Self {
        Self { lru: Mutex::new(ByteLru::new(budget)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByteLru<CacheKey, Converted>> {
        self.lru.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The PDF for `key`, marked as just used.
    pub fn get(&self, key: &CacheKey) -> Option<Converted> {
        self.lock().get(key).cloned()
    }

    /// Keeps `pdf` under `key`, dropping the least recently used PDFs until it fits; a PDF
    /// larger than the whole budget is not kept.
    pub fn insert(&self, key: CacheKey, pdf: Converted) {
        let size = pdf.pdf.len() as u64;
        // What went is dropped after the lock, not under it.
        let _gone = self.lock().insert(key, pdf, size);
    }

    /// The current size.
    pub fn status(&self) -> CacheStatus {
        let lru = self.lock();
        CacheStatus { bytes: lru.bytes(), entries: lru.len(), budget: lru.budget() }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use bytes::Bytes;

    use super::*;
    use crate::office::PdfA;

    fn key(name: &str, pdfa: Option<PdfA>) -> CacheKey {
        CacheKey {
            upload: DocHash::of(name.as_bytes()),
            options: ConvertOptions { pdfa, pages: None },
        }
    }

    fn pdf(len: usize) -> Converted {
        let bytes = Bytes::from(vec![b'%'; len]);
        Converted { hash: DocHash::of(&bytes), pdf: bytes }
    }

    #[test]
    fn keeps_within_the_budget_dropping_the_least_recently_used() {
        let cache = PdfCache::new(100);
        cache.insert(key("a", None), pdf(40));
        cache.insert(key("b", None), pdf(40));
        assert!(cache.get(&key("a", None)).is_some()); // b is now the oldest
        cache.insert(key("c", None), pdf(40));
        assert!(cache.get(&key("b", None)).is_none());
        assert!(cache.get(&key("a", None)).is_some());
        assert!(cache.get(&key("c", None)).is_some());
        assert_eq!(cache.status(), CacheStatus { bytes: 80, entries: 2, budget: 100 });
    }

    #[test]
    fn options_are_part_of_the_key_and_oversized_pdfs_are_not_kept() {
        let cache = PdfCache::new(100);
        cache.insert(key("a", None), pdf(10));
        assert!(cache.get(&key("a", Some(PdfA::A2b))).is_none());
        cache.insert(key("a", Some(PdfA::A2b)), pdf(20));
        cache.insert(key("a", Some(PdfA::A2b)), pdf(30)); // replaces, not adds
        assert_eq!(cache.status().bytes, 40);
        cache.insert(key("big", None), pdf(101));
        assert!(cache.get(&key("big", None)).is_none());
        assert_eq!(cache.status().entries, 2);
        let off = PdfCache::new(0);
        off.insert(key("a", None), pdf(1));
        assert_eq!(off.status().entries, 0);
    }
}
