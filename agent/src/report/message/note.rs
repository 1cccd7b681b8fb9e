//! The short note of an Event: what is wrong and what breaks in at most two
//! short sentences, then the fix in one. An operator reads it in ten seconds
//! in `kubectl describe`; the evidence (routes, counts, sources, kubelet's
//! words) and the long explanation stay in `check`, `audit`, the JSON and the
//! runbook.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{Reader, fix::fix, list};
use crate::{
    detect::{Cause, Finding, InfraAddress, NodeProblem, Role, Scope, impact::Impact},
    inventory::{IpSource, ServiceAddress, Source},
};

/// The most bytes of prose before the `Fix:` sentence, with names of ordinary
/// length (README: "Events").
pub const PROSE_MAX: usize = 300;
/// The most bytes of the sentence on what breaks behind the pod that leads
/// the prose when it is known, likewise.
pub const IMPACT_MAX: usize = 160;
/// The most bytes of the `Fix:` sentence, likewise.
pub const FIX_MAX: usize = 240;

/// The Event note of `f` for `reader`: what is wrong, what breaks (or what
/// breaks behind the pod, once looked up), then `Fix:`.
pub fn note(f: &Finding, reader: Reader<'_>, impact: Option<&Impact>) -> String {
    let what = what(f, reader);
    let prose = match impact.and_then(|i| super::impact(i, true)) {
        Some(i) => format!("{i} {what}"),
        None => what,
    };
    format!("{prose} {}", fix(&f.remedy, reader))
}

/// What is wrong and what breaks.
fn what(f: &Finding, reader: Reader<'_>) -> String {
    let ip = f.ip_text();
    let node = &f.owner.node;
    match &f.cause {
        Cause::Collision {
            service,
            kubelet,
            held_behind,
            ..
        } => format!(
            "This pod's IP {ip}{} is {} of node {node}{}. {}",
            rests_on(f),
            held_as(f, service.as_ref(), reader),
            read_from(f),
            breaks(f, kubelet.as_ref().map(|k| k.count), held_behind.as_deref())
        ),
        Cause::Refused {
            kubelet, holder, ..
        } => super::ipam::refused(f, kubelet, holder.as_ref(), reader, true),
        Cause::Leftover { .. } => super::leftover::what(f, reader),
        Cause::Duplicate {
            holder, network, ..
        } => duplicate(node, &ip, &reader.pod(holder), network.is_some()),
        Cause::Blackhole { dead_end, .. } => format!(
            "Node {node}'s route for this pod's IP {ip} ends in {dead_end}. Kubelet probes and \
             webhooks from {node} never reach the pod."
        ),
        Cause::Overlap {
            subnet,
            cilium_range,
            addresses,
            ..
        } => overlap(f, subnet, addresses, cilium_range.map(|(r, _)| r)),
        Cause::Node(problem) => node_problem(f, problem),
        Cause::Kernel(k) => super::kernel::what(f, k, reader),
        Cause::Plan(o) => super::plan::what(o),
    }
}

/// Two pods on one address (on a secondary network, where `secondary`).
fn duplicate(node: &str, ip: &str, holder: &str, secondary: bool) -> String {
    let (on, to) = if secondary {
        (" on a secondary network", "it there")
    } else {
        ("", ip)
    };
    format!(
        "This pod and {holder} on node {node} both hold {ip}{on}. Traffic to {to} reaches only \
         one of them."
    )
}

/// What the address is to its node, in a few words.
fn held_as(f: &Finding, service: Option<&ServiceAddress>, reader: Reader<'_>) -> String {
    let dev = f
        .owner
        .device
        .as_deref()
        .map(|d| format!(" on {d}"))
        .unwrap_or_default();
    match (f.owner.role, service) {
        (Role::Router, _) => format!("Cilium's router IP{dev}"),
        (Role::Health, _) => "Cilium's health IP".to_owned(),
        (Role::Ingress, _) => "Cilium's Ingress IP".to_owned(),
        (Role::Tunnel, _) => format!("Calico's tunnel address{dev}"),
        (Role::Gateway, _) => format!("the node's pod gateway{dev}"),
        (Role::ManagementPort, _) => format!("ovn-kubernetes' management port{dev}"),
        (Role::OvnRouterPort, _) => "ovn-kubernetes' join or transit router port".to_owned(),
        (Role::Local | Role::Node, Some(a)) => {
            format!("set by {} ({}){dev}", reader.service(&a.service), a.field)
        }
        (Role::Local | Role::Node, None) => format!("a local address{dev}"),
        (Role::Pod, _) => "another pod's address".to_owned(),
        (Role::Endpoint, _) => "an endpoint Cilium keeps".to_owned(),
    }
}

/// What the pod's address rests on, when kube-ovn's record is all there is.
fn rests_on(f: &Finding) -> String {
    match f.site() {
        Some(s) if s.ip_source == IpSource::KubeOvnIp => format!(
            " (kube-ovn's record ips.kubeovn.io {}.{})",
            s.pod.name, s.pod.namespace
        ),
        _ => String::new(),
    }
}

/// Where the owner's address was read, when not from its CiliumNode (Node
/// annotations or Calico's IPAMBlocks are the place to look then).
fn read_from(f: &Finding) -> String {
    match f.owner.source {
        Source::NodeAnnotation
        | Source::LegacyNodeAnnotation
        | Source::CalicoIpamBlock
        | Source::OvnJoinAnnotation
        | Source::OvnTransitAnnotation
        | Source::OvnNodeId => format!(", per {}", f.owner.source),
        _ => String::new(),
    }
}

/// What breaks for the pod, by where the address is held; `refusals`: how
/// often kubelet reported the sandbox refused; `behind`: the host interface whose
/// namespace holds the pod's address (the kernel's word that the pod is there, and where).
fn breaks(f: &Finding, refusals: Option<u64>, behind: Option<&str>) -> String {
    let owner = &f.owner.node;
    match (f.owner.role, f.scope) {
        (Role::Ingress, Scope::SameNode) => {
            let seen = refusals.map_or_else(String::new, |n| {
                format!(" (kubelet reported FailedCreatePodSandBox {n} times)")
            });
            format!(
                "Cilium refuses its endpoint as in use{seen}: the pod stays in ContainerCreating."
            )
        }
        (Role::Ingress, Scope::CrossNode) => {
            format!("On {owner}, traffic to it goes to Cilium's ingress endpoint, not this pod.")
        }
        (Role::OvnRouterPort, _) => {
            format!("Traffic to it from {owner}'s host and OVN goes to that router, not this pod.")
        }
        (_, Scope::SameNode) => {
            let pod =
                behind.map_or_else(|| "the pod".to_owned(), |i| format!("the pod behind {i}"));
            format!("kubelet probes and webhooks from {owner} reach {owner} itself, not {pod}.")
        }
        (_, Scope::CrossNode) => format!(
            "The host network of node {owner} cannot reach it: webhooks or probes from {owner} fail."
        ),
    }
}

/// One finding per Cilium range and Subnet: the addresses concerned.
fn overlap(f: &Finding, subnet: &str, addresses: &[InfraAddress], range: Option<IpNet>) -> String {
    let node = &f.owner.node;
    let (what, them) = match (addresses, range) {
        ([one], _) => (
            format!("Cilium's {} IP {} of node {node} lies", one.role, one.ip),
            "it",
        ),
        ([_, ..], _) => (
            format!(
                "Cilium's {} of node {node} lie",
                super::addresses(addresses, 3)
            ),
            "any of them",
        ),
        ([], Some(r)) => (
            format!("Cilium's range {r} of node {node} lies"),
            "its addresses",
        ),
        ([], None) => (
            format!("Cilium's address {} of node {node} lies", f.ip_text()),
            "it",
        ),
    };
    format!(
        "{what} in kube-ovn Subnet {subnet}, not excluded. kube-ovn can give {them} to a pod, \
         which is then unreachable from its node or stuck in ContainerCreating."
    )
}

fn node_problem(f: &Finding, problem: &NodeProblem) -> String {
    let node = &f.owner.node;
    match problem {
        NodeProblem::Exhausted { .. }
        | NodeProblem::OperatorError { pool: Some(_), .. }
        | NodeProblem::PoolNearlyFull(_) => super::pool::note(node, problem),
        NodeProblem::Capacity {
            ranges,
            usable,
            allocatable,
            ..
        } => format!(
            "Node {node} accepts {allocatable} pods, but its pod range {} holds {usable} usable \
             addresses. Pods beyond that stay in ContainerCreating.",
            list(ranges)
        ),
        NodeProblem::OperatorError { error, .. } => format!(
            "cilium-operator cannot allocate pod addresses for node {node}: \"{}\". New pods on \
             {node} get no address.",
            super::words(error, 120)
        ),
        NodeProblem::MigrationStuck { .. } => super::ipam::migration_stuck(node, problem, true),
        NodeProblem::StaleBridge { .. } => super::ipam::stale_bridge(node, problem, true),
        NodeProblem::Calico(a) => super::calico::tunnel(f, a, true),
        NodeProblem::NodeAddressClaimed(c) => super::vip::note(c),
        NodeProblem::NotMasqueraded { .. } => format!(
            "Cilium's Ingress IP {} of node {node} is in no Subnet kube-ovn masquerades. Gateway \
             API and Ingress requests to backends on other nodes time out.",
            f.ip_text()
        ),
    }
}

/// The traffic note: host traffic the eBPF observer saw delivered to the node
/// instead of the pod.
pub fn traffic(node: &str, ip: IpAddr, (packets, syns, refused): (u64, u64, u64)) -> String {
    format!(
        "Node {node}'s host sent {packets} packets ({syns} connection attempts) to this pod's IP \
         {ip}; {node} delivered them to itself and refused {refused}."
    )
}
