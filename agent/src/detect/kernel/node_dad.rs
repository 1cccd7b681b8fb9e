//! A node's own IPv6 address the kernel marks `dadfailed`: another holder on
//! its link answered for it, so the node does not use it — a CNI's gateway
//! or router address whose pods lose their next hop, or a pod of this node
//! that holds the address (a collision the node's side then loses: the
//! kernel keeps the first holder's).

use super::{Index, KERNEL_TRUTH, dad::DAD_UNSEEN, finding, row};
use crate::{
    detect::{
        Finding, FindingKind, PodRef, Trust,
        kind::{Count, Spec},
        truth::{KernelFix, KernelTruth},
    },
    inventory::Inventory,
};

/// The node's IPv6 address failed duplicate address detection.
pub(in crate::detect) const NODE_DAD: Spec = Spec {
    unseen_by_audit: Some(DAD_UNSEEN),
    ..Spec::node(
        "NodeAddressDadFailed",
        "one of the node's IPv6 addresses failed duplicate address detection (dadfailed): \
         another holder on its link answered for it, and the node does not use it",
        Count::KernelTruth,
        KERNEL_TRUTH,
    )
};

/// One finding per address of the node the kernel marks `dadfailed`; the
/// pod namespaces of this node holding it, and the pod given it, named.
pub(in crate::detect) fn failed(inv: &Inventory) -> Vec<Finding> {
    if inv.host.dad_failed.is_empty() {
        return Vec::new();
    }
    let idx = Index::new(inv);
    let mut out = Vec::new();
    for &ip in &inv.host.dad_failed {
        let device = inv
            .host
            .addresses
            .iter()
            .find(|a| a.ip == ip)
            .map(|a| a.device.clone());
        let others: Vec<String> = idx.holders(ip).map(|i| i.name.clone()).collect();
        let other_pod = idx.pods_at(ip).next().map(PodRef::from);
        let truth = KernelTruth {
            site: None,
            row: row(&idx, ip),
            reached: None,
            other_pod,
        };
        let fix = KernelFix::RedoNodeDad {
            node: inv.node.clone(),
            device: device.clone().unwrap_or_else(|| "its device".to_owned()),
            others,
        };
        out.push(finding(
            inv,
            (FindingKind::NodeAddressDadFailed, ip),
            truth,
            fix,
            device,
            Trust::Kernel,
        ));
    }
    out
}

#[cfg(test)]
#[path = "node_dad_tests.rs"]
mod tests;
