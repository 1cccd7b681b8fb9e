//! Calico's IPAM against the tunnel addresses its nodes announce: a node's
//! `projectcalico.org/*TunnelAddr` / `*WireguardInterfaceAddr` address that
//! no IPAMBlock allocates to that node's tunnel (`UnallocatedTunnelAddress`).
//!
//! calico-node's tunnel allocator keeps an address only while IPAM allocates
//! it to (this node, this tunnel type), and otherwise takes a new one — on
//! start, and every five minutes in current releases (projectcalico/calico
//! `node/pkg/allocateip/allocateip.go`, `ensureHostTunnelAddress`,
//! @062ba492). A stale annotation survives where that did not run (a
//! reinstall that kept the Node's annotations, projectcalico/node PR#254; a
//! handle collected while the node kept its address, calico#7192): Calico can
//! then hand the address to a pod (calico#3589, calico#6160).
//!
//! A pod on a block address allocated to a tunnel needs nothing here: the
//! blocks' tunnel allocations are owners in the [`super::Index`], so it is a
//! tunnel collision read from the block (a tunnel address need not be the
//! first of its block).

use std::net::IpAddr;

use super::{
    Cause, Finding, FindingKind, NodeProblem, Owner, Remedy, Role, Scope, Trust,
    kind::{Alert, Count, Spec},
};
use crate::{
    cni::{self, Holds},
    inventory::{Allocation, Inventory, IpamOwner, Source},
};

/// A node's Calico tunnel address that no IPAMBlock allocates to its tunnel.
pub(super) const UNALLOCATED: Spec = Spec::node(
    "UnallocatedTunnelAddress",
    "a node's Calico tunnel address that no IPAMBlock allocates to its tunnel: Calico may hand \
     it to a pod",
    Count::IpamProblems,
    Alert::None(
        "found by audit and check --ipamblocks: the agent reads no IPAMBlocks (every agent \
         would hold them all)",
    ),
);

/// What Calico's IPAM says of a node's announced tunnel address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TunnelAllocation {
    /// Its block holds it, unallocated.
    Free {
        /// The IPAMBlock.
        block: String,
    },
    /// No block holds it; an enabled IPPool does.
    NoBlock {
        /// The IPPool.
        pool: String,
    },
    /// Allocated to a pod.
    Pod {
        /// The IPAMBlock.
        block: String,
        /// `namespace/name` of the pod the allocation names.
        pod: String,
    },
    /// Allocated to another node's tunnel.
    OtherTunnel {
        /// The IPAMBlock.
        block: String,
        /// The node whose tunnel it is.
        node: String,
        /// Its device.
        device: &'static str,
    },
    /// Allocated with neither handle nor attributes: an older Calico's
    /// tunnel address, held here though this node does not announce it
    /// (perhaps another node's).
    Unmarked {
        /// The IPAMBlock.
        block: String,
    },
    /// Allocated to something else (a handle, or none).
    Other {
        /// The IPAMBlock.
        block: String,
        /// The allocation's handle, when it has one.
        handle: Option<String>,
    },
}

/// The fixes in Calico's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CalicoFix {
    /// Let calico-node on the node take its tunnel address from IPAM again.
    ReallocateTunnel {
        /// The node.
        node: String,
        /// The address it announces now.
        ip: IpAddr,
    },
    /// The kernel holds a tunnel address the node's Node does not announce
    /// (a tunnel mode switched off, an address left by a reinstall): Felix
    /// removes the addresses of a tunnel mode that is off when it starts
    /// (felix/dataplane/linux/ipip_mgr.go `cleanUpIPIPAddrs`, @87c15906);
    /// older Felix leaves them, and then the address must go by hand.
    RemoveLeftover {
        /// The node.
        node: String,
        /// The address.
        ip: IpAddr,
        /// The tunnel device holding it.
        device: String,
    },
    /// Calico's IPAM had no address or block left for the node's pods.
    CheckPools {
        /// The node.
        node: String,
    },
    /// Calico's IPAM refused the address a pod asked for as assigned already.
    AssignedAddress {
        /// The node of the refused pod.
        node: String,
        /// The address.
        ip: IpAddr,
        /// A live pod holds it (else IPAM keeps it for none).
        held: bool,
    },
}

/// `UnallocatedTunnelAddress` for each tunnel address `inv.node` announces (or,
/// for `check`, its tunnel devices hold: the kernel names the device) that
/// the IPAMBlocks do not allocate to one of its tunnels. Nothing without
/// blocks, and nothing for an address outside every block and pool, or in
/// the node's `spec.podCIDRs` with no block (host-local IPAM: Calico derives
/// the tunnel address from the podCIDR and allocates nothing).
pub(super) fn unallocated_tunnels(inv: &Inventory) -> Vec<Finding> {
    let ipam = &inv.cluster.calico;
    if !ipam.has_blocks() {
        return Vec::new();
    }
    let node = inv.node.as_str();
    let held = inv
        .host
        .addresses
        .iter()
        .filter(|a| cni::holds(&a.device, Holds::Tunnel))
        .map(|a| (a.ip, Some(a.device.as_str()), Source::Kernel));
    let announced = inv
        .cluster
        .annotated_nodes
        .iter()
        .filter(|n| n.name == node)
        .flat_map(|n| n.addresses.iter())
        .filter(|a| a.role == Role::Tunnel && a.source == Source::CalicoNodeAnnotation)
        .map(|a| (a.ip, None, a.source));
    let in_annotations: std::collections::HashSet<IpAddr> =
        announced.clone().map(|(ip, _, _)| ip).collect();
    // "Not announced" is known only where this node's Node was read and
    // carries Calico's annotations (the Kubernetes datastore): with an etcd
    // datastore it carries none.
    let node_read = inv
        .node_facts
        .iter()
        .any(|n| n.name == node && n.calico_annotated);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    // The kernel first: it names the device; one finding per address.
    for (ip, device, source) in held.chain(announced) {
        if !seen.insert(ip) {
            continue;
        }
        let leftover = device.filter(|_| node_read && !in_annotations.contains(&ip));
        let Some(allocation) = judge(inv, ip, leftover.is_some()) else {
            continue;
        };
        out.push(Finding {
            kind: FindingKind::UnallocatedTunnelAddress,
            scope: Scope::SameNode,
            ip: Some(ip),
            owner: Owner::new(node, Role::Tunnel, device.map(str::to_owned), source),
            cause: Cause::Node(NodeProblem::Calico(allocation)),
            remedy: Remedy::Calico(fix(node, ip, leftover)),
            // The node's kernel, its Node's annotations and Calico's blocks:
            // no tenant writes them.
            trust: Trust::Cluster,
        });
    }
    out
}

/// Re-take the announced address from IPAM, or remove the one on `leftover`
/// (the device of an address only the kernel holds).
fn fix(node: &str, ip: IpAddr, leftover: Option<&str>) -> CalicoFix {
    let node = node.to_owned();
    match leftover {
        Some(device) => CalicoFix::RemoveLeftover {
            node,
            ip,
            device: device.to_owned(),
        },
        None => CalicoFix::ReallocateTunnel { node, ip },
    }
}

/// What is wrong with `ip` as `inv.node`'s tunnel address (`leftover`: one
/// the kernel holds and the Node does not announce); `None` when IPAM
/// allocates it to one of the node's tunnels, or does not judge it.
fn judge(inv: &Inventory, ip: IpAddr, leftover: bool) -> Option<TunnelAllocation> {
    let node = inv.node.as_str();
    Some(match inv.cluster.calico.allocation(ip)? {
        Allocation::To(_, IpamOwner::Tunnel { node: n, .. }) if n == node => return None,
        // An old tunnel address, which calico-node marks as its own when it
        // next starts: the node announcing it is whose it is. Not a leftover,
        // which may be another node's.
        Allocation::To(_, IpamOwner::Unmarked) if !leftover => return None,
        Allocation::To(b, IpamOwner::Unmarked) => TunnelAllocation::Unmarked {
            block: b.name.clone(),
        },
        Allocation::To(b, IpamOwner::Tunnel { node: n, kind }) => TunnelAllocation::OtherTunnel {
            block: b.name.clone(),
            node: n.clone(),
            device: kind.device(),
        },
        Allocation::To(b, IpamOwner::Pod { namespace, name }) => TunnelAllocation::Pod {
            block: b.name.clone(),
            pod: format!("{namespace}/{name}"),
        },
        Allocation::To(b, IpamOwner::Other { handle }) => TunnelAllocation::Other {
            block: b.name.clone(),
            handle: handle.clone(),
        },
        Allocation::Free(b) => TunnelAllocation::Free {
            block: b.name.clone(),
        },
        // Not listed, so never judged free: unchecked.
        Allocation::Unknown(_) => return None,
        Allocation::InPool(_) if in_pod_cidr(inv, ip) => return None,
        Allocation::InPool(p) => TunnelAllocation::NoBlock {
            pool: p.name.clone(),
        },
    })
}

/// Whether `ip` lies in the node's `spec.podCIDRs`.
fn in_pod_cidr(inv: &Inventory, ip: IpAddr) -> bool {
    inv.node_facts
        .iter()
        .flat_map(|n| n.pod_cidrs.iter())
        .any(|c| c.contains(&ip))
}
