//! StaleBridgeAddress: a bridge (`cni0`) that kept the gateway of the node's
//! previous pod range after the node got another one. Its connected route sends
//! that range — now another node's pods — into this node's bridge, where no pod
//! answers (the bridge plugin then also refuses new pods: `"cni0" already has an
//! IP address different from …`).

use ipnet::IpNet;

use super::{
    Cause, Finding, FindingKind, NodeProblem, Owner, PodRef, Remedy, Role, Scope, Trust,
    kind::{Alert, Count, Spec, rank},
};
use crate::{
    cni::{self, Holds},
    inventory::{Inventory, RouteKind, Source, TABLE_MAIN, link_local},
};

/// A bridge kept an address of a pod range that is no longer this node's.
pub(super) const STALE_BRIDGE: Spec = Spec {
    rank: rank::refused_pod,
    ..Spec::node(
        "StaleBridgeAddress",
        "a bridge kept an address of a pod range that is no longer this node's: the host sends \
         that range (another node's pods) into its bridge",
        Count::IpamProblems,
        Alert::Named("IPShadowStaleBridgeAddress"),
    )
};

/// This node's bridges whose connected route lies outside its `spec.podCIDRs`.
pub(super) fn stale_bridges(inv: &Inventory) -> Vec<Finding> {
    let own: &[IpNet] = inv.node_facts.as_ref().map_or(&[], |n| &n.pod_cidrs);
    foreign(inv)
        .into_iter()
        .filter_map(|(bridge, address)| finding(inv, bridge, address, own))
        .collect()
}

/// The ranges this node's bridges route that are not its own: whose owner
/// (a Node's `spec.podCIDRs`) the agent looks up, since it watches no other
/// Node. Empty on a healthy node, and on every node without a pod bridge.
pub fn foreign_bridge_ranges(inv: &Inventory) -> Vec<IpNet> {
    let mut ranges: Vec<IpNet> = foreign(inv).into_iter().map(|(_, a)| a.trunc()).collect();
    ranges.sort_unstable();
    ranges.dedup();
    ranges
}

/// Each bridge with a connected route outside this node's pod range, and its
/// address in that route.
fn foreign(inv: &Inventory) -> Vec<(&str, IpNet)> {
    let own: &[IpNet] = inv.node_facts.as_ref().map_or(&[], |n| &n.pod_cidrs);
    // Without this node's pod range nothing tells a stale bridge from a fresh one.
    if own.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for r in
        inv.host.routes.iter().filter(|r| {
            r.table == TABLE_MAIN && r.kind == RouteKind::Unicast && r.gateway.is_none()
        })
    {
        let Some(bridge) = r.oif.and_then(|i| inv.host.link_name(i)) else {
            continue;
        };
        let mine = own.iter().any(|c| c.contains(&r.dst) || r.dst.contains(c));
        // A family the node has no pod range of cannot be judged; link-local
        // (fe80::/64 on every bridge) is nobody's pod range.
        let judged = own
            .iter()
            .any(|c| c.addr().is_ipv6() == r.dst.addr().is_ipv6())
            && !link_local(r.dst.addr());
        if !cni::holds(bridge, Holds::Gateway) || mine || !judged {
            continue;
        }
        let Some(address) = inv
            .host
            .addresses
            .iter()
            .find(|a| a.device == bridge && r.dst.contains(&a.ip))
            .and_then(|a| IpNet::new(a.ip, r.dst.prefix_len()).ok())
        else {
            continue;
        };
        out.push((bridge, address));
    }
    out
}

/// The finding when another node owns the bridge's range now. A range nobody
/// owns (containerd's default `cni0` 10.88.0.0/16 left on a Calico node, a
/// flannel lease outside `spec.podCIDR`) shadows no one known: no finding.
fn finding(inv: &Inventory, bridge: &str, address: IpNet, own: &[IpNet]) -> Option<Finding> {
    let range = address.trunc();
    let owner = inv
        .cluster
        .nodes
        .iter()
        .filter(|n| n.name != inv.node)
        .find(|n| {
            n.pod_cidrs
                .iter()
                .any(|c| c.contains(&range) || range.contains(c))
        })
        .map(|n| n.name.clone())?;
    let behind: Vec<PodRef> = inv
        .cluster
        .pods
        .iter()
        .filter(|p| p.node.as_deref() == Some(owner.as_str()) && p.can_receive_traffic())
        .filter(|p| p.ips.iter().any(|i| range.contains(&i.ip)))
        .map(PodRef::from)
        .collect();
    Some(Finding {
        kind: FindingKind::StaleBridgeAddress,
        scope: Scope::SameNode,
        ip: Some(address.addr()),
        owner: Owner::new(
            inv.node.clone(),
            Role::Node,
            Some(bridge.to_owned()),
            Source::Kernel,
        ),
        cause: Cause::Node(NodeProblem::StaleBridge {
            bridge: bridge.to_owned(),
            address,
            own: own.to_vec(),
            owner,
            unreachable: behind.len(),
            pods: behind.into_iter().take(NodeProblem::PODS_NAMED).collect(),
        }),
        remedy: Remedy::DeleteBridgeAddress {
            node: inv.node.clone(),
            bridge: bridge.to_owned(),
            address,
        },
        trust: Trust::Kernel,
    })
}
