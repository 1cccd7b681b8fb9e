//! The human text of a finding: what collides, what breaks, and how to fix it.
//! Operators read these in `kubectl describe pod` and in `check`'s output.
//! Rendered from the typed finding; nothing ever parses it back.

use std::fmt::Write as _;

use crate::detect::{Cause, Finding, Remedy, Role, Scope};

/// The full message of a finding: what, why it hurts, and the fix.
pub fn render(f: &Finding) -> String {
    match &f.cause {
        Cause::Collision {
            fib,
            shadowed_route,
            ..
        } => collision(f, fib.as_deref(), shadowed_route.as_deref()),
        Cause::Blackhole {
            dead_end, route, ..
        } => {
            let node = &f.owner.node;
            let route = route
                .as_ref()
                .map(|r| format!(" (route {r})"))
                .unwrap_or_default();
            format!(
                "{} has IP {}, but node {node}'s own route lookup for it ends in {dead_end}{route}: \
                 kubelet probes and webhooks from {node}'s host never reach the pod. {}",
                pod_name(f),
                f.ip,
                remedy(&f.remedy()),
            )
        }
        Cause::Overlap {
            subnet,
            block,
            cilium_range,
            held,
        } => {
            let (ip, node) = (f.ip, &f.owner.node);
            let what = match (held, cilium_range) {
                (true, _) => format!("Cilium's {} IP {ip} of node {node}", f.owner.role),
                (false, Some(r)) => {
                    format!("Cilium's allocation range {r} of node {node} (e.g. {ip})")
                }
                (false, None) => format!("Cilium's address {ip} of node {node}"),
            };
            let source = cilium_range.map_or_else(String::new, |r| {
                format!(" Cilium takes it from {r} (CiliumNode.spec.ipam.podCIDRs).")
            });
            let block = block.map_or_else(String::new, |b| b.to_string());
            format!(
                "{what} lies inside kube-ovn Subnet {subnet} ({block}) and is not in its excludeIps, \
                 so kube-ovn can hand it to a pod at any time — a pod that then sits in \
                 ContainerCreating (Ingress IP) or is unreachable from its node (router, health \
                 IP).{source} {}",
                remedy(&f.remedy()),
            )
        }
    }
}

/// The fix, as one sentence starting with "Fix:".
pub fn remedy(r: &Remedy) -> String {
    match r {
        Remedy::SeparateCiliumPool => "Fix: give Cilium's IPAM a pool outside the range the pod \
            allocator (kube-ovn) hands out, e.g. ipam.mode=cluster-pool with \
            clusterPoolIPv4PodCIDRList on a disjoint prefix, or cut Cilium's range from the end of \
            the pod CIDR and exclude it in the kube-ovn Subnet (spec.excludeIps); then delete the \
            pod so it is given another IP."
            .to_owned(),
        Remedy::RemoveLocalAddress => "Fix: remove the address from the node, or exclude it from \
            the pod allocator's range (kube-ovn Subnet spec.excludeIps); then delete the pod so it \
            is given another IP."
            .to_owned(),
        Remedy::RestoreRoute { node } => format!(
            "Fix: restore the pod network's route on {node} (kube-ovn lays one route for the \
             subnet via ovn0; Cilium and Calico one per pod)."
        ),
        Remedy::DeleteStaleRoute { node, dead_end } => format!(
            "Fix: delete the stale {dead_end} route on {node}, or restore the pod network's route."
        ),
        Remedy::ExcludeFromSubnet {
            subnet,
            exclude,
            block,
        } => {
            let block = block.map_or_else(String::new, |b| b.to_string());
            format!(
                "Fix: add \"{exclude}\" to spec.excludeIps of Subnet {subnet}, or give Cilium an \
                 IPAM pool outside {block} (ipam.mode=cluster-pool with clusterPoolIPv4PodCIDRList \
                 on a disjoint prefix)."
            )
        }
    }
}

fn pod_name(f: &Finding) -> String {
    f.pod()
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

fn collision(f: &Finding, fib: Option<&str>, shadowed_route: Option<&str>) -> String {
    let mut m = format!(
        "{} has IP {}, which is {}.",
        pod_name(f),
        f.ip,
        what_it_is(f)
    );
    // The kernel's answer is evidence only when it shows local delivery.
    if let Some(fib) = fib.filter(|t| t.starts_with("local")) {
        let _ = write!(m, " The host's route lookup says: {fib}.");
    }
    if let Some(route) = shadowed_route {
        let _ = write!(
            m,
            " The pod route {route} is shadowed by the local table, which the kernel consults first."
        );
    }
    let _ = write!(m, " {} {}", impact(f), remedy(&f.remedy()));
    m
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{
        detect::detect,
        inventory::{
            FibResult, Route, RouteKind,
            fixtures::{ME, inventory, ip, net, ovn_default, pod, shadowed_pod_route, with_fib},
        },
    };

    fn assert_says(text: &str, needles: &[&str]) {
        for needle in needles {
            assert!(text.contains(needle), "{needle:?} missing in {text}");
        }
    }

    #[test]
    fn collisions_name_ip_owner_impact_and_fix() {
        let inv = inventory(vec![
            pod("postgres-0", ME, &["10.244.4.251"]),
            pod("api", ME, &["10.244.1.182"]),
        ]);
        let f = detect(&inv);
        assert_eq!(f[1].ip, ip("10.244.4.251"));
        assert_says(
            &render(&f[1]),
            &[
                "Pod tenant/postgres-0",
                "10.244.4.251",
                "router IP",
                "node-a on device cilium_host",
                "kubelet probes",
                "Fix:",
                "excludeIps",
            ],
        );
        assert_says(
            &render(&f[0]),
            &["host network of node node-b cannot reach it"],
        );
    }

    #[test]
    fn a_shadowed_pod_route_is_named() {
        let f = detect(&shadowed_pod_route());
        assert_says(
            &render(&f[0]),
            &[
                "10.96.0.10/32 dev lxc1234 is shadowed",
                "remove the address",
            ],
        );
    }

    #[test]
    fn blackholes_name_the_dead_end_its_route_and_the_fix() {
        for (answer, kind, says) in [
            (
                FibResult::Blackhole,
                RouteKind::Blackhole,
                "ends in blackhole (route blackhole 10.244.0.99/32): kubelet probes",
            ),
            (
                FibResult::NoRoute,
                RouteKind::Throw,
                "Fix: restore the pod network's route on node-a",
            ),
        ] {
            let mut inv = inventory(vec![pod("lost", ME, &["10.244.0.99"])]);
            inv.host.routes.push(Route {
                table: 254,
                dst: net("10.244.0.99/32"),
                kind,
                oif: None,
                gateway: None,
            });
            let f = detect(&with_fib(inv, &[("10.244.0.99", answer)]));
            assert_says(&render(&f[0]), &[says]);
        }
    }

    #[test]
    fn overlaps_name_the_range_and_the_exclusion_that_fixes_them() {
        let mut inv = inventory(vec![]);
        inv.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
        let f = detect(&inv);
        assert_says(
            &render(&f[2]),
            &[
                "Cilium's router IP 10.244.4.251 of node node-a",
                "add \"10.244.4.0..10.244.4.255\" to spec.excludeIps of Subnet ovn-default",
                "outside 10.244.0.0/16",
            ],
        );
        let cns = Arc::make_mut(&mut inv.cilium_nodes);
        cns[0].router.clear();
        cns[0].ingress.clear();
        cns[0].health.clear();
        inv.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.127")])]);
        let f = detect(&inv);
        assert_says(&render(&f[0]), &["allocation range 10.244.4.0/24"]);
    }
}
