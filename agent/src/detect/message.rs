//! The human text of a finding: what collides, what breaks, and how to fix it.
//! Operators read these in `kubectl describe pod` and in `check`'s output.

use std::fmt::Write as _;

use super::{Finding, Role, Scope};
use crate::inventory::{FibResult, HostNetwork, Route, RouteKind};

const FIX_CILIUM: &str = "Fix: give Cilium's IPAM a pool outside the range the pod allocator \
    (kube-ovn) hands out, e.g. ipam.mode=cluster-pool with clusterPoolIPv4PodCIDRList on a \
    disjoint prefix, or cut Cilium's range from the end of the pod CIDR and exclude it in the \
    kube-ovn Subnet (spec.excludeIps); then delete the pod so it is given another IP.";

const FIX_LOCAL: &str = "Fix: remove the address from the node, or exclude it from the pod \
    allocator's range (kube-ovn Subnet spec.excludeIps); then delete the pod so it is given \
    another IP.";

fn pod_name(f: &Finding) -> String {
    f.pod
        .as_ref()
        .map_or_else(|| "the pod".to_owned(), |p| format!("Pod {p}"))
}

fn what_it_is(f: &Finding) -> String {
    let node = &f.owner.node;
    let dev = f
        .owner
        .device
        .as_deref()
        .map(|d| format!(" on device {d}"))
        .unwrap_or_default();
    match f.owner.role {
        Role::Router => format!("Cilium's router IP (CiliumInternalIP) of node {node}{dev}"),
        Role::Ingress => format!(
            "Cilium's Ingress IP of node {node} (CiliumNode.spec.ingress, held by the reserved:ingress endpoint)"
        ),
        Role::Health => {
            format!("Cilium's health endpoint IP of node {node} (CiliumNode.spec.health){dev}")
        }
        Role::Local => format!("a local address of node {node}{dev}"),
    }
}

fn impact(f: &Finding) -> String {
    let owner = &f.owner.node;
    let ip = f.ip;
    match (f.owner.role, f.scope) {
        (Role::Ingress, Scope::SameNode) => format!(
            "Cilium on {owner} already has an endpoint for {ip}, so it refuses this pod's endpoint \
             (\"IP ipv4:{ip} is already in use\") and the sandbox never starts: the pod stays in \
             ContainerCreating."
        ),
        (Role::Ingress, Scope::CrossNode) => format!(
            "The pod can run, but on node {owner} traffic to {ip} goes to Cilium's ingress \
             endpoint, not this pod."
        ),
        (_, Scope::SameNode) => format!(
            "Node {owner} delivers every packet for {ip} to itself, so kubelet probes and webhooks \
             from {owner} reach {owner} itself, not this pod, and are refused; the pod may look \
             healthy to everything else."
        ),
        (_, Scope::CrossNode) => format!(
            "The pod looks Ready, but the host network of node {owner} cannot reach it: {owner} \
             delivers {ip} to itself (webhooks or probes from {owner} to this pod fail on {owner} only)."
        ),
    }
}

/// The message of an address collision.
pub(super) fn collision(f: &Finding) -> String {
    let mut m = format!(
        "{} has IP {}, which is {}.",
        pod_name(f),
        f.ip,
        what_it_is(f)
    );
    // The kernel's answer is evidence only when it shows local delivery.
    if let Some(fib) = f.fib.as_deref().filter(|t| t.starts_with("local")) {
        let _ = write!(m, " The host's route lookup says: {fib}.");
    }
    if let Some(route) = &f.shadowed_route {
        let _ = write!(
            m,
            " The pod route {route} is shadowed by the local table, which the kernel consults first."
        );
    }
    let _ = write!(m, " {}", impact(f));
    let fix = match f.owner.role {
        Role::Local => FIX_LOCAL,
        _ => FIX_CILIUM,
    };
    let _ = write!(m, " {fix}");
    m
}

/// The message of a host route that goes nowhere.
pub(super) fn blackhole(f: &Finding, dead_end: &str, host: &HostNetwork) -> String {
    let node = &f.owner.node;
    let route = host
        .routes
        .iter()
        .filter(|r| r.dst.contains(&f.ip) && matches_dead_end(r.kind, dead_end))
        .max_by_key(|r| r.dst.prefix_len())
        .map(|r| format!(" (route {})", describe_route(host, r)))
        .unwrap_or_default();
    let fix = if dead_end == "no route" {
        format!(
            "Fix: restore the pod network's route on {node} (kube-ovn lays one route for the \
             subnet via ovn0; Cilium and Calico one per pod)."
        )
    } else {
        format!(
            "Fix: delete the stale {dead_end} route on {node}, or restore the pod network's route."
        )
    };
    format!(
        "{} has IP {}, but node {node}'s own route lookup for it ends in {dead_end}{route}: \
         kubelet probes and webhooks from {node}'s host never reach the pod. {fix}",
        pod_name(f),
        f.ip,
    )
}

fn matches_dead_end(kind: RouteKind, dead_end: &str) -> bool {
    matches!(
        (kind, dead_end),
        (RouteKind::Blackhole, "blackhole")
            | (RouteKind::Unreachable, "unreachable")
            | (RouteKind::Prohibit, "prohibit")
            | (RouteKind::Throw, "no route")
    )
}

/// `ip route`-like text: `10.244.1.5/32 dev lxc1`, `10.244.0.0/16 via 10.244.0.1 dev ovn0`.
pub(crate) fn describe_route(host: &HostNetwork, r: &Route) -> String {
    let mut s = match r.kind {
        RouteKind::Unicast => r.dst.to_string(),
        kind => format!("{kind} {}", r.dst),
    };
    if let Some(gw) = r.gateway {
        let _ = write!(s, " via {gw}");
    }
    if let Some(dev) = r.oif.and_then(|i| host.link_name(i)) {
        let _ = write!(s, " dev {dev}");
    }
    s
}

/// `ip route get`-like text of a FIB answer.
pub(crate) fn describe_fib(host: &HostNetwork, fib: &FibResult) -> String {
    let dev = |oif: &Option<u32>| {
        oif.and_then(|i| host.link_name(i))
            .map(|d| format!(" dev {d}"))
            .unwrap_or_default()
    };
    match fib {
        FibResult::Local { oif } => format!("local{}", dev(oif)),
        FibResult::Unicast { oif, gateway } => {
            let via = gateway.map(|g| format!(" via {g}")).unwrap_or_default();
            format!("unicast{via}{}", dev(oif))
        }
        FibResult::Blackhole => "blackhole".to_owned(),
        FibResult::Unreachable => "unreachable".to_owned(),
        FibResult::Prohibit => "prohibit".to_owned(),
        FibResult::NoRoute => "no route".to_owned(),
        FibResult::Other(s) => s.clone(),
    }
}
