//! How often the agent asks the API server: budgets shared by all requests of
//! a kind (governor's GCRA, a token bucket), and waits per key that double
//! (backon's exponential schedule). Written once here so that every client of
//! the API server paces itself the same way.

use std::{
    borrow::Borrow,
    collections::BTreeMap,
    num::NonZeroU32,
    time::{Duration, Instant},
};

use backon::{BackoffBuilder as _, ExponentialBackoff, ExponentialBuilder};
use governor::{
    Quota, RateLimiter,
    clock::Clock,
    middleware::NoOpMiddleware,
    state::{InMemoryState, NotKeyed},
};

/// governor's clock read from tokio's, so that tests can pause it (and, out of
/// tests, the same instants as `std::time::Instant::now()`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TokioClock;

impl Clock for TokioClock {
    type Instant = Instant;

    fn now(&self) -> Self::Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// An unkeyed governor limiter on [`TokioClock`].
pub(crate) type Direct = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Instant>>;

/// `n` as a quota count; a zero (which no quota can hold) counts as one.
pub(crate) fn at_least_one(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

/// A budget of writes or requests: `burst` at once, then `per_minute`.
///
/// governor's GCRA with `Quota::per_minute(per_minute).allow_burst(burst)` is a
/// token bucket of `burst` tokens, full at the start, that gains one token
/// every `60 s / per_minute` and never holds more than `burst`.
#[derive(Debug)]
pub struct Budget {
    limiter: Direct,
    /// When the last refused take could have been allowed; `None` once a
    /// take succeeds. governor has no way to look without taking.
    refused_until: Option<Instant>,
}

impl Budget {
    /// `burst` at once, then `per_minute` (a zero counts as one).
    pub fn new(burst: u32, per_minute: u32) -> Self {
        let quota = Quota::per_minute(at_least_one(per_minute)).allow_burst(at_least_one(burst));
        Self {
            limiter: RateLimiter::direct_with_clock(quota, TokioClock),
            refused_until: None,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self) -> bool {
        self.refused_until = self.limiter.check().err().map(|n| n.earliest_possible());
        self.refused_until.is_none()
    }

    /// When a token comes back, if the last take was refused and it has not
    /// come back yet.
    pub fn ready_at(&self) -> Option<Instant> {
        self.refused_until.filter(|at| *at > TokioClock.now())
    }

    /// How long until the next take is allowed: zero unless the last was refused.
    pub fn next_in(&self) -> Duration {
        self.ready_at()
            .map_or(Duration::ZERO, |at| at.duration_since(TokioClock.now()))
    }
}

/// Per key, when it may be asked about again: at once, then after a wait that
/// starts at `first` and doubles up to `longest` with every ask (backon's
/// [`ExponentialBuilder`], no jitter, no end), until [`Backoffs::reset`].
#[derive(Debug)]
pub(crate) struct Backoffs<K> {
    first: Duration,
    schedule: ExponentialBuilder,
    keys: BTreeMap<K, Scheduled>,
}

#[derive(Debug)]
struct Scheduled {
    asked: Instant,
    next: Instant,
    waits: ExponentialBackoff,
}

impl<K: Ord> Backoffs<K> {
    /// Waits of `first`, doubling up to `longest`.
    pub(crate) fn new(first: Duration, longest: Duration) -> Self {
        Self {
            first,
            schedule: ExponentialBuilder::new()
                .with_min_delay(first)
                .with_max_delay(longest)
                .with_factor(2.0)
                .without_max_times(),
            keys: BTreeMap::new(),
        }
    }

    /// Whether `key` may be asked about at `now`: never asked, or its wait passed.
    pub(crate) fn ready<Q: Ord + ?Sized>(&self, key: &Q, now: Instant) -> bool
    where
        K: Borrow<Q>,
    {
        self.keys.get(key).is_none_or(|w| now >= w.next)
    }

    /// When `key` may be asked about again, if it waits.
    pub(crate) fn next<Q: Ord + ?Sized>(&self, key: &Q) -> Option<Instant>
    where
        K: Borrow<Q>,
    {
        self.keys.get(key).map(|w| w.next)
    }

    /// `key` was asked about at `now`: its next wait starts, the one after
    /// will be twice as long.
    pub(crate) fn asked(&mut self, key: K, now: Instant) {
        let w = self.keys.entry(key).or_insert_with(|| Scheduled {
            asked: now,
            next: now,
            waits: self.schedule.build(),
        });
        // Never `None` without a maximum of tries; the first wait if it were.
        let wait = w.waits.next().unwrap_or(self.first);
        w.asked = now;
        w.next = now + wait;
    }

    /// Starts `key`'s doubling over: it is due `first` after its last ask.
    pub(crate) fn reset<Q: Ord + ?Sized>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
    {
        if let Some(w) = self.keys.get_mut(key) {
            w.waits = self.schedule.build();
            w.next = w.asked + self.first;
        }
    }

    /// Keeps the keys for which `keep(key, next)` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, Instant) -> bool) {
        self.keys.retain(|k, w| keep(k, w.next));
    }

    /// Whether `key` is scheduled.
    pub(crate) fn contains<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.keys.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_budget_allows_its_burst_then_its_rate() {
        let mut b = Budget::new(3, 60);
        assert!(b.take() && b.take() && b.take());
        assert!(!b.take(), "the burst is spent");
        assert_eq!(b.next_in(), Duration::from_secs(1));
        // A token comes back after its share of a minute.
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(b.next_in(), Duration::ZERO);
        assert!(b.take());
        assert!(!b.take());
        // And never more than the burst, however long it waited.
        tokio::time::advance(Duration::from_hours(1)).await;
        assert_eq!((0..10).filter(|_| b.take()).count(), 3);
    }

    #[test]
    fn a_zero_quota_counts_as_one() {
        let mut b = Budget::new(0, 0);
        assert!(b.take());
        assert!(!b.take());
        assert!(b.next_in() > Duration::from_secs(59), "{:?}", b.next_in());
    }

    #[test]
    fn waits_double_up_to_the_longest_and_start_over_on_reset() {
        let mut b = Backoffs::new(Duration::from_mins(1), Duration::from_mins(15));
        let t0 = Instant::now();
        assert!(b.ready("k", t0), "never asked");
        let mut at = t0;
        let mut last = t0;
        let mut waits = Vec::new();
        for _ in 0..7 {
            b.asked("k", at);
            last = at;
            let next = b.next("k").expect("scheduled");
            assert!(!b.ready("k", at + Duration::from_secs(59)));
            assert!(b.ready("k", next));
            waits.push((next - at).as_secs() / 60);
            at = next;
        }
        assert_eq!(waits, [1, 2, 4, 8, 15, 15, 15]);
        b.reset("k");
        assert_eq!(
            b.next("k"),
            Some(last + Duration::from_mins(1)),
            "due a first wait after its last ask"
        );
        b.asked("k", at);
        assert_eq!(b.next("k"), Some(at + Duration::from_mins(1)));
        b.asked("k", at);
        assert_eq!(b.next("k"), Some(at + Duration::from_mins(2)));
        b.retain(|_, _| false);
        assert!(!b.contains("k"));
    }
}
