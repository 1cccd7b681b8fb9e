//! A leaked sandbox: an address a namespace holds on its peer link that no pod
//! of this node has, reached by a per-pod route or inside the node's pod range.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{Index, finding, node_iface};
use crate::detect::{
    Finding, FindingKind, PodRef, Trust,
    kind::{Alert, Count, Spec},
    truth::{KernelFix, KernelTruth},
};
use crate::inventory::{Holder, Inventory, TruthRow};

/// A namespace holds an address no pod of this node has: a leaked sandbox.
pub(in crate::detect) const LEAKED: Spec = Spec {
    held_back: true,
    unseen_by_audit: Some("a sandbox no pod owns is seen only in the node's kernel"),
    ..Spec::node(
        "LeakedSandboxAddress",
        "a namespace on the node holds an address no pod of the node has: a leaked sandbox",
        Count::KernelTruth,
        Alert::Named("IPShadowLeakedSandboxAddress"),
    )
};

/// Whether `ip`, held behind `iface`, is the node's own: behind one of
/// [`node_iface`], or an address the cluster names for this node (Cilium's
/// router, health or Ingress IP, another CNI's gateway).
fn node_held(inv: &Inventory, ip: IpAddr, iface: &str) -> bool {
    node_iface(iface)
        || inv
            .own_cni_nodes()
            .any(|c| c.addresses.iter().any(|a| a.ip == ip))
}

/// The ranges this node's pods are given addresses from: its Node's podCIDRs,
/// kube-ovn's primary Subnets, its CiliumNode's ranges (cluster-pool leaves the
/// Node's empty), ovn-kubernetes' node subnets, Calico's IPAMBlocks affine to it.
fn pod_ranges(inv: &Inventory) -> impl Iterator<Item = IpNet> + '_ {
    inv.own_pod_ranges().chain(
        inv.cluster
            .calico
            .blocks()
            .iter()
            .filter(|b| b.node.as_deref() == Some(inv.node.as_str()))
            .map(|b| b.cidr),
    )
}

/// An address no pod of this node has, held on a peer link: a leaked sandbox.
pub(super) fn leaked(idx: &Index<'_>, row: &TruthRow) -> Option<Finding> {
    let inv = idx.inv;
    let ip = row.ip;
    let routed = row.route.is_some();
    let in_pod_range = pod_ranges(inv).any(|c| c.contains(&ip));
    let on_peer_link = |h: &&Holder| {
        idx.iface(h.iface_index)
            .is_some_and(|i| i.peer_index == h.peer_index)
    };
    let h = row.holders.iter().find(on_peer_link)?;
    if !(routed || in_pod_range) || node_held(inv, ip, &h.iface) || idx.any_own_pod_at(ip) {
        return None;
    }
    let other_pod = idx.pods_at(ip).next().map(PodRef::from);
    let fix = KernelFix::TearDownSandbox {
        node: inv.node.clone(),
        iface: h.iface.clone(),
    };
    let truth = KernelTruth {
        site: None,
        row: row.clone(),
        reached: Some(h.clone()),
        other_pod,
    };
    let kind = FindingKind::LeakedSandboxAddress;
    // A per-pod route the CNI laid to it is the node's word; an unrouted
    // address in the pod range may be one a pod added to its own namespace.
    let trust = if routed { Trust::Kernel } else { Trust::Hint };
    let device = Some(h.iface.clone());
    Some(finding(inv, (kind, ip), truth, fix, device, trust))
}
