//! The agent's one TTL cache: answers that expire, at most a given number; an
//! answer may be served past its TTL, for as long again at most, while one
//! refresh runs (stale-while-revalidate). Scrape reviews, the Services read for
//! this node's addresses and the routes to its shadowed pods all keep their
//! answers here.
//!
//! A crate would do: mini-moka and moka have one TTL per cache (reviews keep
//! allowed and denied answers for different times), cannot serve stale while
//! refreshing, read a clock tokio cannot pause, and bring a concurrent map the
//! agent, which holds each cache under one lock or in one task, does not need.

use std::{collections::HashMap, hash::Hash, time::Duration};

// Tokio's clock, so that tests can pause it and cross a TTL in no time.
use tokio::time::Instant;

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

/// Answers that expire, at most `capacity` of them.
#[derive(Debug)]
pub(crate) struct Cache<K, V> {
    entries: HashMap<K, Entry<V>>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Cache<K, V> {
    /// An empty cache of at most `capacity` answers.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// The answer for `k`, and whether the caller is to re-review it now: when
    /// it is stale, no re-review is under way and `budget()` says yes.
    pub(crate) fn get(
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
    pub(crate) fn put(&mut self, k: K, v: V, ttl: Duration, serve_stale: bool, now: Instant) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&k) {
            self.entries.retain(|_, e| e.stale_until > now);
            if self.entries.len() >= self.capacity
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
        let stale_until = fresh_until + if serve_stale { ttl } else { Duration::ZERO };
        self.entries.insert(
            k,
            Entry {
                value: v,
                fresh_until,
                stale_until,
                revalidating: false,
            },
        );
    }

    /// A re-review of `k` could not be done: the next request may try again.
    pub(crate) fn retry(&mut self, k: &K) {
        if let Some(e) = self.entries.get_mut(k) {
            e.revalidating = false;
        }
    }

    /// Whether `k`'s answer is fresh at `now` (not merely servable stale).
    pub(crate) fn fresh(&self, k: &K, now: Instant) -> bool {
        self.entries.get(k).is_some_and(|e| now < e.fresh_until)
    }

    /// When `k`'s answer stops being fresh, if there is one.
    pub(crate) fn fresh_until(&self, k: &K) -> Option<Instant> {
        self.entries.get(k).map(|e| e.fresh_until)
    }

    /// Keeps the answers whose key `keep` wants.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.entries.retain(|k, _| keep(k));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_answer_is_fresh_for_its_ttl_then_gone_unless_served_stale() {
        let mut c = Cache::<&str, u8>::new(2);
        let t0 = Instant::now();
        c.put("a", 1, Duration::from_mins(10), false, t0);
        c.put("b", 2, Duration::from_mins(10), true, t0);
        assert_eq!(c.fresh_until(&"a"), Some(t0 + Duration::from_mins(10)));
        let before = t0 + Duration::from_secs(599);
        assert!(c.fresh(&"a", before) && c.fresh(&"b", before));
        let after = t0 + Duration::from_mins(10);
        assert!(!c.fresh(&"a", after) && !c.fresh(&"b", after));
        assert_eq!(c.get(&"a", after, || true), None, "expired");
        assert_eq!(
            c.get(&"b", after, || true),
            Some((2, true)),
            "stale, refreshed"
        );
        // Full: the expired answer makes room first.
        c.put("c", 3, Duration::from_mins(10), false, after);
        assert_eq!(c.len(), 2);
        assert!(c.fresh_until(&"a").is_none() && c.fresh(&"c", after));
        c.retain(|k| *k == "c");
        assert_eq!((c.len(), c.fresh_until(&"b")), (1, None));
    }
}
