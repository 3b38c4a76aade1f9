//! Converted PDFs by upload and options, within a byte budget, least recently used out first, so
//! a 20-page filmstrip of a DOCX converts once, not 20 times.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde::Serialize;

use super::{ConvertOptions, Converted};
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

struct Entry {
    pdf: Converted,
    used: u64,
}

#[derive(Default)]
struct Lru {
    entries: HashMap<CacheKey, Entry>,
    /// Last use (a counter) to key, oldest first.
    order: BTreeMap<u64, CacheKey>,
    bytes: u64,
    clock: u64,
}

/// The bounded cache.
pub struct PdfCache {
    budget: u64,
    lru: Mutex<Lru>,
}

impl PdfCache {
    /// An empty cache holding at most `budget` PDF bytes (0 turns it off).
    pub fn new(budget: u64) -> Self {
        Self { budget, lru: Mutex::new(Lru::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The PDF for `key`, marked as just used.
    pub fn get(&self, key: &CacheKey) -> Option<Converted> {
        let mut lru = self.lock();
        lru.clock += 1;
        let now = lru.clock;
        let entry = lru.entries.get_mut(key)?;
        let before = std::mem::replace(&mut entry.used, now);
        let pdf = entry.pdf.clone();
        lru.order.remove(&before);
        lru.order.insert(now, key.clone());
        Some(pdf)
    }

    /// Keeps `pdf` under `key`, dropping the least recently used PDFs until it fits; a PDF
    /// larger than the whole budget is not kept.
    pub fn insert(&self, key: CacheKey, pdf: Converted) {
        let size = pdf.pdf.len() as u64;
        if size > self.budget {
            return;
        }
        let mut lru = self.lock();
        if let Some(old) = lru.entries.remove(&key) {
            lru.order.remove(&old.used);
            lru.bytes -= old.pdf.pdf.len() as u64;
        }
        while lru.bytes + size > self.budget {
            let Some((_, oldest)) = lru.order.pop_first() else { break };
            if let Some(evicted) = lru.entries.remove(&oldest) {
                lru.bytes -= evicted.pdf.pdf.len() as u64;
            }
        }
        lru.clock += 1;
        let used = lru.clock;
        lru.order.insert(used, key.clone());
        lru.entries.insert(key, Entry { pdf, used });
        lru.bytes += size;
    }

    /// The current size.
    pub fn status(&self) -> CacheStatus {
        let lru = self.lock();
        CacheStatus { bytes: lru.bytes, entries: lru.entries.len(), budget: self.budget }
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
