//! How many reviews the agent sends.

use tokio::time::Instant;

use super::{REVIEW_BURST, REVIEWS_PER_SECOND};

/// A token bucket: [`REVIEW_BURST`] at once, then [`REVIEWS_PER_SECOND`].
#[derive(Debug)]
pub(super) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            tokens: f64::from(REVIEW_BURST),
            at: now,
        }
    }

    pub(super) fn take(&mut self, now: Instant) -> bool {
        let refill =
            now.saturating_duration_since(self.at).as_secs_f64() * f64::from(REVIEWS_PER_SECOND);
        self.tokens = (self.tokens + refill).min(f64::from(REVIEW_BURST));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}
