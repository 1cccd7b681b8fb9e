//! The text of a collision: what the address is and what breaks (its fix is
//! told by `fix`).

use std::fmt::Write as _;

use super::{Reader, pod_name, remedy_for};
use crate::{
    cni::{self, Holds},
    detect::{Cause, Finding, Role, Scope},
    inventory::{ServiceAddress, Source},
};

/// What an ovn-kubernetes router port is.
const ROUTER_PORT: &str = "ovn-kubernetes' router port address (its gateway router on the join \
                           switch, or its transit switch port)";

fn what_it_is(f: &Finding, service: Option<&ServiceAddress>, reader: Reader<'_>) -> String {
    let node = &f.owner.node;
    let dev = f
        .owner
        .device
        .as_deref()
        .map(|d| format!(" on device {d}"))
        .unwrap_or_default();
    let source = f.owner.source;
    match f.owner.role {
        Role::Router => format!(
            "Cilium's router IP (CiliumInternalIP) of node {node}{dev}, according to {source}"
        ),
        Role::Ingress => format!(
            "Cilium's Ingress IP of node {node}, held by the reserved:ingress endpoint, according to {source}"
        ),
        Role::Health => {
            format!("Cilium's health endpoint IP of node {node}{dev}, according to {source}")
        }
        Role::Tunnel => {
            format!("Calico's tunnel address of node {node}{dev}, according to {source}")
        }
        Role::Gateway => format!("the pod gateway of node {node}{dev}, according to {source}"),
        Role::ManagementPort => format!(
            "ovn-kubernetes' management port address of node {node}{dev}, according to {source}"
        ),
        Role::OvnRouterPort => format!("{ROUTER_PORT} of node {node}, according to {source}"),
        Role::Local | Role::Node => local_address(f, service, &dev, reader),
        Role::Pod => format!("another pod's address on node {node}"),
        Role::Endpoint => format!("an endpoint Cilium keeps on node {node}"),
    }
}

/// What a plain local address of the owner node is: a Service's, on a VIP
/// device, NodeLocal DNSCache's, or just an address of the node.
fn local_address(
    f: &Finding,
    service: Option<&ServiceAddress>,
    dev: &str,
    reader: Reader<'_>,
) -> String {
    let node = &f.owner.node;
    let device = f.owner.device.as_deref();
    match service {
        // From the API alone (`audit`): no kernel says where it is bound.
        Some(a) if f.owner.source == Source::Services => format!(
            "an address {} sets in {}, which kube-proxy binds on every node, node \
             {node}'s too (in IPVS mode on kube-ipvs0, a local route)",
            reader.service(&a.service),
            a.field
        ),
        Some(a) => format!(
            "a local address of node {node}{dev}, set by {} in {}",
            reader.service(&a.service),
            a.field
        ),
        None if device.is_some_and(|d| cni::holds(d, Holds::ServiceAddresses)) => format!(
            "a local address of node {node}{dev}, where kube-proxy binds Services' \
             cluster, external and load-balancer IPs"
        ),
        None if device.is_some_and(|d| cni::holds(d, Holds::NodeLocalDns)) => {
            format!("NodeLocal DNSCache's address on node {node}{dev}, held on every node")
        }
        None => format!("a local address of node {node}{dev}"),
    }
}

fn impact(f: &Finding) -> String {
    let owner = &f.owner.node;
    let ip = f.ip_text();
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
        (Role::OvnRouterPort, _) => format!(
            "{ip} is an OVN router port of node {owner}: traffic from {owner}'s host and from OVN \
             to {ip} goes to that router, not to this pod."
        ),
        (Role::Gateway, _) => format!(
            "{ip} is the gateway of node {owner}'s pods: their traffic, and {owner}'s own to \
             {ip}, goes to the gateway, not to this pod."
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

/// A collision's message, with kubelet's report where the IP came from it.
pub(super) fn collision(f: &Finding, reader: Reader<'_>) -> String {
    let Cause::Collision {
        fib,
        shadowed_route,
        kubelet,
        service,
        held_behind,
        ..
    } = &f.cause
    else {
        return String::new();
    };
    let mut m = format!(
        "{} has IP {}, which is {}.",
        pod_name(f),
        f.ip_text(),
        what_it_is(f, service.as_ref(), reader)
    );
    // The kernel's answer is evidence only when it shows local delivery.
    if let Some(fib) = fib.as_ref().filter(|t| t.starts_with("local")) {
        let _ = write!(m, " The host's route lookup says: {fib}.");
    }
    if let Some(route) = shadowed_route {
        let _ = write!(
            m,
            " The pod route {route} is shadowed by the local table, which the kernel consults first."
        );
    }
    if let Some(iface) = held_behind {
        let _ = write!(m, " The namespace behind {iface} holds it too.");
    }
    let _ = write!(m, " {} {}", impact(f), remedy_for(&f.remedy, reader));
    if let Some(k) = kubelet {
        let _ = write!(m, " {}", super::ipam::kubelet_says(k, reader));
    }
    m
}
