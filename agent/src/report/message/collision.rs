//! The text of a collision: what the address is, what breaks, and the fixes
//! of collisions.

use std::fmt::Write as _;

use super::{NOT_DISJOINT, Reader, pod_name, remedy_for};
use crate::{
    cni::{self, Holds},
    detect::{Cause, Finding, Remedy, Reserver, Role, Scope},
    inventory::{IpRange, ServiceAddress, ServiceField, Source},
};

/// What usually puts an address on a device, for the fix: its CNI's word
/// (`cni::fix`), else what its name suggests.
fn device_hint(device: &str) -> &'static str {
    if let Some(fix) = crate::cni::fix(device) {
        fix
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

/// The fixes of collisions: cut Cilium's pool out of the pod allocator's range,
/// reallocate the pod, or remove the address from the device or the Service.
pub(super) fn remedy(r: &Remedy, reader: Reader<'_>) -> String {
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
            IpRange::of(pool)
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
        Remedy::CheckCalicoIpam { node } => format!(
            "Fix: run `calicoctl ipam check --show-problem-ips`: Calico's IPAM gave this address \
             both to the pod and to {node}'s tunnel device (a block handed out twice, or a stale \
             tunnel annotation, calico#3589); then delete the pod so Calico gives it another IP. \
             Releasing the address with `calicoctl ipam release` alone moves nothing: the pod \
             keeps it."
        ),
        Remedy::ReservedAddress {
            by: Reserver::OvnRouterPort,
        } => ROUTER_PORT_FIX.to_owned(),
        Remedy::ReservedAddress { by } => format!(
            "Fix: {} never hands this address out, so the pod got it from a second allocator (a \
             static-IP annotation, another IPAM or CNI): remove that assignment, then delete the \
             pod so it is given another IP.",
            reserver(*by)
        ),
        Remedy::RemoveLocalAddress { device, subnet } => {
            remove_local_address(device.as_deref(), subnet.as_deref())
        }
        Remedy::RemoveServiceAddress {
            ip,
            service,
            device,
        } => remove_service_address(*ip, service.as_ref(), device.as_deref(), reader),
        // The other families' fixes are rendered by the parent.
        _ => String::new(),
    }
}

/// The fix when a pod holds an ovn-kubernetes router port's address. Flags
/// from ovn-kubernetes' go-controller/pkg/config/config.go (the transit one
/// renamed from `…-transit-switch-subnet` by commit e14c4edfd, 2025-10-17).
const ROUTER_PORT_FIX: &str = "Fix: ovn-kubernetes gives this address to a node's router \
             port (its gateway router on the join switch, 100.64.0.0/16 and fd98::/64 by default, \
             or its transit switch port, 100.88.0.0/16), never to a pod: the pod got it from a \
             second allocator or from a pod range overlapping that subnet. Remove that \
             assignment, or move the pod range (--cluster-subnets) or the join subnet \
             (--gateway-v4-join-subnet, --gateway-v6-join-subnet) or the transit subnet \
             (--cluster-manager-v4-transit-subnet; --cluster-manager-v4-transit-switch-subnet \
             before late 2025) off it; then delete the pod so it is given another IP.";

/// What an ovn-kubernetes router port is.
const ROUTER_PORT: &str = "ovn-kubernetes' router port address (its gateway router on the join \
                           switch, or its transit switch port)";

/// Who reserves an address, and which.
pub(super) fn reserver(by: Reserver) -> &'static str {
    match by {
        Reserver::OvnKubernetes => {
            "ovn-kubernetes keeps the first two addresses of each node subnet (its gateway and \
             management port) and"
        }
        Reserver::Bridge => "host-local gives the bridge its gateway address and",
        Reserver::OvnRouterPort => {
            "ovn-kubernetes gives it to a node's join or transit router port and"
        }
    }
}

/// The fix when a local address of the node shadows the pod.
fn remove_local_address(device: Option<&str>, subnet: Option<&str>) -> String {
    let what = device.map_or_else(
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

/// The fix when a Service's address shadows the pod: remove the address from
/// the Service; evicting the pod fixes nothing a tenant cannot redo.
fn remove_service_address(
    ip: std::net::IpAddr,
    service: Option<&ServiceAddress>,
    device: Option<&str>,
    reader: Reader<'_>,
) -> String {
    let Some(a) = service else {
        let on = device.map_or_else(String::new, |d| format!(" on {d}"));
        return format!(
            "Fix: find the Service that claims {ip}{on} (kubectl get svc -A -o wide | grep -w \
             {ip}) and remove the address from its external or load-balancer IPs, or, for a \
             cluster IP, give Services and pods disjoint ranges; deleting the pod does not help."
        );
    };
    let why = match a.field {
        ServiceField::ClusterIps => return cluster_ip_fix(ip, a, reader, false),
        ServiceField::ExternalIps => {
            "kube-proxy binds a Service's external IPs on every node, so any pod given the \
             address is shadowed (the man-in-the-middle of CVE-2020-8554); restrict who may set \
             them (the DenyServiceExternalIPs admission plugin, or a policy)"
        }
        ServiceField::LoadBalancerIp | ServiceField::LoadBalancerIngress => {
            "the load balancer's address pool overlaps the pod range: take the pod range out of \
             the pool"
        }
    };
    if !reader.sees(&a.service) {
        return format!(
            "Fix: {} sets {ip} as one of its addresses; the cluster's operators must remove it \
             there (`ipshadow check` on the node names it). Deleting this pod does not help.",
            reader.service(&a.service)
        );
    }
    format!(
        "Fix: remove {ip} from {} of {}; {why}. Deleting the pod does not help: the address \
         belongs to the Service.",
        a.field,
        reader.service(&a.service),
    )
}

/// The fix when the pod's address is a Service's cluster IP: it cannot be
/// removed (only the Service recreated); the ranges overlap. `short`: the
/// Event note's.
pub(super) fn cluster_ip_fix(
    ip: std::net::IpAddr,
    a: &ServiceAddress,
    reader: Reader<'_>,
    short: bool,
) -> String {
    let operators = if reader.sees(&a.service) {
        ""
    } else {
        "the cluster's operators must "
    };
    if short {
        return format!(
            "Fix: {ip} is a Service's cluster IP: {operators}give Services and pods disjoint \
             ranges; deleting the pod only moves this one."
        );
    }
    format!(
        "Fix: {ip} is the cluster IP of {}: the Service range overlaps the pod range; \
         {operators}give Services and pods disjoint ranges. Deleting the pod only moves this \
         one: the next pod given a cluster IP collides again.",
        reader.service(&a.service),
    )
}

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
