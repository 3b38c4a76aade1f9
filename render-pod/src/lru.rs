//! Entries within a byte bound, least recently used out first: the Office path's converted PDFs
//! and the documents the pod holds by digest keep theirs in one each. Not thread-safe by itself:
//! its owner holds it behind a lock.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

struct Slot<V> {
    value: V,
    bytes: u64,
    /// Last use, on the clock below.
    used: u64,
}

/// Values by key, at most `budget` bytes of them (each value's size is given when it is kept).
pub struct ByteLru<K, V> {
    entries: HashMap<K, Slot<V>>,
    /// Last use to key, oldest first.
    order: BTreeMap<u64, K>,
    bytes: u64,
    clock: u64,
    budget: u64,
}

impl<K: Eq + Hash + Clone, V> ByteLru<K, V> {
    /// An empty one holding at most `budget` bytes (0: nothing is kept).
    pub fn new(budget: u64) -> Self {
        Self { entries: HashMap::new(), order: BTreeMap::new(), bytes: 0, clock: 0, budget }
    }

    /// The bound.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The value of `key`, marked as just used.
    pub fn get(&mut self, key: &K) -> Option<&mut V> {
        let now = self.tick();
        let slot = self.entries.get_mut(key)?;
        let before = std::mem::replace(&mut slot.used, now);
        self.order.remove(&before);
        self.order.insert(now, key.clone());
        Some(&mut slot.value)
    }

    /// The value of `key`, not marked as used.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|slot| &slot.value)
    }

    /// Keeps `value` of `bytes` under `key` (replacing what `key` held), dropping the least
    /// recently used entries until it fits. Returns every value that went, the replaced one
    /// included; a value larger than the whole budget is not kept and comes back among them.
    pub fn insert(&mut self, key: K, value: V, bytes: u64) -> Vec<V> {
        let mut gone: Vec<V> = self.remove(&key).into_iter().collect();
        if bytes > self.budget {
            gone.push(value);
            return gone;
        }
        while self.bytes + bytes > self.budget {
            match self.pop_oldest(|_| true) {
                Some((_, value)) => gone.push(value),
                None => break,
            }
        }
        let used = self.tick();
        self.order.insert(used, key.clone());
        self.entries.insert(key, Slot { value, bytes, used });
        self.bytes += bytes;
        gone
    }

    /// Removes `key`'s entry.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let slot = self.entries.remove(key)?;
        self.order.remove(&slot.used);
        self.bytes -= slot.bytes;
        Some(slot.value)
    }

    /// Removes the least recently used entry that `evictable` accepts.
    pub fn pop_oldest(&mut self, evictable: impl Fn(&V) -> bool) -> Option<(K, V)> {
        let key = self
            .order
            .values()
            .find(|key| self.entries.get(*key).is_some_and(|slot| evictable(&slot.value)))?
            .clone();
        let value = self.remove(&key)?;
        Some((key, value))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn keeps_within_the_budget_dropping_the_least_recently_used() {
        let mut lru = ByteLru::new(100);
        assert!(lru.insert("a", 1, 40).is_empty());
        assert!(lru.insert("b", 2, 40).is_empty());
        assert_eq!(lru.get(&"a"), Some(&mut 1)); // b is now the oldest
        assert_eq!(lru.insert("c", 3, 40), vec![2]);
        assert_eq!((lru.peek(&"b"), lru.peek(&"a"), lru.peek(&"c")), (None, Some(&1), Some(&3)));
        assert_eq!((lru.bytes(), lru.len()), (80, 2));
    }

    #[test]
    fn a_key_is_replaced_and_an_oversized_value_is_not_kept() {
        let mut lru = ByteLru::new(100);
        lru.insert("a", 1, 10);
        assert_eq!(lru.insert("a", 2, 30), vec![1], "replaced, not added");
        assert_eq!(lru.bytes(), 30);
        assert_eq!(lru.insert("big", 3, 101), vec![3]);
        assert_eq!((lru.peek(&"big"), lru.len()), (None, 1));
        let mut off = ByteLru::new(0);
        assert_eq!(off.insert("a", 1, 1), vec![1]);
        assert!(off.is_empty());
        // Empty values fit even a budget of nothing.
        assert!(off.insert("empty", 2, 0).is_empty());
    }

    #[test]
    fn the_oldest_evictable_entry_goes_first() {
        let mut lru = ByteLru::new(100);
        for (key, value) in [("a", 1), ("b", 2), ("c", 3)] {
            lru.insert(key, value, 10);
        }
        assert_eq!(lru.pop_oldest(|v| *v != 1), Some(("b", 2)));
        assert_eq!(lru.pop_oldest(|v| *v > 5), None);
        assert_eq!(lru.remove(&"a"), Some(1));
        assert_eq!((lru.bytes(), lru.len()), (10, 1));
    }
}
