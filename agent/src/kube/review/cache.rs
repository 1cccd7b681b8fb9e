//! Review answers that expire, at most [`CACHE_ENTRIES`].

use std::{collections::HashMap, hash::Hash, time::Duration};

use tokio::time::Instant;

use super::CACHE_ENTRIES;

/// Answers that expire, at most [`CACHE_ENTRIES`].
#[derive(Debug)]
pub(super) struct Cache<K, V> {
    pub(super) entries: HashMap<K, (Instant, V)>,
}

impl<K: Hash + Eq + Clone, V: Clone> Cache<K, V> {
    pub(super) fn new() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }

    pub(super) fn get(&self, k: &K, now: Instant) -> Option<V> {
        self.entries
            .get(k)
            .filter(|(until, _)| *until > now)
            .map(|(_, v)| v.clone())
    }

    pub(super) fn put(&mut self, k: K, v: V, ttl: Duration, now: Instant) {
        if self.entries.len() >= CACHE_ENTRIES && !self.entries.contains_key(&k) {
            self.entries.retain(|_, (until, _)| *until > now);
            if self.entries.len() >= CACHE_ENTRIES
                && let Some(first) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (until, _))| *until)
                    .map(|(k, _)| k.clone())
            {
                self.entries.remove(&first);
            }
        }
        self.entries.insert(k, (now + ttl, v));
    }
}
