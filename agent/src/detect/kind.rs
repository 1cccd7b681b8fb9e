//! What a finding kind is, declared once beside its detector: its name, what
//! it is about, how it is counted and alerted on, whether it may be acted on,
//! and where an audit stands. The collector, Events, audit, remediation and
//! the docs catalogue read these instead of naming kinds.

use super::{Finding, Scope};

/// One finding kind's declaration.
#[derive(Debug)]
pub struct Spec {
    /// Its name: Event reason, metric label, JSON and docs.
    pub name: &'static str,
    /// What it means, in one line (the docs catalogue).
    pub what: &'static str,
    /// Whose Event it is (a pod's refusal of a node kind is still the pod's).
    pub about: About,
    /// The per-node metric family that counts it.
    pub count: Count,
    /// The alert that pages on it, or why none does.
    pub alert: Alert,
    /// Whether `--remediate evict` may evict its pod: moving the pod fixes it.
    pub remediable: bool,
    /// Whether the owner's node reports it too, not only the pod's (an address
    /// only the owner's kernel shows).
    pub owner_reports: bool,
    /// Whether the agent reports it only once it has stood a grace period (a
    /// sandbox being made or torn down looks the same for a moment).
    pub held_back: bool,
    /// Why `audit` cannot see it (only a node's kernel shows it); `None`: it can.
    pub unseen_by_audit: Option<&'static str>,
    /// How bad it is for the cluster today, for ordering: lower is worse.
    pub rank: fn(&Finding) -> u8,
}

impl Spec {
    /// A kind about a pod.
    pub const fn pod(name: &'static str, what: &'static str, count: Count, alert: Alert) -> Self {
        Self {
            name,
            what,
            about: About::Pod,
            count,
            alert,
            remediable: false,
            owner_reports: false,
            held_back: false,
            unseen_by_audit: None,
            rank: rank::general,
        }
    }

    /// A kind about a node (its allocator, its configuration, its devices).
    pub const fn node(name: &'static str, what: &'static str, count: Count, alert: Alert) -> Self {
        Self {
            about: About::Node,
            ..Self::pod(name, what, count, alert)
        }
    }
}

/// Whose Event a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum About {
    /// The pod's.
    Pod,
    /// The Node's.
    Node,
}

/// The per-node metric family counting a kind (hints never counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumIter)]
pub enum Count {
    /// `ipshadow_collisions`, by kind and scope.
    Collisions,
    /// `ipshadow_host_route_blackholes`.
    HostRouteBlackholes,
    /// `ipshadow_allocator_overlaps`.
    AllocatorOverlaps,
    /// `ipshadow_ipam_problems`, by kind.
    IpamProblems,
    /// `ipshadow_kernel_truth_problems`, by kind.
    KernelTruth,
    /// Only `ipshadow_collision_info` (and `ipshadow_hints`).
    InfoOnly,
}

/// The alert that pages on a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alert {
    /// Its name in deploy/monitoring/prometheusrule.yaml.
    Named(&'static str),
    /// None, and why (docs/runbooks.md says the same).
    None(&'static str),
}

/// Audit orderings shared by several kinds.
pub mod rank {
    use super::{Finding, Scope};

    /// Cross-node 2, a node's own problem 3, latent 4.
    pub fn general(f: &Finding) -> u8 {
        if f.scope == Scope::CrossNode {
            2
        } else if f.is_node_level() {
            3
        } else {
            4
        }
    }

    /// A running pod its own node cannot reach: probes and webhooks fail now.
    pub fn unreachable(f: &Finding) -> u8 {
        if f.scope == Scope::SameNode {
            0
        } else {
            general(f)
        }
    }

    /// As [`unreachable`], whatever the scope.
    pub fn unreachable_anywhere(_: &Finding) -> u8 {
        0
    }

    /// A pod that cannot start, or two pods on one address.
    pub fn cannot_start(_: &Finding) -> u8 {
        1
    }

    /// A refused pod cannot start; the node's own finding ranks as a node's.
    pub fn refused_pod(f: &Finding) -> u8 {
        if f.is_node_level() { general(f) } else { 1 }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::super::FindingKind;

    #[test]
    fn every_kind_has_its_own_name() {
        let names: HashSet<_> = FindingKind::all().map(|k| k.spec().name).collect();
        assert_eq!(names.len(), FindingKind::all().count());
        for k in FindingKind::all() {
            assert!(!k.spec().what.is_empty(), "{k:?} says what it is");
            assert_eq!(k.to_string(), k.spec().name);
            assert_eq!(
                serde_json::to_value(k).expect("a kind serialises"),
                serde_json::json!(k.spec().name)
            );
        }
    }
}
