//! Poison pills: documents that crashed a worker, refused fast for a while.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ops::DocHash;

/// Documents that crashed a worker, each with the instant its quarantine ends.
#[derive(Debug)]
pub struct PoisonList {
    ttl: Duration,
    entries: Mutex<HashMap<DocHash, Instant>>,
}

impl PoisonList {
    /// An empty list whose entries last `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    /// Quarantines `hash` from `now`.
    pub fn add(&self, hash: DocHash, now: Instant) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|_, until| *until > now);
            entries.insert(hash, now + self.ttl);
        }
    }

    /// Time left in quarantine for `hash`, if any.
    pub fn remaining(&self, hash: &DocHash, now: Instant) -> Option<Duration> {
        let entries = self.entries.lock().ok()?;
        entries.get(hash).and_then(|until| until.checked_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn quarantine_expires() {
        let list = PoisonList::new(Duration::from_secs(60));
        let (a, b) = (DocHash::of(b"a"), DocHash::of(b"b"));
        let t0 = Instant::now();
        list.add(a, t0);
        assert_eq!(list.remaining(&a, t0 + Duration::from_secs(10)), Some(Duration::from_secs(50)));
        assert_eq!(list.remaining(&b, t0), None);
        assert_eq!(list.remaining(&a, t0 + Duration::from_secs(61)), None);
    }
}
