//! The fix of an Event note: one sentence starting `Fix:`. The steps in
//! order, the caveats and the why are in the long message and the runbook.

use std::net::IpAddr;

use super::Reader;
use crate::detect::Reserver;
use crate::{
    detect::Remedy,
    inventory::{IpRange, ServiceAddress},
};

/// The one-sentence fix of `r` for `reader`.
pub fn fix(r: &Remedy, reader: Reader<'_>) -> String {
    match r {
        Remedy::CarveCiliumPool {
            subnet,
            block,
            pool,
        } => format!(
            "Fix: give Cilium a pool from the end of {block} (e.g. {pool}), add \"{}\" to \
             spec.excludeIps of Subnet {subnet}, then delete the pod.",
            IpRange::of(pool)
        ),
        Remedy::ExcludeInPodAllocator => "Fix: exclude Cilium's addresses in the kube-ovn Subnet \
             that handed this one out (spec.excludeIps), then delete the pod."
            .to_owned(),
        Remedy::ReallocatePod { .. } => "Fix: delete the pod so it is given another address \
             (Cilium's allocator handed out its own address, cilium#46799)."
            .to_owned(),
        Remedy::CheckCalicoIpam { .. } | Remedy::Calico(_) => super::calico::fix(r),
        Remedy::ReservedAddress {
            by: Reserver::OvnRouterPort,
        } => "Fix: remove the pod's second allocator, or move the pod range (--cluster-subnets) \
             or ovn-kubernetes' join (--gateway-v4/v6-join-subnet) or transit subnet \
             (--cluster-manager-v4-transit-subnet) off it; then delete the pod."
            .to_owned(),
        Remedy::ReservedAddress { by } => format!(
            "Fix: {} never hands it out: remove the pod's other allocator, then delete the pod.",
            super::collision::reserver(*by)
        ),
        Remedy::RemoveLocalAddress { device, subnet } => {
            local_address(device.as_deref(), subnet.as_deref())
        }
        Remedy::FreeNodeAddress(c) => super::vip::fix(c, reader, true),
        Remedy::RemoveServiceAddress { ip, service, .. } => {
            service_address(*ip, service.as_ref(), reader)
        }
        Remedy::RestoreRoute { .. }
        | Remedy::DeleteStaleRoute { .. }
        | Remedy::DeleteBridgeAddress { .. } => route_fix(r),
        Remedy::ExcludeFromSubnet {
            subnet, exclude, ..
        } => format!("Fix: add \"{exclude}\" to spec.excludeIps of Subnet {subnet}."),
        Remedy::Kernel(k) => super::kernel::fix(k, reader),
        Remedy::Plan(m) => super::plan::fix(m),
        Remedy::ClearCalicoRoute { .. } | Remedy::RecreateBridge { .. } => {
            super::leftover::remedy(r, reader, true)
        }
        Remedy::DisconnectEndpoint { .. }
        | Remedy::ReallocateDuplicate { .. }
        | Remedy::RecreateNewer { .. }
        | Remedy::AddCapacity { .. }
        | Remedy::FixOperatorAllocation { .. }
        | Remedy::ClearPodCidrsAfterRollout { .. }
        | Remedy::PoolInMasqueradedSubnet { .. }
        | Remedy::ReleaseHostLocal { .. } => ipam_fix(r),
        Remedy::CheckOperatorPool { .. }
        | Remedy::KeepOldPoolOrReallocate { .. }
        | Remedy::GrowClusterPool { .. } => super::pool::fix(r),
    }
}

/// Remove a local address of the node (from `device`), or keep the allocator off it.
fn local_address(device: Option<&str>, subnet: Option<&str>) -> String {
    let from = device.map_or_else(String::new, |d| format!(" from {d}"));
    let or = subnet.map_or_else(
        || " or keep the pod allocator off it".to_owned(),
        |s| format!(" or exclude it in Subnet {s}"),
    );
    format!("Fix: remove the address{from}{or}, then delete the pod.")
}

/// The fixes of the node's routes and addresses.
fn route_fix(r: &Remedy) -> String {
    match r {
        Remedy::RestoreRoute { node, .. } => {
            format!("Fix: restore the pod network's route to the pod on {node}.")
        }
        Remedy::DeleteStaleRoute { node, dead_end } => {
            format!("Fix: delete the stale {dead_end} route on {node}.")
        }
        Remedy::DeleteBridgeAddress {
            node,
            bridge,
            address,
        } => format!("Fix: on {node}, run `ip addr del {address} dev {bridge}`."),
        _ => String::new(),
    }
}

/// The fixes of the loud failures and of the node's allocator.
fn ipam_fix(r: &Remedy) -> String {
    match r {
        Remedy::ReleaseHostLocal { node } => format!(
            "Fix: on {node}, delete the files in /var/lib/cni/networks/<network>/ of containers \
             that no longer exist, or lower --max-pods below the range's size."
        ),
        Remedy::DisconnectEndpoint { node, ip, .. } => {
            let family = if ip.is_ipv4() { "ipv4" } else { "ipv6" };
            format!(
                "Fix: in the Cilium agent on {node}, run cilium-dbg endpoint disconnect \
                 {family}:{ip} once no pod owns it."
            )
        }
        Remedy::ReallocateDuplicate { node } => format!(
            "Fix: delete this pod so it is given another address; then find why {node}'s \
             address was handed out twice."
        ),
        Remedy::RecreateNewer { pod } => {
            format!("Fix: delete the newer pod, {pod}, so it is recreated with another address.")
        }
        Remedy::AddCapacity { node, usable } => {
            let to = usable.map_or_else(String::new, |u| format!(" to at most {u}"));
            format!(
                "Fix: lower kubelet's --max-pods on {node}{to}, or give nodes larger pod ranges."
            )
        }
        Remedy::FixOperatorAllocation { node } => format!(
            "Fix: correct what the error names, until CiliumNode {node}'s \
             status.ipam.operator-status.error is empty."
        ),
        Remedy::ClearPodCidrsAfterRollout { node } => format!(
            "Fix: in this order, move every Cilium agent to the new config, clear \
             spec.ipam.podCIDRs of CiliumNode {node}, then restart its agent."
        ),
        Remedy::PoolInMasqueradedSubnet { subnet } => match subnet {
            Some((name, block)) => format!(
                "Fix: give Cilium a pool from the end of Subnet {name}'s block {block}, \
                 excluded there."
            ),
            None => "Fix: give Cilium a pool inside a Subnet kube-ovn masquerades, excluded \
                 there."
                .to_owned(),
        },
        // The collision, blackhole and overlap fixes are told by `fix`.
        _ => String::new(),
    }
}

/// The fix when a Service's address shadows the pod.
fn service_address(ip: IpAddr, service: Option<&ServiceAddress>, reader: Reader<'_>) -> String {
    match service {
        Some(a) if a.field == crate::inventory::ServiceField::ClusterIps => {
            super::collision::cluster_ip_fix(ip, a, reader, true)
        }
        Some(a) if reader.sees(&a.service) => format!(
            "Fix: remove {ip} from {} of Service {}/{}; deleting the pod does not help.",
            a.field, a.service.namespace, a.service.name
        ),
        Some(_) => format!(
            "Fix: the cluster's operators must remove {ip} from a Service in another \
             namespace; deleting the pod does not help."
        ),
        None => format!(
            "Fix: remove {ip} from the Service that claims it (kubectl get svc -A -o wide | grep \
             -w {ip}); deleting the pod does not help."
        ),
    }
}
