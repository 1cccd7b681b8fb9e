//! Opt-in remediation's decisions (pure): which pod, if any, to evict now.
//!
//! Guarded because the fixes that backfired in the field had no guards (a
//! healer that deletes pods in CI; cilium#34595, the agent deleting the
//! conflicting endpoint itself, closed unmerged): only a confirmed same-node
//! collision of a pod its controller recreates, only once the finding is older
//! than a minimum age, at most one pod per node per interval, and always
//! through the Eviction API, which respects PodDisruptionBudgets.
//!
//! And never on anything a tenant wrote or chose ([`crate::detect::Trust`]):
//! a Service's external or load-balancer IP bound on the node (any user who
//! may create a Service could otherwise get any pod evicted, a system pod too,
//! again after each reschedule), a forged kubelet Event, a pod's annotation,
//! or a local address not yet checked against the Services.

use std::{
    collections::HashMap,
    net::IpAddr,
    time::{Duration, Instant},
};

use super::events::reported_here;
use crate::detect::{Finding, FindingKind, PodRef, Scope};

/// A pod remediation may evict.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// The pod.
    pub pod: PodRef,
    /// Its shadowed address.
    pub ip: IpAddr,
    /// The finding's kind.
    pub kind: FindingKind,
    /// Its controller, which recreates it.
    pub controller: String,
}

/// The pods of `node` whose findings remediation may act on: same-node
/// collisions with a Cilium or local address, resting only on what no tenant
/// can write (the kernel, pod status, Cilium's and kube-ovn's objects), of a
/// pod with a controller. Never a bare pod: nothing would recreate it.
#[must_use]
pub fn candidates(findings: &[Finding], node: &str) -> Vec<Candidate> {
    findings
        .iter()
        .filter(|f| reported_here(f, node) && f.scope == Scope::SameNode && f.trust.acted_on())
        .filter(|f| f.kind.spec().remediable)
        .filter_map(|f| {
            let site = f.site().filter(|s| s.node == node)?;
            Some(Candidate {
                pod: site.pod.clone(),
                ip: f.ip?,
                kind: f.kind,
                controller: site.controller.clone()?,
            })
        })
        .collect()
}

/// When each candidate was first seen, and when remediation last acted.
#[derive(Debug)]
pub struct Policy {
    after: Duration,
    interval: Duration,
    first_seen: HashMap<Candidate, Instant>,
    /// When each was last acted on: one a PodDisruptionBudget keeps refusing
    /// goes behind the others rather than starving them.
    attempted: HashMap<Candidate, Instant>,
    last_action: Option<Instant>,
}

impl Policy {
    /// Acts on findings older than `after`, at most once per `interval`,
    /// counted from `started` too: nothing records the last action across a
    /// restart, so a restart (a rollout, a crash loop) counts as one and never
    /// lets the agent act faster than once per interval.
    #[must_use]
    pub fn new(after: Duration, interval: Duration, started: Instant) -> Self {
        Self {
            after,
            interval,
            first_seen: HashMap::new(),
            attempted: HashMap::new(),
            last_action: Some(started),
        }
    }

    /// Notes the current candidates (forgetting those gone: a finding that
    /// clears and comes back is young again) and returns the one to act on at
    /// `now`, if any: of those old enough, the least recently acted on, then the
    /// longest-standing, once the interval since the last action has passed.
    pub fn next(&mut self, current: &[Candidate], now: Instant) -> Option<Candidate> {
        self.first_seen.retain(|c, _| current.contains(c));
        self.attempted.retain(|c, _| current.contains(c));
        for c in current {
            self.first_seen.entry(c.clone()).or_insert(now);
        }
        if self
            .last_action
            .is_some_and(|t| now.saturating_duration_since(t) < self.interval)
        {
            return None;
        }
        self.first_seen
            .iter()
            .filter(|(_, seen)| now.saturating_duration_since(**seen) >= self.after)
            .min_by_key(|(c, seen)| {
                (
                    self.attempted.get(*c).copied(),
                    **seen,
                    c.pod.namespace.clone(),
                    c.pod.name.clone(),
                )
            })
            .map(|(c, _)| c.clone())
    }

    /// An action was taken (or tried: a PodDisruptionBudget's refusal counts,
    /// so it is not retried faster than the interval).
    pub fn acted(&mut self, on: &Candidate, now: Instant) {
        self.last_action = Some(now);
        self.attempted.insert(on.clone(), now);
    }

    /// The interval between two actions.
    #[must_use]
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How long until [`Policy::next`] may return something, for the caller's timer.
    #[must_use]
    pub fn wait(&self, now: Instant) -> Duration {
        let interval_left = self.last_action.map_or(Duration::ZERO, |t| {
            self.interval
                .saturating_sub(now.saturating_duration_since(t))
        });
        let age_left = self
            .first_seen
            .values()
            .map(|seen| {
                self.after
                    .saturating_sub(now.saturating_duration_since(*seen))
            })
            .min()
            .unwrap_or(self.interval);
        interval_left.max(age_left).max(Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        detect::detect,
        inventory::fixtures::{ME, inventory, pod},
    };

    #[test]
    fn only_confirmed_same_node_collisions_of_controlled_pods_are_candidates() {
        let mut bare = pod("bare-0", ME, &["10.244.4.104"]);
        bare.controller = None;
        let inv = inventory(vec![
            pod("postgres-0", ME, &["10.244.4.251"]),
            bare,
            pod("far-0", "node-b", &["10.244.4.12"]),
        ]);
        let c = candidates(&detect(&inv), ME);
        let names: Vec<&str> = c.iter().map(|c| c.pod.name.as_str()).collect();
        assert_eq!(names, ["postgres-0"]);
        assert_eq!(c[0].controller, "ReplicaSet/rs");
    }

    #[test]
    fn nothing_before_the_minimum_age_and_one_action_per_interval() {
        let inv = inventory(vec![
            pod("a-0", ME, &["10.244.4.251"]),
            pod("b-0", ME, &["10.244.4.104"]),
        ]);
        let c = candidates(&detect(&inv), ME);
        let t0 = Instant::now();
        // Started long enough ago that only the minimum age holds the first action back.
        let mut p = Policy::new(
            Duration::from_mins(1),
            Duration::from_mins(10),
            t0.checked_sub(Duration::from_mins(10)).unwrap_or(t0),
        );
        assert_eq!(p.next(&c, t0), None);
        assert_eq!(p.wait(t0), Duration::from_mins(1));
        let first = p.next(&c, t0 + Duration::from_mins(1)).expect("old enough");
        p.acted(&first, t0 + Duration::from_mins(1));
        // The other is old enough too, but the interval holds it back.
        assert_eq!(p.next(&c, t0 + Duration::from_mins(5)), None);
        let second = p
            .next(&c, t0 + Duration::from_mins(11))
            .expect("interval passed");
        assert_ne!(first, second);
        // Both acted on: the least recent first, so a blocked one starves no other.
        p.acted(&second, t0 + Duration::from_mins(11));
        assert_eq!(p.next(&c, t0 + Duration::from_mins(21)), Some(first));
        // A finding that cleared and came back is young again.
        p.acted(&second, t0 + Duration::from_mins(21));
        assert_eq!(p.next(&[], t0 + Duration::from_mins(30)), None);
        assert_eq!(p.next(&c, t0 + Duration::from_mins(30)), None);
    }

    #[test]
    fn a_restart_counts_as_an_action() {
        let c = candidates(
            &detect(&inventory(vec![pod("a-0", ME, &["10.244.4.251"])])),
            ME,
        );
        let started = Instant::now();
        let mut p = Policy::new(Duration::from_mins(1), Duration::from_mins(10), started);
        // Old enough after a minute, yet the agent acted (for all it knows) when it started.
        assert_eq!(p.next(&c, started + Duration::from_mins(2)), None);
        assert_eq!(
            p.wait(started + Duration::from_mins(2)),
            Duration::from_mins(8)
        );
        assert_eq!(
            p.next(&c, started + Duration::from_mins(10)),
            c.first().cloned()
        );
    }
}
