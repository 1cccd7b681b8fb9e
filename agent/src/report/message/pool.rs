//! The text of Cilium's IPAM by mode: addresses run dry in a pool
//! cilium-operator fills (ENI, Azure, CRD) or in a node's own range, a
//! cluster pool with no room for another node, a pool change told apart from
//! a mode switch.

use std::{fmt::Write as _, net::IpAddr};

use ipnet::IpNet;

use super::{NOT_DISJOINT, Reader, ipam::kubelet_says, list};
use crate::detect::{IpamKind, NodeProblem, PodRef, PoolFit, Remedy};

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
pub(super) fn exhausted(node: &str, problem: &NodeProblem, reader: Reader<'_>) -> String {
    let NodeProblem::Exhausted {
        pods,
        refused_pods,
        kubelet,
        ipam,
    } = problem
    else {
        return String::new();
    };
    let pods = super::and_more(pods.iter().map(ToString::to_string), *refused_pods);
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

/// The fixes of the loud failures and of the node's allocator; `short`: the
/// Event note's one sentence.
pub(super) fn remedy(r: &Remedy, reader: Reader<'_>, short: bool) -> String {
    match r {
        Remedy::DisconnectEndpoint {
            node,
            ip,
            cilium_pod,
        } => disconnect_endpoint(node, *ip, cilium_pod.as_ref(), reader, short),
        Remedy::ReallocateDuplicate { node } if short => format!(
            "Fix: delete this pod so it is given another address; then find why {node}'s \
             address was handed out twice."
        ),
        Remedy::ReallocateDuplicate { node } => format!(
            "Fix: delete the pod that is refused so it is given another address, and find which \
             allocator handed out {node}'s address twice (two IPAMs configured, or state lost in \
             a restart)."
        ),
        Remedy::RecreateNewer { pod } if short => {
            format!("Fix: delete the newer pod, {pod}, so it is recreated with another address.")
        }
        Remedy::RecreateNewer { pod } => format!(
            "Fix: delete the newer pod, {pod}, so its controller recreates it with another \
             address, then find which allocator handed the address out twice (two IPAMs \
             configured, or state lost in a restart)."
        ),
        Remedy::ClearPodCidrsAfterRollout { node } if short => format!(
            "Fix: in this order, move every Cilium agent to the new config, clear \
             spec.ipam.podCIDRs of CiliumNode {node}, then restart its agent."
        ),
        Remedy::ClearPodCidrsAfterRollout { node } => format!(
            "Fix, in this order: 1. make sure every Cilium agent runs with ipam=cluster-pool (kubectl \
             -n kube-system rollout status ds/cilium); 2. only then clear the old range: kubectl \
             patch ciliumnode {node} --type merge -p '{{\"spec\":{{\"ipam\":{{\"podCIDRs\":null}}}}}}' \
             (cleared earlier, an agent still in kubernetes mode writes it back); 3. restart the \
             Cilium agent on {node} once the operator has allocated from the pool. New pods on \
             {node} cannot get an address between 2 and 3."
        ),
        Remedy::PoolInMasqueradedSubnet { subnet } if short => match subnet {
            Some((name, block)) => format!(
                "Fix: give Cilium a pool from the end of Subnet {name}'s block {block}, \
                 excluded there."
            ),
            None => "Fix: give Cilium a pool inside a Subnet kube-ovn masquerades, excluded \
                 there."
                .to_owned(),
        },
        Remedy::PoolInMasqueradedSubnet { subnet } => {
            let place = subnet.as_ref().map_or_else(
                || "a Subnet kube-ovn masquerades".to_owned(),
                |(name, block)| format!("kube-ovn Subnet {name}'s block {block}"),
            );
            format!(
                "Fix: give Cilium's IPAM a pool cut from the end of {place} and add it to that \
                 Subnet's spec.excludeIps. {NOT_DISJOINT}"
            )
        }
        _ => capacity(r, short),
    }
}

/// The fix of a stale endpoint: disconnect it in the node's Cilium agent.
fn disconnect_endpoint(
    node: &str,
    ip: IpAddr,
    cilium_pod: Option<&PodRef>,
    reader: Reader<'_>,
    short: bool,
) -> String {
    let family = if ip.is_ipv4() { "ipv4" } else { "ipv6" };
    if short {
        return format!(
            "Fix: in the Cilium agent on {node}, run cilium-dbg endpoint disconnect \
             {family}:{ip} once no pod owns it."
        );
    }
    // A pod's namespace is told how to find Cilium's pod, not its name.
    let cilium_pod = cilium_pod.filter(|_| !matches!(reader, Reader::Namespace(_)));
    let pod = cilium_pod.map_or_else(
        || {
            format!(
                "$(kubectl -n kube-system get pod -l k8s-app=cilium \
                 --field-selector spec.nodeName={node} -o name)"
            )
        },
        |p| format!("-n {} {}", p.namespace, p.name),
    );
    format!(
        "Fix: confirm no pod owns it (cilium-dbg endpoint list), then disconnect the \
         stale endpoint in {node}'s Cilium agent: kubectl exec {pod} -- cilium-dbg \
         endpoint disconnect {family}:{ip}. Restart that Cilium agent only if the \
         endpoint stays."
    )
}

/// The fixes of a node's allocator short of addresses, and of the pools
/// cilium-operator fills.
fn capacity(r: &Remedy, short: bool) -> String {
    match r {
        Remedy::AddCapacity { node, usable } => {
            let to = usable.map_or_else(String::new, |u| format!(" to at most {u}"));
            if short {
                return format!(
                    "Fix: lower kubelet's --max-pods on {node}{to}, or give nodes larger pod \
                     ranges."
                );
            }
            format!(
                "Fix: lower kubelet's --max-pods on it{to}, or give nodes a larger pod range \
                 (Cilium cluster-pool: clusterPoolIPv4MaskSize; kubernetes mode: \
                 kube-controller-manager's --node-cidr-mask-size); delete finished pods to free \
                 addresses on {node} now."
            )
        }
        Remedy::FixOperatorAllocation { node } if short => format!(
            "Fix: correct what the error names, until CiliumNode {node}'s \
             status.ipam.operator-status.error is empty."
        ),
        Remedy::FixOperatorAllocation { node } => format!(
            "Fix: correct what the error names (a pool missing or full, a podCIDR from another \
             IPAM mode), then check that CiliumNode {node}'s operator-status.error is empty."
        ),
        Remedy::ReleaseHostLocal { node } if short => format!(
            "Fix: on {node}, delete the files in /var/lib/cni/networks/<network>/ of containers \
             that no longer exist, or lower --max-pods below the range's size."
        ),
        Remedy::CheckOperatorPool { node } if short => format!(
            "Fix: usually temporary; if it lasts, check cilium-operator's log, CiliumNode \
             {node}'s pre-allocate/min-allocate, and the ENI/subnet address limits."
        ),
        Remedy::KeepOldPoolOrReallocate { node, old } if short => format!(
            "Fix: put {} back into {} beside the new CIDR, or drain {node}, delete its \
             CiliumNode and restart its Cilium agent.",
            list(old),
            pool_key(old)
        ),
        Remedy::GrowClusterPool { pools } if short => format!(
            "Fix: add a CIDR to cilium-config's {} beside {}; existing CIDRs and the mask size \
             must stay.",
            pool_key(pools),
            list(pools)
        ),
        _ => pool(r),
    }
}

/// The long fixes of the pools and ranges that ran dry.
fn pool(r: &Remedy) -> String {
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
