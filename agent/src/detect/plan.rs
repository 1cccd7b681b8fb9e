//! AddressPlanOverlap: two ranges of the cluster's address plan that will
//! hand out (or bind) one address twice, found before any pod is hurt — a
//! load-balancer pool over pods or a node, a Service range over pod ranges,
//! two secondary networks on one interface. What is overlapped by design is
//! not: a range excluded where it is carved from, one node's pod range inside
//! another allocator's pool (Calico and Cilium's pools ignore podCIDRs),
//! ServiceCIDRs over each other, ranges of different networks, whereabouts
//! ranges that share reservations. The `kubernetes` Service's cluster IP
//! stands for the Service range only where no ServiceCIDR is read.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use super::{
    Cause, Finding, FindingKind, Owner, Remedy, Role, Scope, Trust,
    kind::{Alert, Count, Spec},
};
use crate::{
    cni::{
        kubernetes::{API_SERVICE, SERVICE_CIDRS},
        plan::Records,
    },
    inventory::{ClusterState, Inventory, IpRange, PlanOwner, Planned, Purpose, Source, step},
};

/// Latent: two allocators (or an allocator and a node) share addresses.
pub(super) const PLAN: Spec = Spec::node(
    "AddressPlanOverlap",
    "latent: two ranges of the cluster's address plan overlap where they must not (a \
         load-balancer pool over pods or a node's address, a Service range over pod ranges, two \
         secondary networks on one interface): one address will be handed out twice",
    Count::AllocatorOverlaps,
    Alert::Named("IPShadowAllocatorOverlap"),
);

/// Two ranges that overlap where they must not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOverlap {
    /// The range to change (the one easier to move), or the first of two
    /// equals.
    pub change: Planned,
    /// The other.
    pub other: Planned,
    /// The addresses both hold (the first and last both may give).
    pub shared: IpRange,
    /// Whether either may be changed alike (neither is easier to move).
    pub either: bool,
    /// More objects of the other side's kind the same range overlaps (nodes,
    /// say), named up to [`NAMED`], and how many in all.
    pub more: (Vec<String>, usize),
}

impl PlanOverlap {
    /// The fix: the range to change, off the addresses shared.
    #[must_use]
    pub fn moving(&self) -> Move {
        Move {
            owner: self.change.owner.clone(),
            text: self.change.text.clone(),
            purpose: self.change.purpose,
            against: self.other.purpose,
            shared: self.shared,
            or: self.either.then(|| self.other.owner.clone()),
        }
    }
}

/// Which range to move, off what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// The object to change.
    pub owner: PlanOwner,
    /// Its range, as written.
    pub text: String,
    /// What the range is for.
    pub purpose: Purpose,
    /// What the other range is for.
    pub against: Purpose,
    /// The addresses to leave out.
    pub shared: IpRange,
    /// The other object, when changing it does as well.
    pub or: Option<PlanOwner>,
}

/// Objects named beyond the first in one finding.
pub const NAMED: usize = 5;

/// Every overlap of the plan: `state`'s records and what the cluster's other
/// objects say (Nodes' podCIDRs and addresses, CiliumNodes' pod ranges,
/// Calico's pools in use, kube-ovn's primary Subnets).
/// With how many ranges were checked.
#[must_use]
pub fn plan_overlaps(state: &ClusterState) -> (Vec<Finding>, usize) {
    let ranges = planned(state, |_| true);
    let found = grouped(&ranges).into_iter().map(finding).collect();
    (found, ranges.len())
}

/// The overlaps that concern `inv`'s node, one of its own ranges on either
/// side — its Node's podCIDRs and addresses, its CiliumNode's ranges — from
/// what a node reads: its Node, every CiliumNode and Subnet, Calico's pools
/// where Calico runs. Only ranges meeting one of its own are built. The
/// plan's other objects (load-balancer pools, ServiceCIDRs, attachments)
/// are cluster-wide: `audit` reads them, no agent does.
pub(super) fn node_overlaps(inv: &Inventory) -> Vec<Finding> {
    let state = &inv.cluster;
    let me = inv.node.as_str();
    let mine: Vec<IpRange> = state
        .nodes
        .iter()
        .filter(|n| n.name == me)
        .flat_map(|n| {
            let cidrs = n.pod_cidrs.iter().map(IpRange::of);
            cidrs.chain(n.addresses.iter().map(|a| IpRange::one(a.ip)))
        })
        .chain(
            state
                .cilium_nodes
                .iter()
                .filter(|c| c.name == me)
                .flat_map(|c| c.pod_cidrs.iter().map(IpRange::of)),
        )
        .collect();
    if mine.is_empty() {
        return Vec::new();
    }
    let mut ranges = planned(state, |r| mine.iter().any(|m| m.meets(r)));
    // Cilium's whole cluster pool is audit's: its default (10.0.0.0/8) holds
    // many a node network whose addresses it will not reach for thousands of
    // nodes; the node's own range (its CiliumNode's) is checked here.
    ranges.retain(|p| !(p.owner.allocator == "Cilium" && p.owner.kind == "ConfigMap"));
    let mine = |p: &Planned| p.node.as_deref() == Some(me);
    grouped(&ranges)
        .into_iter()
        .filter(|o| mine(&o.change) || mine(&o.other))
        .map(|o| {
            let mut f = finding(o);
            // Its node's, even where the other side is another node's range.
            me.clone_into(&mut f.owner.node);
            f
        })
        .collect()
}

/// The overlaps among `ranges`, a pair's others of one kind and purpose
/// grouped under its first, each other object counted once (a node's
/// InternalIP and ExternalIP in one pool are one node).
fn grouped(ranges: &[Planned]) -> Vec<PlanOverlap> {
    type Key = (PlanOwner, String, &'static str, Purpose);
    let mut groups: BTreeMap<Key, (PlanOverlap, BTreeSet<&str>)> = BTreeMap::new();
    overlaps(ranges, |a, b, shared| {
        let (change, other, either) = ordered(a, b);
        let key = (
            change.owner.clone(),
            change.text.clone(),
            other.owner.kind,
            other.purpose,
        );
        let (g, seen) = groups.entry(key).or_insert_with(|| {
            let first = PlanOverlap {
                change: change.clone(),
                other: other.clone(),
                shared,
                either,
                more: (Vec::new(), 0),
            };
            (first, BTreeSet::from([other.owner.object.as_str()]))
        });
        if seen.insert(other.owner.object.as_str()) {
            g.more.1 += 1;
            if g.more.0.len() < NAMED {
                g.more.0.push(other.owner.object.clone());
            }
        }
    });
    groups.into_values().map(|(g, _)| g).collect()
}

/// The ranges of `state` that `keep` holds: its records and what its other
/// objects say.
fn planned(state: &ClusterState, keep: impl Fn(&IpRange) -> bool) -> Vec<Planned> {
    let mut ranges: Vec<Planned> = state
        .plan
        .iter()
        .filter(|p| keep(&p.range))
        .cloned()
        .collect();
    // The `kubernetes` Service's cluster IP is the one record of the Service
    // range only without ServiceCIDRs (before 1.33, or the API off): with any,
    // they hold the range, the address is in it, and each overlap of it would
    // be named twice.
    let of = |p: &Planned, r: &Records| p.owner.allocator == r.allocator && p.owner.kind == r.kind;
    if ranges.iter().any(|p| of(p, &SERVICE_CIDRS)) {
        ranges.retain(|p| !of(p, &API_SERVICE));
    }
    ranges.extend(super::plan_sources::derived(state, keep));
    ranges
}

fn finding(o: PlanOverlap) -> Finding {
    let node = o.other.node.clone().or_else(|| o.change.node.clone());
    let remedy = Remedy::Plan(Box::new(o.moving()));
    let trust = if o.change.owner.tenant || o.other.owner.tenant {
        Trust::TenantAddress
    } else {
        Trust::Cluster
    };
    Finding {
        kind: FindingKind::AddressPlanOverlap,
        scope: Scope::SameNode,
        ip: Some(o.shared.first),
        owner: Owner::new(
            node.unwrap_or_default(),
            Role::Node,
            None,
            Source::AddressPlan,
        ),
        cause: Cause::Plan(Box::new(o)),
        remedy,
        trust,
    }
}

/// How hard a range is to move, lower first: the one to change.
fn weight(p: &Planned) -> u8 {
    match p.purpose {
        Purpose::LoadBalancer => 0,
        Purpose::Secondary => 1,
        Purpose::Services => 2,
        Purpose::Pods => 3,
        Purpose::NodePods => 4,
        // Moved only by a day-2 change of the plugin's configuration
        // (ovn-kubernetes#4502, cluster-network-operator#2549).
        Purpose::Internal => 5,
        Purpose::NodeAddress => 6,
    }
}

fn ordered<'a>(a: &'a Planned, b: &'a Planned) -> (&'a Planned, &'a Planned, bool) {
    if weight(b) < weight(a) {
        (b, a, false)
    } else {
        (a, b, weight(a) == weight(b))
    }
}

/// Whether `a` and `b` must not share an address, by what they are for.
fn must_not_meet(a: &Planned, b: &Planned) -> bool {
    use Purpose::{Internal, LoadBalancer, NodeAddress, NodePods, Pods, Secondary, Services};
    if on_a_nodes_interface(a, b) || on_a_nodes_interface(b, a) {
        return true;
    }
    if a.owner == b.owner || a.domain != b.domain || (a.shared.is_some() && a.shared == b.shared) {
        return false;
    }
    let (x, y) = if a.purpose <= b.purpose {
        (a, b)
    } else {
        (b, a)
    };
    match (x.purpose, y.purpose) {
        (Pods, Pods) | (LoadBalancer, LoadBalancer) => x.owner.allocator != y.owner.allocator,
        // Two nodes' ranges of one record (Nodes, CiliumNodes): one range twice.
        (NodePods, NodePods) => {
            x.owner.allocator == y.owner.allocator && x.owner.kind == y.owner.kind
        }
        (Pods | NodePods, LoadBalancer | Services | NodeAddress)
        | (Services | LoadBalancer, NodeAddress)
        | (Services, LoadBalancer)
        | (Secondary, Secondary)
        // Nothing else on the cluster's network may hold an address of a
        // plugin's internal subnet, another of its internal subnets neither
        // (two records of one subnet share `shared`).
        | (_, Internal) => true,
        _ => false,
    }
}

/// Whether `a` hands out addresses on a node's own interface (a macvlan or
/// ipvlan) and `b` is a node's address: whatever the interface, the pod
/// given it would answer for the node's address where the node's network is.
fn on_a_nodes_interface(a: &Planned, b: &Planned) -> bool {
    a.on_node_interface && a.purpose == Purpose::Secondary && b.purpose == Purpose::NodeAddress
}

/// Every pair of ranges that must not meet and share an address both give,
/// with the addresses they share: a sweep over the ranges by first address,
/// so disjoint ranges (every node's) are never compared.
/// Each pair is handed to `each` as found, never kept: many ranges over one
/// another (a tenant's attachments) cost time, not memory.
fn overlaps<'a>(ranges: &'a [Planned], mut each: impl FnMut(&'a Planned, &'a Planned, IpRange)) {
    let mut sorted: Vec<&Planned> = ranges.iter().collect();
    sorted.sort_by_key(|p| (p.range.first, std::cmp::Reverse(p.range.last)));
    let mut open: Vec<&Planned> = Vec::new();
    for b in sorted {
        let family = b.range.first.is_ipv4();
        open.retain(|a| a.range.first.is_ipv4() == family && a.range.last >= b.range.first);
        for a in &open {
            if must_not_meet(a, b)
                && let Some(shared) = given_by_both(a, b)
            {
                each(a, b, shared);
            }
        }
        open.push(b);
    }
}

/// The first and last addresses both `a` and `b` may give (neither
/// excludes), if any.
fn given_by_both(a: &Planned, b: &Planned) -> Option<IpRange> {
    let lo = a.range.first.max(b.range.first);
    let hi = a.range.last.min(b.range.last);
    let excluded: Vec<&IpRange> = a.exclude.iter().chain(&b.exclude).collect();
    let first = skip_excluded(lo, hi, &excluded, true)?;
    let last = skip_excluded(hi, first, &excluded, false)?;
    Some(IpRange { first, last })
}

/// From `from` towards `to`, the first address no range of `excluded` holds;
/// bounded by the exclusions (each is jumped at most once per pass).
fn skip_excluded(from: IpAddr, to: IpAddr, excluded: &[&IpRange], up: bool) -> Option<IpAddr> {
    let mut at = from;
    for _ in 0..=excluded.len() {
        let Some(r) = excluded.iter().find(|r| r.contains(at)) else {
            return Some(at);
        };
        at = step(if up { r.last } else { r.first }, if up { 1 } else { -1 })?;
        if (up && at > to) || (!up && at < to) {
            return None;
        }
    }
    None
}

#[cfg(test)]
#[path = "tests/plan.rs"]
mod tests;

#[cfg(test)]
#[path = "tests/plan_node.rs"]
mod node_tests;
#[cfg(test)]
#[path = "tests/plan_trust.rs"]
mod trust_tests;
