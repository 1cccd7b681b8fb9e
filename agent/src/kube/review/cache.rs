//! Review answers that expire, at most [`CACHE_ENTRIES`]; a positive one is
//! served past its TTL, for as long again at most, while one re-review runs.

use std::{collections::HashMap, hash::Hash, time::Duration};

use tokio::time::Instant;

use super::CACHE_ENTRIES;

#[derive(Debug)]
struct Entry<V> {
    value: V,
    /// Served as it is until then.
    fresh_until: Instant,
    /// Served while re-reviewed until then (`fresh_until` when never).
    stale_until: Instant,
    /// A re-review is under way.
    revalidating: bool,
}

/// Answers that expire, at most [`CACHE_ENTRIES`].
#[derive(Debug)]
pub(super) struct Cache<K, V> {
    entries: HashMap<K, Entry<V>>,
}

impl<K: Hash + Eq + Clone, V: Clone> Cache<K, V> {
    pub(super) fn new() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }

    /// The answer for `k`, and whether the caller is to re-review it now: when
    /// it is stale, no re-review is under way and `budget()` says yes.
    pub(super) fn get(
        &mut self,
        k: &K,
        now: Instant,
        budget: impl FnOnce() -> bool,
    ) -> Option<(V, bool)> {
        let e = self.entries.get_mut(k)?;
        if now < e.fresh_until {
            return Some((e.value.clone(), false));
        }
        if now >= e.stale_until {
            return None;
        }
        let revalidate = !e.revalidating && budget();
        e.revalidating |= revalidate;
        Some((e.value.clone(), revalidate))
    }

    /// Keeps `v` for `ttl`; with `serve_stale`, then for up to `ttl` again while
    /// it is re-reviewed. When full, expired answers go, then the one nearest
    /// its end, those that cannot be served stale first.
    pub(super) fn put(&mut self, k: K, v: V, ttl: Duration, serve_stale: bool, now: Instant) {
        if self.entries.len() >= CACHE_ENTRIES && !self.entries.contains_key(&k) {
            self.entries.retain(|_, e| e.stale_until > now);
            if self.entries.len() >= CACHE_ENTRIES
                && let Some(first) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| (e.stale_until > e.fresh_until, e.stale_until))
                    .map(|(k, _)| k.clone())
            {
                self.entries.remove(&first);
            }
        }
        let fresh_until = now + ttl;
        self.entries.insert(
            k,
            Entry {
                value: v,
                fresh_until,
                stale_until: if serve_stale {
                    fresh_until + ttl
                } else {
                    fresh_until
                },
                revalidating: false,
            },
        );
    }

    /// A re-review of `k` could not be done: the next request may try again.
    pub(super) fn retry(&mut self, k: &K) {
        if let Some(e) = self.entries.get_mut(k) {
            e.revalidating = false;
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}
