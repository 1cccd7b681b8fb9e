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
                remedy(&f.remedy),
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
                (true, _) => format!(
                    "Cilium's {} IP {ip} of node {node} (as {} says)",
                    f.owner.role, f.owner.source
                ),
                (false, Some((r, _))) => {
                    format!("Cilium's allocation range {r} of node {node} (e.g. {ip})")
                }
                (false, None) => format!("Cilium's address {ip} of node {node}"),
            };
            let source = cilium_range.map_or_else(String::new, |(r, field)| {
                format!(" Cilium takes it from {r} ({field}).")
            });
            let block = block.map_or_else(String::new, |b| b.to_string());
            format!(
                "{what} lies inside kube-ovn Subnet {subnet} ({block}) and is not in its excludeIps, \
                 so kube-ovn can hand it to a pod at any time — a pod that then sits in \
                 ContainerCreating (Ingress IP) or is unreachable from its node (router, health \
                 IP).{source} {}",
                remedy(&f.remedy),
            )
        }
    }
}

/// Why a Cilium pool outside every kube-ovn Subnet is no fix (seeds/001).
const NOT_DISJOINT: &str = "Not a prefix outside every kube-ovn Subnet: kube-ovn masquerades \
    host-originated traffic only from its overlay subnets, so Gateway API (Envoy connects from \
    the node's Ingress IP) breaks across nodes.";

/// The fix, as one or more sentences starting with "Fix:".
pub fn remedy(r: &Remedy) -> String {
    match r {
        Remedy::CarveCiliumPool {
            subnet,
            block,
            pool,
        } => format!(
            "Fix: give Cilium's IPAM a pool cut from the end of kube-ovn Subnet {subnet}'s block \
             {block}, e.g. {pool} (ipam.mode=cluster-pool, a small block per node), and add \
             \"{}\" to spec.excludeIps of Subnet {subnet}; then delete the pod so it is given \
             another IP. {NOT_DISJOINT}",
            crate::inventory::IpRange::of(pool)
        ),
        Remedy::ExcludeInPodAllocator => format!(
            "Fix: exclude Cilium's addresses in the kube-ovn Subnet that handed this one out \
             (spec.excludeIps), best by giving Cilium a pool cut from the end of that Subnet's \
             block and excluding the whole pool; then delete the pod so it is given another IP. \
             {NOT_DISJOINT}"
        ),
        Remedy::ReallocatePod { node } => format!(
            "Fix: delete the pod so it is given another address. Cilium's own allocator handed \
             out an address Cilium holds itself (its host-scope allocator starts empty after an \
             agent restart, cilium#46799). If it happens again on {node}: the node's pod CIDR \
             leaves too few addresses once Cilium's router, health and Ingress IPs are taken — \
             lower kubelet's --max-pods or give nodes larger pod CIDRs, and upgrade Cilium \
             (cilium#47360 restores the Ingress IP more robustly)."
        ),
        Remedy::RemoveLocalAddress { device, subnet } => {
            let what = device.as_deref().map_or_else(
                || "the address".to_owned(),
                |d| format!("the address from {d}{}", device_hint(d)),
            );
            match subnet {
                Some(subnet) => format!(
                    "Fix: remove {what}, or exclude it from kube-ovn Subnet {subnet} \
                     (spec.excludeIps); then delete the pod so it is given another IP."
                ),
                None => format!(
                    "Fix: remove {what}, or keep the pod allocator from handing it out; then \
                     delete the pod so it is given another IP."
                ),
            }
        }
        Remedy::RestoreRoute { node, kube_ovn } => {
            let layout = if *kube_ovn {
                "kube-ovn lays one route for the subnet via ovn0; Cilium and Calico one per pod"
            } else {
                "the CNI lays it: Cilium and Calico one route per pod"
            };
            format!("Fix: restore the pod network's route on {node} ({layout}).")
        }
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
                 IPAM pool cut from the end of {block} and excluded there. {NOT_DISJOINT}"
            )
        }
    }
}

/// What usually puts an address on a device, for the fix.
fn device_hint(device: &str) -> &'static str {
    if device == "kube-ipvs0" {
        " (kube-proxy in IPVS mode puts every Service's ClusterIP and external IPs there: the \
         pod range and the Service range overlap)"
    } else if device == "lo" || device.starts_with("dummy") {
        " (a virtual IP manager, e.g. kube-vip, keepalived or a load balancer's agent)"
    } else if [
        "tun",
        "wg",
        "vxlan",
        "tunl",
        "gre",
        "ipip",
        "flannel",
        "cilium_vxlan",
        "genev",
    ]
    .iter()
    .any(|p| device.starts_with(p))
    {
        " (a tunnel or VPN endpoint address)"
    } else {
        ""
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
    let source = f.owner.source;
    match f.owner.role {
        Role::Router => {
            format!("Cilium's router IP (CiliumInternalIP) of node {node}{dev}, as {source} says")
        }
        Role::Ingress => format!(
            "Cilium's Ingress IP of node {node}, held by the reserved:ingress endpoint, as {source} says"
        ),
        Role::Health => {
            format!("Cilium's health endpoint IP of node {node}{dev}, as {source} says")
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
    let _ = write!(m, " {} {}", impact(f), remedy(&f.remedy));
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
    fn collisions_name_ip_owner_impact_and_the_kube_ovn_fix() {
        let mut inv = inventory(vec![
            pod("postgres-0", ME, &["10.244.4.251"]),
            pod("api", ME, &["10.244.1.182"]),
        ]);
        inv.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
        let f = detect(&inv);
        assert_eq!(f[1].ip, ip("10.244.4.251"));
        assert_says(
            &render(&f[1]),
            &[
                "Pod tenant/postgres-0",
                "10.244.4.251",
                "router IP",
                "node-a on device cilium_host, as CiliumNode.spec.addresses says",
                "kubelet probes",
                "Fix: give Cilium's IPAM a pool cut from the end of kube-ovn Subnet ovn-default's block 10.244.0.0/16, e.g. 10.244.248.0/21",
                "add \"10.244.248.0..10.244.255.255\" to spec.excludeIps of Subnet ovn-default",
                "Gateway API",
            ],
        );
        assert_says(
            &render(&f[0]),
            &["host network of node node-b cannot reach it"],
        );
    }

    #[test]
    fn without_kube_ovn_no_message_names_it() {
        let mut inv = with_fib(
            inventory(vec![
                pod("postgres-0", ME, &["10.244.4.251"]),
                pod("gw", ME, &["10.244.4.12"]),
                pod("api", ME, &["10.244.1.182"]),
                pod("svc", ME, &["10.96.0.10"]),
                pod("lost", ME, &["10.244.0.99"]),
            ]),
            &[("10.244.0.99", FibResult::NoRoute)],
        );
        inv.subnets = Arc::default();
        let f = detect(&inv);
        assert_eq!(f.len(), 5, "{f:#?}");
        for text in f.iter().map(render) {
            for word in ["kube-ovn", "Subnet", "excludeIps", "ovn0"] {
                assert!(!text.contains(word), "{word:?} in {text}");
            }
        }
        assert_says(
            &render(
                f.iter()
                    .find(|f| f.ip == ip("10.244.4.251"))
                    .expect("router"),
            ),
            &[
                "Fix: delete the pod so it is given another address",
                "--max-pods",
            ],
        );
        assert_says(
            &render(f.iter().find(|f| f.ip == ip("10.96.0.10")).expect("ipvs")),
            &["remove the address from kube-ipvs0 (kube-proxy in IPVS mode"],
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
            Arc::make_mut(&mut inv.host).routes.push(Route {
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
                "cut from the end of 10.244.0.0/16",
            ],
        );
        let cns = Arc::make_mut(&mut inv.cilium_nodes);
        cns[0].addresses.clear();
        inv.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.127")])]);
        let f = detect(&inv);
        assert_says(&render(&f[0]), &["allocation range 10.244.4.0/24"]);
    }
}
