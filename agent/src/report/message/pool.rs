//! The text of Cilium's IPAM by mode: addresses run dry in a pool
//! cilium-operator fills (ENI, Azure, CRD) or in a node's own range, a
//! cluster pool with no room for another node, a pool change told apart from
//! a mode switch.

use std::fmt::Write as _;

use ipnet::IpNet;

use super::{Reader, ipam::kubelet_says, list};
use crate::detect::{IpamKind, KubeletReport, NodeProblem, PoolFit, Remedy};

/// cilium-config's key for the cluster pool of `nets`' family.
fn pool_key(nets: &[IpNet]) -> &'static str {
    if nets.first().is_some_and(|n| n.addr().is_ipv6()) {
        "cluster-pool-ipv6-cidr"
    } else {
        "cluster-pool-ipv4-cidr"
    }
}

/// The pool's room against the cluster, as one clause.
pub(super) fn fit(fit: &PoolFit) -> String {
    let shown = if fit.mask_configured {
        ""
    } else {
        " (as the CiliumNodes' podCIDRs show)"
    };
    format!(
        "Cilium's cluster pool {} holds {} node range(s) of /{}{shown}, and the cluster has {} \
         node(s)",
        list(&fit.pools),
        fit.holds,
        fit.mask,
        fit.nodes
    )
}

/// What follows when the pool is full, or will be at the next node.
pub(super) fn consequence(fit: &PoolFit) -> String {
    if fit.holds < fit.nodes {
        format!(
            "{} node(s) get no pod range, and their Cilium agents cannot start",
            fit.nodes - fit.holds
        )
    } else {
        "the next node to join gets no pod range, and its Cilium agent cannot start".to_owned()
    }
}

/// The Event note's prose of a node's allocator out of addresses, told by
/// how it gets them, and of a cluster pool with no room to spare (the other
/// problems are told by the parent).
pub(super) fn note(node: &str, problem: &NodeProblem) -> String {
    let holds = |fit: &PoolFit| {
        format!(
            "The cluster pool {} holds {} node range(s) of /{} for {} node(s)",
            list(&fit.pools),
            fit.holds,
            fit.mask,
            fit.nodes
        )
    };
    match problem {
        NodeProblem::Exhausted {
            pods,
            refused_pods,
            ipam,
            ..
        } => {
            let what = match ipam {
                IpamKind::OperatorPool => format!(
                    "Node {node}'s ENI/Azure/CRD address pool is empty, usually until \
                     cilium-operator adds addresses"
                ),
                IpamKind::HostLocal => {
                    format!("Node {node}'s host-local range has no address left")
                }
                IpamKind::Calico => {
                    format!("Calico's IPAM has no address or block left for node {node}'s pods")
                }
                IpamKind::HostScope | IpamKind::Unknown => {
                    format!("Node {node}'s pod allocator has no address left")
                }
            };
            let example = pods
                .first()
                .map(|p| format!(" (e.g. {p})"))
                .unwrap_or_default();
            format!("{what}: {refused_pods} pod(s) cannot start{example}.")
        }
        NodeProblem::OperatorError {
            error,
            pool: Some(fit),
        } => format!(
            "cilium-operator cannot allocate for node {node}: \"{}\". {}.",
            super::words(error, 60),
            holds(fit)
        ),
        NodeProblem::PoolNearlyFull(fit) => format!("{}: {}.", holds(fit), consequence(fit)),
        _ => String::new(),
    }
}

/// A node's allocator out of addresses, told by how it gets them.
pub(super) fn exhausted(
    node: &str,
    (pods, refused_pods): (&str, usize),
    kubelet: &KubeletReport,
    ipam: IpamKind,
    reader: Reader<'_>,
) -> String {
    let (what, more) = match ipam {
        IpamKind::OperatorPool => (
            format!(
                "Node {node}'s address pool, which cilium-operator fills from the cloud or the \
                 CiliumNode (ENI, Azure, CRD IPAM), is empty"
            ),
            " Cilium calls this usually temporary, until the operator has added addresses \
             (cilium PR#42369).",
        ),
        IpamKind::HostScope | IpamKind::Unknown => (
            format!("Node {node}'s pod allocator has no address left"),
            "",
        ),
        IpamKind::HostLocal => (
            format!(
                "host-local, the IPAM plugin on node {node}, has no address left in its range (the \
                 node's spec.podCIDR under flannel or the bridge plugin, or a secondary network's)"
            ),
            "",
        ),
        IpamKind::Calico => (
            format!(
                "Calico's IPAM has no address left for node {node}'s pods: its blocks affine to \
                 {node} are full and it may take no other (the IPAMConfiguration's \
                 maxBlocksPerHost, strictAffinity), or its IPPools are"
            ),
            "",
        ),
    };
    format!(
        "{what}: {refused_pods} pod(s) cannot start ({pods}).{more} {}",
        kubelet_says(kubelet, reader)
    )
}

/// cilium-operator's error, explained by the pool when it can be.
pub(super) fn operator_error(node: &str, error: &str, pool: Option<&PoolFit>) -> String {
    let mut m = format!(
        "cilium-operator cannot allocate for node {node}: CiliumNode {node} \
         status.ipam.operator-status.error says \"{error}\"; until it is fixed the node gets no \
         new pod addresses from the operator."
    );
    if let Some(p) = pool {
        let _ = write!(m, " Why: {}; {}.", fit(p), consequence(p));
    }
    m
}

/// The long fixes of these findings.
pub(super) fn remedy(r: &Remedy) -> String {
    match r {
        Remedy::ReleaseHostLocal { node } => format!(
            "Fix: host-local keeps one file per reserved address in \
             /var/lib/cni/networks/<network>/ on {node}, naming the container that holds it; a \
             pod deleted uncleanly (a crash, a container runtime restarted or replaced) leaves its \
             file behind until the range is full (kubernetes#57280, kube-router#383). Delete the \
             files whose container no longer exists (crictl ps -a), never a running pod's. If \
             {node} accepts more pods than the range holds, lower kubelet's --max-pods below its \
             size or give the node a larger spec.podCIDR (kube-controller-manager's \
             --node-cidr-mask-size); a secondary network's range is set in its \
             NetworkAttachmentDefinition."
        ),
        Remedy::CheckOperatorPool { node } => format!(
            "Fix: wait for cilium-operator to add addresses; if pods stay refused, read the \
             operator's log and CiliumNode {node}'s status.ipam.operator-status, check that \
             spec.ipam.pre-allocate and min-allocate keep enough addresses ready for the pod \
             churn, and the cloud's limits (ENIs per instance, addresses per ENI, free addresses \
             in the subnet). A larger per-node range does not apply here."
        ),
        Remedy::KeepOldPoolOrReallocate { node, old } => format!(
            "Fix: cilium-operator never moves a node to a new pool CIDR (cilium#27245): put {} \
             back into cilium-config's {} beside the new CIDR (CIDRs may be added to the pool, \
             not changed or removed while nodes use them) and restart cilium-operator; or move \
             the nodes one at a time: drain {node}, kubectl delete ciliumnode {node}, restart \
             its Cilium agent so the operator allocates from the new CIDR, then uncordon it.",
            list(old),
            pool_key(old)
        ),
        Remedy::GrowClusterPool { pools } => format!(
            "Fix: add a CIDR to cilium-config's {} (Helm \
             ipam.operator.clusterPoolIPv4PodCIDRList) beside {} and restart cilium-operator; \
             the CIDRs already there and the per-node mask size must stay as they are while \
             nodes use them.",
            pool_key(pools),
            list(pools)
        ),
        _ => String::new(),
    }
}

/// The one-sentence fixes of these findings.
pub(super) fn fix(r: &Remedy) -> String {
    match r {
        Remedy::CheckOperatorPool { node } => format!(
            "Fix: usually temporary; if it lasts, check cilium-operator's log, CiliumNode \
             {node}'s pre-allocate/min-allocate, and the ENI/subnet address limits."
        ),
        Remedy::KeepOldPoolOrReallocate { node, old } => format!(
            "Fix: put {} back into {} beside the new CIDR, or drain {node}, delete its \
             CiliumNode and restart its Cilium agent.",
            list(old),
            pool_key(old)
        ),
        Remedy::GrowClusterPool { pools } => format!(
            "Fix: add a CIDR to cilium-config's {} beside {}; existing CIDRs and the mask size \
             must stay.",
            pool_key(pools),
            list(pools)
        ),
        _ => String::new(),
    }
}
