//! How often the agent asks the API server: budgets shared by all requests of
//! a kind (governor's GCRA, a token bucket). Written once here so that every
//! client of the API server paces itself the same way.

use std::{
    num::NonZeroU32,
    time::{Duration, Instant},
};

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
pub(crate) const fn at_least_one(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => NonZeroU32::MIN,
    }
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
        match self.limiter.check() {
            Ok(()) => {
                self.refused_until = None;
                true
            }
            Err(not_until) => {
                self.refused_until = Some(not_until.earliest_possible());
                false
            }
        }
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
}
