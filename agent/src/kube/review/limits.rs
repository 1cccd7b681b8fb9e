//! How many reviews the agent asks for: per peer for tokens it has no answer
//! for, under a ceiling for the whole agent that protects the API server, and
//! a budget of its own for re-reviewing the answers it serves meanwhile.
//!
//! A peer is refused by its own budget before it touches the agent's, so one
//! flooding peer gets at most [`PEER_REVIEW_BURST`] and then
//! [`PEER_REVIEWS_PER_MINUTE`] out of the agent's [`REVIEW_BURST`] and
//! [`REVIEWS_PER_SECOND`]; re-reviews of valid tokens draw on neither.

use std::net::IpAddr;

use governor::{
    Quota, RateLimiter, middleware::NoOpMiddleware, state::keyed::DefaultKeyedStateStore,
};

use crate::kube::pace::{Direct, TokioClock, at_least_one as nonzero};

/// Reviews at once for the whole agent, then [`REVIEWS_PER_SECOND`].
pub const REVIEW_BURST: u32 = 10;
/// Reviews per second for the whole agent after the burst.
pub const REVIEWS_PER_SECOND: u32 = 1;
/// Reviews at once for one peer (a first scrape needs two), then
/// [`PEER_REVIEWS_PER_MINUTE`]: half the agent's burst, a fifth of its rate.
pub const PEER_REVIEW_BURST: u32 = 5;
/// Reviews per minute for one peer after its burst (one every 5 s).
pub const PEER_REVIEWS_PER_MINUTE: u32 = 12;
/// Peers with a spent budget remembered at most. A peer whose budget has
/// refilled is forgotten when the table is full; while it is full of peers
/// that are not, new peers get no review.
pub const PEERS: usize = 4096;
/// Re-reviews of served answers at once, then [`REVALIDATIONS_PER_SECOND`].
pub const REVALIDATION_BURST: u32 = 10;
/// Re-reviews per second after the burst.
pub const REVALIDATIONS_PER_SECOND: u32 = 1;

/// Which budget refused a review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The peer's own.
    Peer,
    /// The whole agent's.
    Agent,
}

type Keyed = RateLimiter<
    IpAddr,
    DefaultKeyedStateStore<IpAddr>,
    TokioClock,
    NoOpMiddleware<std::time::Instant>,
>;

/// The three budgets.
#[derive(Debug)]
pub(super) struct Limits {
    agent: Direct,
    peers: Keyed,
    revalidations: Direct,
}

impl Limits {
    pub(super) fn new() -> Self {
        let per_second = |rate, burst| {
            let quota = Quota::per_second(nonzero(rate)).allow_burst(nonzero(burst));
            RateLimiter::direct_with_clock(quota, TokioClock)
        };
        let peer = Quota::per_minute(nonzero(PEER_REVIEWS_PER_MINUTE))
            .allow_burst(nonzero(PEER_REVIEW_BURST));
        Self {
            agent: per_second(REVIEWS_PER_SECOND, REVIEW_BURST),
            peers: RateLimiter::new(peer, DefaultKeyedStateStore::default(), TokioClock),
            revalidations: per_second(REVALIDATIONS_PER_SECOND, REVALIDATION_BURST),
        }
    }

    /// May a request from `peer` cost a review? Its own budget is asked first,
    /// so that its refused requests take nothing from the agent's.
    pub(super) fn admit(&self, peer: IpAddr) -> Result<(), Limit> {
        if self.peers.len() >= PEERS {
            // Forget the peers whose budget has refilled: they lose nothing.
            self.peers.retain_recent();
            if self.peers.len() >= PEERS {
                return Err(Limit::Peer);
            }
        }
        self.peers.check_key(&peer).map_err(|_| Limit::Peer)?;
        self.agent.check().map_err(|_| Limit::Agent)
    }

    /// May an answer being served be re-reviewed now?
    pub(super) fn revalidate(&self) -> bool {
        self.revalidations.check().is_ok()
    }
}
