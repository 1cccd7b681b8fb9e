//! The fix of a collision, fitted to the allocators the inventory shows.

use ipnet::IpNet;

use super::{Owner, Remedy, Role};
use crate::inventory::{Inventory, IpSource, PodIp, Source};

/// Whether kube-ovn gave the pod its address: it came from kube-ovn's
/// annotation or record, or lies in a primary Subnet (in a mixed cluster, the
/// other nodes' pods come from another allocator).
pub(super) fn uses_kube_ovn(inv: &Inventory, pip: &PodIp) -> bool {
    let mut blocks = inv.cluster.primary_subnets().flat_map(|s| &s.cidrs);
    matches!(pip.source, IpSource::Annotation | IpSource::KubeOvnIp)
        || blocks.any(|c| c.contains(&pip.ip))
}

/// The fix of a collision, fitted to the allocators the inventory shows.
pub(super) fn collision_remedy(inv: &Inventory, owner: &Owner, pip: &PodIp) -> Remedy {
    let subnet = inv.cluster.primary_subnets().find_map(|s| {
        let block = s.cidrs.iter().find(|c| c.contains(&pip.ip))?;
        Some((s.name.clone(), *block))
    });
    match (owner.role, subnet) {
        (Role::Tunnel, _) => Remedy::CheckCalicoIpam {
            node: owner.node.clone(),
        },
        (Role::Gateway | Role::ManagementPort, _) => Remedy::ReservedAddress {
            by: if owner.role == Role::ManagementPort || owner.source == Source::OvnNodeAnnotation {
                Reserver::OvnKubernetes
            } else {
                Reserver::Bridge
            },
        },
        (Role::OvnRouterPort, _) => Remedy::ReservedAddress {
            by: Reserver::OvnRouterPort,
        },
        (Role::Local, subnet) => Remedy::RemoveLocalAddress {
            device: owner.device.clone(),
            subnet: subnet.map(|(name, _)| name),
        },
        (_, Some((subnet, block))) => Remedy::CarveCiliumPool {
            subnet,
            block,
            pool: pool_at_end(block),
        },
        // In no primary Subnet: a status address came from another allocator
        // (Cilium's own IPAM on this node of a mixed cluster).
        (_, None) if uses_kube_ovn(inv, pip) => Remedy::ExcludeInPodAllocator,
        (_, None) => Remedy::ReallocatePod {
            node: owner.node.clone(),
        },
    }
}

/// A block at the end of `block` for Cilium's pool: a /21 of a /16 (room for a
/// /29 per node), as the field report's fix cut it; never smaller than /29 (IPv4).
fn pool_at_end(block: IpNet) -> IpNet {
    let len = (block.prefix_len() + 5)
        .min(block.max_prefix_len().saturating_sub(3))
        .max(block.prefix_len());
    IpNet::new(block.broadcast(), len).map_or(block, |n| n.trunc())
}

/// A CNI that keeps addresses of the node's pod subnet for itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserver {
    /// ovn-kubernetes: `.1` (gateway) and `.2` (management port) of each node subnet.
    OvnKubernetes,
    /// The bridge plugin: the bridge's address, which host-local never hands out.
    Bridge,
    /// ovn-kubernetes: a node's join or transit router port, in the join
    /// (100.64.0.0/16) or transit (100.88.0.0/16) subnet, not a pod range.
    OvnRouterPort,
}
