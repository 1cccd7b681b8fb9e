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
//! sandbox (`LeakedSandboxAddress`, about the node).

use std::{collections::HashSet, net::IpAddr};

use super::{
    Cause, Finding, FindingKind, Owner, PodRef, PodSite, Remedy, Role, Scope, Trust,
    truth::{KernelFix, KernelTruth},
};
use crate::inventory::{
    Holder, HostIface, Inventory, IpSource, PlacedPod, Pod, PodNamespaces, PodRoute, Route,
    RouteKind, Source, TABLE_MAIN, TruthRow, TruthTable,
};

/// The node's truth table: every address a peer namespace holds, a per-pod
/// route leads to, or a pod of this node has, in address order. Empty when
/// the namespaces were not read.
pub fn truth_table(inv: &Inventory) -> Vec<TruthRow> {
    let ns = &inv.host.namespaces;
    if !ns.read {
        return Vec::new();
    }
    let mut ips: Vec<IpAddr> = ns
        .namespaces
        .values()
        .flat_map(|n| n.addresses.iter().map(|a| a.ip))
        .chain(pod_routes(inv).map(|r| r.dst.addr()))
        .chain(own_pods(inv).flat_map(status_ips))
        .collect();
    ips.sort_unstable();
    ips.dedup();
    ips.into_iter().map(|ip| row(inv, ip)).collect()
}

/// The truth table with what was read, for `check`.
pub fn truth_report(inv: &Inventory) -> TruthTable {
    let ns = &inv.host.namespaces;
    TruthTable {
        skipped: ns.skipped.clone(),
        interfaces: ns.ifaces.len(),
        namespaces: ns.namespaces.len(),
        unread: ns.unread.clone(),
        rows: truth_table(inv),
    }
}

/// The findings of the truth table, but none for a (pod uid, IP) in `seen`.
pub(super) fn kernel_findings(inv: &Inventory, seen: &HashSet<(String, IpAddr)>) -> Vec<Finding> {
    let mut out = Vec::new();
    for row in truth_table(inv) {
        let pods: Vec<&Pod> = own_pods(inv)
            .filter(|p| status_ips(p).any(|i| i == row.ip))
            .collect();
        if pods.is_empty() {
            out.extend(leaked(inv, row));
            continue;
        }
        for p in pods {
            if !seen.contains(&(p.uid.clone(), row.ip)) {
                out.extend(pod_finding(inv, row.clone(), p));
            }
        }
    }
    out
}

/// This node's pods that may be reported.
fn own_pods(inv: &Inventory) -> impl Iterator<Item = &Pod> {
    inv.pods
        .iter()
        .filter(|p| p.node.as_deref() == Some(inv.node.as_str()) && p.reportable())
}

/// A pod's addresses from its status (kubelet's word, not a hint).
fn status_ips(p: &Pod) -> impl Iterator<Item = IpAddr> + '_ {
    p.ips
        .iter()
        .filter(|i| i.source == IpSource::Status)
        .map(|i| i.ip)
}

/// The host's per-pod routes: main table, unicast, a full-length prefix, out
/// an interface whose peer is in another namespace.
fn pod_routes(inv: &Inventory) -> impl Iterator<Item = &Route> {
    let ns = &inv.host.namespaces;
    inv.host.routes.iter().filter(move |r| {
        r.table == TABLE_MAIN
            && r.kind == RouteKind::Unicast
            && r.dst.prefix_len() == r.dst.max_prefix_len()
            && r.oif.and_then(|i| ns.iface(i)).is_some()
    })
}

fn row(inv: &Inventory, ip: IpAddr) -> TruthRow {
    let ns = &inv.host.namespaces;
    let holders = ns
        .holders(ip)
        .map(|i| {
            let mut h = holder(ns, i, ip);
            h.named_for = names::named_for(&h.iface, own_pods(inv));
            h
        })
        .collect();
    let route = pod_routes(inv)
        .find(|r| r.dst.addr() == ip)
        .map(|r| pod_route(inv, r));
    let mut pods: Vec<PlacedPod> = inv
        .pods
        .iter()
        .filter(|p| p.reportable() && status_ips(p).any(|i| i == ip))
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
fn holder(ns: &PodNamespaces, iface: &HostIface, ip: IpAddr) -> Holder {
    let peer_ns = ns.namespaces.get(&iface.nsid);
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
        named_for: None,
    }
}

fn pod_route(inv: &Inventory, r: &Route) -> PodRoute {
    let iface = r.oif.and_then(|i| inv.host.namespaces.iface(i));
    PodRoute {
        route: inv.host.describe_route(r),
        iface: r.oif.and_then(|i| inv.host.link_name(i)).map(str::to_owned),
        iface_index: r.oif,
        state: iface.map(|i| i.state),
        nsid: iface.map(|i| i.nsid),
    }
}

/// The one finding about `pod`'s address `row.ip`, if the kernel contradicts it.
fn pod_finding(inv: &Inventory, row: TruthRow, pod: &Pod) -> Option<Finding> {
    let ns = &inv.host.namespaces;
    let ip = row.ip;
    let node = inv.node.clone();
    let via = row
        .route
        .as_ref()
        .and_then(|r| r.iface_index)
        .and_then(|i| ns.iface(i));
    let read = |i: &HostIface| ns.namespaces.get(&i.nsid);
    let (kind, fix, reached) = match via {
        Some(i) if read(i).is_some_and(|n| !n.holds(ip)) => {
            let to = row.holders.first().map(|h| h.iface.clone());
            let fix = KernelFix::RepointRoute { node, ip, to };
            let mut reached = holder(ns, i, ip);
            reached.named_for = names::named_for(&i.name, own_pods(inv));
            (FindingKind::PodRouteMisdirected, fix, Some(reached))
        }
        Some(i) if !i.state.carries() => {
            let iface = i.name.clone();
            let fix = KernelFix::RestoreLink { node, iface };
            (FindingKind::PodRouteDeadEnd, fix, None)
        }
        _ if row.holders.len() > 1 => {
            let ifaces = row.holders.iter().map(|h| h.iface.clone()).collect();
            let fix = KernelFix::RemoveDuplicate { node, ifaces };
            (FindingKind::PodAddressHeldTwice, fix, None)
        }
        // An unread namespace may hold it: no guess.
        _ if row.holders.is_empty()
            && ns.unread.is_empty()
            && pod.phase.as_deref() == Some("Running")
            && lays_pod_routes(inv, ip) =>
        {
            let fix = KernelFix::RecreatePod { pod: pod_ref(pod) };
            (FindingKind::PodAddressNotHeld, fix, None)
        }
        _ => return None,
    };
    let other_pod = reached.as_ref().and_then(|h| {
        owner_of_namespace(inv, h.nsid, pod).or_else(|| {
            let named = h.named_for.as_deref()?;
            own_pods(inv)
                .find(|p| format!("{}/{}", p.namespace, p.name) == named && p.uid != pod.uid)
                .map(pod_ref)
        })
    });
    let device = reached
        .as_ref()
        .map(|h| h.iface.clone())
        .or_else(|| row.route.as_ref().and_then(|r| r.iface.clone()));
    let truth = KernelTruth {
        site: Some(site(inv, pod)),
        row,
        reached,
        other_pod,
    };
    Some(finding(inv, (kind, ip), truth, fix, device))
}

/// Whether this node lays per-pod routes for `ip`'s family: only there does a
/// missing holder mean a missing sandbox (a bridge or OVS layout hides them).
fn lays_pod_routes(inv: &Inventory, ip: IpAddr) -> bool {
    pod_routes(inv).any(|r| r.dst.addr().is_ipv4() == ip.is_ipv4())
}

/// The pod (other than `not`) that holds an address of namespace `nsid`, this node's first.
fn owner_of_namespace(inv: &Inventory, nsid: i32, not: &Pod) -> Option<PodRef> {
    let held = inv.host.namespaces.namespaces.get(&nsid)?;
    let mut pods: Vec<&Pod> = inv
        .pods
        .iter()
        .filter(|p| p.uid != not.uid && status_ips(p).any(|i| held.holds(i)))
        .collect();
    pods.sort_by_key(|p| p.node.as_deref() != Some(inv.node.as_str()));
    pods.first().map(|p| pod_ref(p))
}

/// An address no pod of this node has, held on a peer link: a leaked sandbox.
fn leaked(inv: &Inventory, row: TruthRow) -> Option<Finding> {
    let ns = &inv.host.namespaces;
    let ip = row.ip;
    let routed = row.route.is_some();
    let in_pod_range = inv
        .node_facts
        .iter()
        .flat_map(|n| n.pod_cidrs.iter())
        .chain(
            inv.subnets
                .iter()
                .filter(|s| s.primary)
                .flat_map(|s| &s.cidrs),
        )
        .any(|c| c.contains(&ip));
    let on_peer_link = |h: &&Holder| {
        ns.iface(h.iface_index)
            .is_some_and(|i| i.peer_index == h.peer_index)
    };
    let h = row.holders.iter().find(on_peer_link)?.clone();
    if !(routed || in_pod_range) {
        return None;
    }
    let other_pod = inv
        .pods
        .iter()
        .find(|p| p.reportable() && status_ips(p).any(|i| i == ip))
        .map(pod_ref);
    let fix = KernelFix::TearDownSandbox {
        node: inv.node.clone(),
        iface: h.iface.clone(),
    };
    let truth = KernelTruth {
        site: None,
        row,
        reached: Some(h.clone()),
        other_pod,
    };
    let kind = FindingKind::LeakedSandboxAddress;
    Some(finding(inv, (kind, ip), truth, fix, Some(h.iface)))
}

fn finding(
    inv: &Inventory,
    (kind, ip): (FindingKind, IpAddr),
    truth: KernelTruth,
    fix: KernelFix,
    device: Option<String>,
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
        owner: Owner {
            node: inv.node.clone(),
            role,
            device,
            source: Source::Kernel,
        },
        cause: Cause::Kernel(Box::new(truth)),
        remedy: Remedy::Kernel(fix),
        trust: Trust::Kernel,
    }
}

fn pod_ref(p: &Pod) -> PodRef {
    PodRef {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
    }
}

fn site(inv: &Inventory, p: &Pod) -> PodSite {
    PodSite {
        pod: pod_ref(p),
        node: inv.node.clone(),
        ip_source: IpSource::Status,
        created: p.created,
        controller: p.controller.clone(),
    }
}

mod names;
#[cfg(test)]
mod tests;
