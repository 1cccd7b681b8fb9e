//! Kernel truth (issue 24): what the namespaces behind the host's veth/netkit
//! interfaces hold, against the host's per-pod routes and the pods the API
//! places on this node. Pure: the netlink adapter read it all beforehand.
//!
//! Per address, at most one finding, in this order: the host routes the pod's
//! address into a namespace that does not hold it (`PodRouteMisdirected`); the
//! route goes out an interface that is down (`PodRouteDeadEnd`); two
//! namespaces hold it (`PodAddressHeldTwice`); a Running pod whose address no
//! namespace holds, on a node that lays per-pod routes (`PodAddressNotHeld`).
//! An address a namespace holds on its peer link that no pod of this node has,
//! reached by a per-pod route or inside the node's pod range, is a leaked
//! sandbox, about the node ([`leaked`]). One address on secondary links of
//! two pods' namespaces on one network is `DuplicateSecondaryIP` ([`secondary`]).

use std::{collections::HashSet, net::IpAddr};

use self::index::Index;
use super::{
    Cause, Finding, FindingKind, Owner, PodRef, PodSite, Remedy, Role, Scope, Trust,
    kind::{Alert, Count, Spec},
    own, status_ips,
    truth::{KernelFix, KernelTruth},
};
use crate::inventory::{
    Holder, HostIface, Inventory, IpSource, PlacedPod, Pod, PodRoute, Route, Source, TruthRow,
    TruthTable,
};

/// The alert on what the namespaces hold against the host's routes and the API.
const KERNEL_TRUTH: Alert = Alert::Named("IPShadowKernelTruthProblem");

/// The host routes the pod's address into a namespace that does not hold it.
pub(in crate::detect) const MISDIRECTED: Spec = kernel_spec(
    "PodRouteMisdirected",
    "the host routes the pod's address into a namespace that does not hold it",
    "what a pod's namespace holds is read from the node's kernel",
);

/// The host's route to the pod goes out an interface that is down.
pub(in crate::detect) const DEAD_END: Spec = kernel_spec(
    "PodRouteDeadEnd",
    "the host's route to the pod goes out an interface that is down",
    "the per-pod routes and their interfaces live only in the node's kernel",
);

/// Two namespaces on the node hold the pod's address.
pub(in crate::detect) const HELD_TWICE: Spec = kernel_spec(
    "PodAddressHeldTwice",
    "two namespaces on the node hold the pod's address",
    "what a pod's namespace holds is read from the node's kernel",
);

/// No namespace on the pod's node holds its address.
pub(in crate::detect) const NOT_HELD: Spec = kernel_spec(
    "PodAddressNotHeld",
    "no namespace on the pod's node holds its address",
    "what a pod's namespace holds is read from the node's kernel",
);

/// A kernel-truth kind about a pod: only the node's kernel shows it.
const fn kernel_spec(name: &'static str, what: &'static str, unseen: &'static str) -> Spec {
    Spec {
        unseen_by_audit: Some(unseen),
        ..Spec::pod(name, what, Count::KernelTruth, KERNEL_TRUTH)
    }
}

/// The node's truth table: every address a peer namespace holds, a per-pod
/// route leads to, or a pod of this node has, in address order. Empty when
/// the namespaces were not read.
pub fn truth_table(inv: &Inventory) -> Vec<TruthRow> {
    if !inv.host.namespaces.read {
        return Vec::new();
    }
    rows(&Index::new(inv))
}

fn rows(idx: &Index<'_>) -> Vec<TruthRow> {
    let inv = idx.inv;
    let mut ips: Vec<IpAddr> = inv
        .host
        .namespaces
        .namespaces
        .values()
        .flat_map(|n| n.addresses.iter().map(|a| a.ip))
        .chain(idx.routed())
        .chain(own(inv).flat_map(status_ips))
        .collect();
    ips.sort_unstable();
    ips.dedup();
    ips.into_iter().map(|ip| row(idx, ip)).collect()
}

/// The truth table with what was read, for `check`.
pub fn truth_report(inv: &Inventory) -> TruthTable {
    report_of(inv, truth_table(inv))
}

/// The truth table of `inv` with these `rows` (built once per detection).
pub(super) fn report_of(inv: &Inventory, rows: Vec<TruthRow>) -> TruthTable {
    let ns = &inv.host.namespaces;
    TruthTable {
        skipped: ns.skipped.clone(),
        interfaces: ns.ifaces.len(),
        namespaces: ns.namespaces.len(),
        unread: ns.unread.clone(),
        rows,
    }
}

/// The findings of the truth table, but none for a (pod uid, IP) in `seen`;
/// and the table's rows, for [`report_of`].
pub(super) fn kernel_findings(
    inv: &Inventory,
    seen: &HashSet<(&str, IpAddr)>,
) -> (Vec<Finding>, Vec<TruthRow>) {
    if !inv.host.namespaces.read {
        return (Vec::new(), Vec::new());
    }
    let idx = Index::new(inv);
    let rows = rows(&idx);
    let mut out = Vec::new();
    for row in &rows {
        if idx.own_at(row.ip).next().is_none() {
            out.extend(leaked::leaked(&idx, row));
            continue;
        }
        for p in idx.own_at(row.ip) {
            if !seen.contains(&(p.uid.as_str(), row.ip)) {
                let dad = dad::dad_verdict(&idx, row, p);
                out.extend(dad.or_else(|| pod_finding(&idx, row, p)));
            }
        }
    }
    out.extend(secondary::duplicates(&idx, seen));
    (out, rows)
}

fn row(idx: &Index<'_>, ip: IpAddr) -> TruthRow {
    let holders = idx.holders(ip).map(|i| holder(idx, i, ip)).collect();
    let route = idx.route(ip).map(|r| pod_route(idx, r));
    let mut pods: Vec<PlacedPod> = idx
        .pods_at(ip)
        .map(|p| PlacedPod {
            pod: format!("{}/{}", p.namespace, p.name),
            node: p.node.clone().unwrap_or_default(),
            phase: p.phase.clone(),
        })
        .collect();
    pods.sort();
    TruthRow {
        ip,
        holders,
        route,
        pods,
    }
}

/// The namespace behind `iface` as a holder of `ip` (or, without `ip` in it,
/// as the place a route reaches: its peer link).
fn holder(idx: &Index<'_>, iface: &HostIface, ip: IpAddr) -> Holder {
    let peer_ns = idx.inv.host.namespaces.namespaces.get(&iface.nsid);
    let index = peer_ns
        .and_then(|n| n.addresses.iter().find(|a| a.ip == ip))
        .map_or(iface.peer_index, |a| a.index);
    Holder {
        iface: iface.name.clone(),
        iface_index: iface.index,
        peer: peer_ns.and_then(|n| n.link(index)).map(|l| l.name.clone()),
        peer_index: index,
        nsid: iface.nsid,
        state: iface.state,
        named_for: idx
            .named_for(&iface.name)
            .map(|p| format!("{}/{}", p.namespace, p.name)),
    }
}

fn pod_route(idx: &Index<'_>, r: &Route) -> PodRoute {
    let host = &idx.inv.host;
    let iface = r.oif.and_then(|i| idx.iface(i));
    PodRoute {
        route: host.describe_route(r),
        iface: r.oif.and_then(|i| host.link_name(i)).map(str::to_owned),
        iface_index: r.oif,
        state: iface.map(|i| i.state),
        nsid: iface.map(|i| i.nsid),
    }
}

/// The one finding about `pod`'s address `row.ip`, if the kernel contradicts it.
///
/// Its trust follows who could have written what it rests on: what a pod's
/// namespace holds and its link state, a pod with NET_ADMIN writes; a misdirected
/// route speaks for the node only where the host shows the interface is
/// another pod's ([`Index::host_owner`]), a dead end only where the host set its
/// own interface down. Else a hint, which names no other pod.
fn pod_finding(idx: &Index<'_>, row: &TruthRow, pod: &Pod) -> Option<Finding> {
    let inv = idx.inv;
    let ns = &inv.host.namespaces;
    let ip = row.ip;
    let node = inv.node.clone();
    let via = row
        .route
        .as_ref()
        .and_then(|r| r.iface_index)
        .and_then(|i| idx.iface(i));
    let read = |i: &HostIface| ns.namespaces.get(&i.nsid);
    let elsewhere = |i: &HostIface| goes_elsewhere(idx, row, i, pod);
    let (kind, fix, reached, other_pod) = match via {
        Some(i) if read(i).is_some_and(|n| !n.holds(ip) && !n.truncated) && elsewhere(i) => {
            let to = row.holders.first().map(|h| h.iface.clone());
            let fix = KernelFix::RepointRoute { node, ip, to };
            let other = idx.host_owner(i, pod).map(PodRef::from);
            let reached = Some(holder(idx, i, ip));
            (FindingKind::PodRouteMisdirected, fix, reached, other)
        }
        Some(i) if !i.state.carries() => {
            let iface = i.name.clone();
            let fix = KernelFix::RestoreLink { node, iface };
            (FindingKind::PodRouteDeadEnd, fix, None, None)
        }
        _ if row.holders.len() > 1 => {
            let ifaces = row.holders.iter().map(|h| h.iface.clone()).collect();
            let fix = KernelFix::RemoveDuplicate { node, ifaces };
            (FindingKind::PodAddressHeldTwice, fix, None, None)
        }
        // An unread namespace may hold it: no guess.
        _ if row.holders.is_empty()
            && via.is_none()
            && ns.unread.is_empty()
            && pod.phase.as_deref() == Some("Running")
            && !pod.default_network_elsewhere
            && idx.lays_pod_routes(ip) =>
        {
            let fix = KernelFix::RecreatePod {
                pod: PodRef::from(pod),
            };
            (FindingKind::PodAddressNotHeld, fix, None, None)
        }
        _ => return None,
    };
    let trust = trust(kind, via, other_pod.is_some());
    let device = reached
        .as_ref()
        .map(|h| h.iface.clone())
        .or_else(|| row.route.as_ref().and_then(|r| r.iface.clone()));
    let truth = KernelTruth {
        site: Some(PodSite::new(pod, &inv.node, IpSource::Status)),
        row: row.clone(),
        reached,
        other_pod,
    };
    Some(finding(inv, (kind, ip), truth, fix, device, trust))
}

/// A kernel-truth finding about a pod speaks for the node only where the host
/// corroborates it: the interface is another pod's (`host_owned`), or the
/// host set its own interface down.
fn trust(kind: FindingKind, via: Option<&HostIface>, host_owned: bool) -> Trust {
    match kind {
        FindingKind::PodRouteMisdirected if host_owned => Trust::Kernel,
        FindingKind::PodRouteDeadEnd if via.is_some_and(|i| !i.admin_up) => Trust::Kernel,
        _ => Trust::Hint,
    }
}

/// Whether the route's namespace behind `i` shows that `pod`'s traffic goes
/// elsewhere: it holds another address, another namespace holds `ip`, or it is
/// another pod's. A sandbox may take the address off its veth and hold none
/// (gVisor, KubeVirt's bridge binding).
fn goes_elsewhere(idx: &Index<'_>, row: &TruthRow, i: &HostIface, pod: &Pod) -> bool {
    let ns = idx.inv.host.namespaces.namespaces.get(&i.nsid);
    // The pod's own namespace, holding another of its addresses (its IPv4
    // while a plugin still configures the IPv6): nowhere else.
    if ns.is_some_and(|n| pod.ips.iter().any(|p| p.ip != row.ip && n.holds(p.ip))) {
        return false;
    }
    ns.is_some_and(|n| !n.addresses.is_empty())
        || !row.holders.is_empty()
        || idx.host_owner(i, pod).is_some()
}

/// Whether `iface`'s peer namespace is the node's own, not a pod's:
/// Cilium's health endpoint (it holds the health IP, in the pod range), and
/// kube-ovn's node port where it is a veth (`cni::Holds::NodeEndpoint`).
fn node_iface(iface: &str) -> bool {
    crate::cni::holds(iface, crate::cni::Holds::NodeEndpoint)
}

/// The host interface behind which the one pod namespace holding `ip` sits;
/// `None` where none or several do, or only the node's own ([`node_iface`]).
pub(super) fn sole_pod_holder(inv: &Inventory, ip: IpAddr) -> Option<String> {
    let mut pods = inv
        .host
        .namespaces
        .holders(ip)
        .filter(|i| !node_iface(&i.name));
    let one = pods.next()?;
    pods.next().is_none().then(|| one.name.clone())
}

pub(super) fn finding(
    inv: &Inventory,
    (kind, ip): (FindingKind, IpAddr),
    truth: KernelTruth,
    fix: KernelFix,
    device: Option<String>,
    trust: Trust,
) -> Finding {
    let role = if truth.site.is_some() && truth.other_pod.is_some() {
        Role::Pod
    } else {
        Role::Local
    };
    Finding {
        kind,
        scope: Scope::SameNode,
        ip: Some(ip),
        owner: Owner::new(inv.node.clone(), role, device, Source::Kernel),
        cause: Cause::Kernel(Box::new(truth)),
        remedy: Remedy::Kernel(fix),
        trust,
    }
}

mod dad;
#[cfg(test)]
mod holder_tests;
mod index;
mod leaked;
mod node_dad;
pub(in crate::detect) use dad::{DAD_FAILED, DAD_STUCK};
pub(in crate::detect) use leaked::LEAKED;
pub(in crate::detect) use node_dad::{NODE_DAD, failed as node_dad_failed};
#[cfg(test)]
mod dad_tests;
mod secondary;
#[cfg(test)]
mod secondary_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trust_tests;
