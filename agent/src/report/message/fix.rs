//! The fix of a finding, at either length: the Event note's one sentence
//! starting `Fix:` (the steps in order, the caveats and the why are in the
//! long message and the runbook), or the long one of `check`, `audit` and the
//! runbook. Collisions' and the node's own fixes are told here, the others by
//! their family.

use std::net::IpAddr;

use super::{NOT_DISJOINT, Reader};
use crate::{
    detect::{Remedy, Reserver},
    inventory::{IpRange, ServiceAddress, ServiceField},
};

/// The one-sentence fix of `r` for `reader`.
pub fn fix(r: &Remedy, reader: Reader<'_>) -> String {
    remedy(r, reader, true)
}

/// The fix for `reader`, told by the family of findings it belongs to.
pub fn remedy_for(r: &Remedy, reader: Reader<'_>) -> String {
    remedy(r, reader, false)
}

/// The fix of `r` for `reader`; `short`: the Event note's one sentence.
fn remedy(r: &Remedy, reader: Reader<'_>, short: bool) -> String {
    match r {
        Remedy::CarveCiliumPool { .. }
        | Remedy::ExcludeInPodAllocator
        | Remedy::ReallocatePod { .. } => collision(r, short),
        Remedy::ReservedAddress { by } => reserved(*by, short),
        Remedy::RemoveLocalAddress { device, subnet } => {
            remove_local_address(device.as_deref(), subnet.as_deref(), short)
        }
        Remedy::RemoveServiceAddress {
            ip,
            service,
            device,
        } => remove_service_address(*ip, service.as_ref(), device.as_deref(), reader, short),
        Remedy::CheckCalicoIpam { .. } | Remedy::Calico(_) => super::calico::fix(r, short),
        Remedy::Kernel(k) => super::kernel::fix(k, reader),
        Remedy::Plan(m) => super::plan::fix(m),
        Remedy::ClearCalicoRoute { .. } | Remedy::RecreateBridge { .. } => {
            super::leftover::remedy(r, reader, short)
        }
        Remedy::FreeNodeAddress(c) => super::vip::fix(c, reader, short),
        Remedy::RestoreRoute { .. }
        | Remedy::DeleteStaleRoute { .. }
        | Remedy::DeleteBridgeAddress { .. }
        | Remedy::ExcludeFromSubnet { .. } => route_fix(r, short),
        // The loud failures' and the node allocator's.
        _ => super::pool::remedy(r, reader, short),
    }
}

/// The fixes of the node's routes and addresses, and of an overlap.
fn route_fix(r: &Remedy, short: bool) -> String {
    match r {
        Remedy::RestoreRoute { node, .. } if short => {
            format!("Fix: restore the pod network's route to the pod on {node}.")
        }
        Remedy::RestoreRoute { node, kube_ovn } => {
            let layout = if *kube_ovn {
                "kube-ovn lays one route for the subnet via ovn0; Cilium and Calico one per pod"
            } else {
                "the CNI lays it: Cilium and Calico one route per pod"
            };
            format!("Fix: restore the pod network's route on {node} ({layout}).")
        }
        Remedy::DeleteStaleRoute { node, dead_end } if short => {
            format!("Fix: delete the stale {dead_end} route on {node}.")
        }
        Remedy::DeleteStaleRoute { node, dead_end } => format!(
            "Fix: delete the stale {dead_end} route on {node}, or restore the pod network's route."
        ),
        Remedy::DeleteBridgeAddress {
            node,
            bridge,
            address,
        } if short => format!("Fix: on {node}, run `ip addr del {address} dev {bridge}`."),
        Remedy::DeleteBridgeAddress {
            node,
            bridge,
            address,
        } => format!(
            "Fix: on {node}, delete the old address (`ip addr del {address} dev {bridge}`); the \
             bridge plugin gives {bridge} this node's gateway with the next pod. Or delete the \
             bridge (`ip link delete {bridge}`) and restart the node's pods."
        ),
        Remedy::ExcludeFromSubnet {
            subnet, exclude, ..
        } if short => format!("Fix: add \"{exclude}\" to spec.excludeIps of Subnet {subnet}."),
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
        _ => String::new(),
    }
}

/// The fixes of collisions with Cilium's addresses: cut Cilium's pool out of
/// the pod allocator's range, or reallocate the pod.
fn collision(r: &Remedy, short: bool) -> String {
    match r {
        Remedy::CarveCiliumPool {
            subnet,
            block,
            pool,
        } if short => format!(
            "Fix: give Cilium a pool from the end of {block} (e.g. {pool}), add \"{}\" to \
             spec.excludeIps of Subnet {subnet}, then delete the pod.",
            IpRange::of(pool)
        ),
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
        Remedy::ExcludeInPodAllocator if short => {
            "Fix: exclude Cilium's addresses in the kube-ovn \
             Subnet that handed this one out (spec.excludeIps), then delete the pod."
                .to_owned()
        }
        Remedy::ExcludeInPodAllocator => format!(
            "Fix: exclude Cilium's addresses in the kube-ovn Subnet that handed this one out \
             (spec.excludeIps), best by giving Cilium a pool cut from the end of that Subnet's \
             block and excluding the whole pool; then delete the pod so it is given another IP. \
             {NOT_DISJOINT}"
        ),
        Remedy::ReallocatePod { .. } if short => "Fix: delete the pod so it is given another \
             address (Cilium's allocator handed out its own address, cilium#46799)."
            .to_owned(),
        Remedy::ReallocatePod { node } => format!(
            "Fix: delete the pod so it is given another address. Cilium's own allocator handed \
             out an address Cilium holds itself (its host-scope allocator starts empty after an \
             agent restart, cilium#46799). If it happens again on {node}: the node's pod CIDR \
             leaves too few addresses once Cilium's router, health and Ingress IPs are taken — \
             lower kubelet's --max-pods or give nodes larger pod CIDRs, and upgrade Cilium \
             (cilium#47360 restores the Ingress IP more robustly)."
        ),
        _ => String::new(),
    }
}

/// The fix when the pod holds an address `by` reserves.
fn reserved(by: Reserver, short: bool) -> String {
    match by {
        Reserver::OvnRouterPort if short => {
            "Fix: remove the pod's second allocator, or move the pod range \
             (--cluster-subnets) or ovn-kubernetes' join (--gateway-v4/v6-join-subnet) or transit \
             subnet (--cluster-manager-v4-transit-subnet) off it; then delete the pod."
                .to_owned()
        }
        Reserver::OvnRouterPort => ROUTER_PORT_FIX.to_owned(),
        _ if short => format!(
            "Fix: {} never hands it out: remove the pod's other allocator, then delete the pod.",
            reserver(by)
        ),
        _ => format!(
            "Fix: {} never hands this address out, so the pod got it from a second allocator (a \
             static-IP annotation, another IPAM or CNI): remove that assignment, then delete the \
             pod so it is given another IP.",
            reserver(by)
        ),
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

/// Who reserves an address, and which.
fn reserver(by: Reserver) -> &'static str {
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

/// The fix when a local address of the node (on `device`) shadows the pod:
/// remove it, or keep the allocator off it.
fn remove_local_address(device: Option<&str>, subnet: Option<&str>, short: bool) -> String {
    let what = device.map_or_else(
        || "the address".to_owned(),
        |d| {
            format!(
                "the address from {d}{}",
                if short { "" } else { device_hint(d) }
            )
        },
    );
    match (subnet, short) {
        (Some(s), true) => {
            format!("Fix: remove {what} or exclude it in Subnet {s}, then delete the pod.")
        }
        (None, true) => {
            format!("Fix: remove {what} or keep the pod allocator off it, then delete the pod.")
        }
        (Some(subnet), false) => format!(
            "Fix: remove {what}, or exclude it from kube-ovn Subnet {subnet} \
             (spec.excludeIps); then delete the pod so it is given another IP."
        ),
        (None, false) => format!(
            "Fix: remove {what}, or keep the pod allocator from handing it out; then \
             delete the pod so it is given another IP."
        ),
    }
}

/// The fix when a Service's address shadows the pod: remove the address from
/// the Service; evicting the pod fixes nothing a tenant cannot redo.
fn remove_service_address(
    ip: IpAddr,
    service: Option<&ServiceAddress>,
    device: Option<&str>,
    reader: Reader<'_>,
    short: bool,
) -> String {
    let Some(a) = service else {
        if short {
            return format!(
                "Fix: remove {ip} from the Service that claims it (kubectl get svc -A -o wide | \
                 grep -w {ip}); deleting the pod does not help."
            );
        }
        let on = device.map_or_else(String::new, |d| format!(" on {d}"));
        return format!(
            "Fix: find the Service that claims {ip}{on} (kubectl get svc -A -o wide | grep -w \
                 {ip}) and remove the address from its external or load-balancer IPs, or, for a \
                 cluster IP, give Services and pods disjoint ranges; deleting the pod does not \
                 help."
        );
    };
    let why = match a.field {
        ServiceField::ClusterIps => return cluster_ip_fix(ip, a, reader, short),
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
    let service = reader.service(&a.service);
    match (reader.sees(&a.service), short) {
        (true, true) => format!(
            "Fix: remove {ip} from {} of {service}; deleting the pod does not help.",
            a.field
        ),
        (false, true) => format!(
            "Fix: the cluster's operators must remove {ip} from {service}; deleting the pod does \
             not help."
        ),
        (false, false) => format!(
            "Fix: {service} sets {ip} as one of its addresses; the cluster's operators must \
             remove it there (`ipshadow check` on the node names it). Deleting this pod does not \
             help."
        ),
        (true, false) => format!(
            "Fix: remove {ip} from {} of {service}; {why}. Deleting the pod does not help: the \
             address belongs to the Service.",
            a.field,
        ),
    }
}

/// The fix when the pod's address is a Service's cluster IP: it cannot be
/// removed (only the Service recreated); the ranges overlap. `short`: the
/// Event note's.
fn cluster_ip_fix(ip: IpAddr, a: &ServiceAddress, reader: Reader<'_>, short: bool) -> String {
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
