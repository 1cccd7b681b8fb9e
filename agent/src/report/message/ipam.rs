//! The text of the loud failures: sandbox refusals no node address explains,
//! a node's allocator out of (or short of) addresses, cilium-operator's error,
//! a stuck switch to cluster-pool, an Ingress IP kube-ovn does not masquerade.

use std::fmt::Write as _;

use ipnet::IpNet;

use super::{Reader, list, pod_name};
use crate::{
    detect::{Finding, KubeletReport, NodeProblem, PodRef},
    inventory::{SandboxRefusal, Source},
};

/// kubelet's report, quoted as evidence where the reader may see text from an
/// Event (which anyone who may create Events in the namespace can write).
pub(super) fn kubelet_says(k: &KubeletReport, reader: Reader<'_>) -> String {
    let times = if k.count == 1 {
        "once".to_owned()
    } else {
        format!("{} times", k.count)
    };
    if reader.quotes_tenants() {
        format!(
            "kubelet reported FailedCreatePodSandBox {times}: \"{}\".",
            excerpt(&k.message, KUBELET_EXCERPT_MAX)
        )
    } else {
        format!("kubelet reported FailedCreatePodSandBox {times}.")
    }
}

/// The most bytes of kubelet's message a text quotes (JSON `kubelet.message`
/// has it whole).
pub(super) const KUBELET_EXCERPT_MAX: usize = 200;

/// kubelet's `message` cut to at most `max` bytes around the words a refusal
/// is read from ([`SandboxRefusal::WORDING`]) and what precedes them (the
/// address in use), at word boundaries, with `…` where cut; its head when it
/// has none of them.
pub(super) fn excerpt(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_owned();
    }
    let lower = message.to_ascii_lowercase();
    let Some((at, len)) = SandboxRefusal::WORDING
        .iter()
        .filter_map(|w| lower.rfind(w).map(|at| (at, w.len())))
        .max()
    else {
        return super::words(message, max);
    };
    // Keep the closing quote or bracket after the words, then cut at a space.
    let room = max - 2 * '…'.len_utf8();
    let mut end = at + len;
    end += message[end..]
        .find(char::is_whitespace)
        .unwrap_or(message.len() - end);
    let mut start = message.ceil_char_boundary(end.saturating_sub(room));
    if start > 0 {
        start += message[start..]
            .find(char::is_whitespace)
            .map_or(0, |s| s + 1);
    }
    let cut = |i: usize, at: usize| if i == at { "" } else { "…" };
    format!(
        "{}{}{}",
        cut(start, 0),
        &message[start..end],
        cut(end, message.len())
    )
}

/// A refusal no node's address explains: another pod's address, or a stale
/// endpoint; `short`: the Event note's prose.
pub(super) fn refused(
    f: &Finding,
    kubelet: &KubeletReport,
    holder: Option<&PodRef>,
    reader: Reader<'_>,
    short: bool,
) -> String {
    let ip = f.ip_text();
    let node = f.pod_node().unwrap_or(&f.owner.node);
    let calico = super::calico::refused(f, holder, reader, !short);
    let what = calico.unwrap_or_else(|| match (holder, short) {
        (Some(h), true) => format!(
            "Cilium on {node} refused this pod's IP {ip} as in use: {} on node {} holds it too. \
             The pod cannot start.",
            reader.pod(h),
            f.owner.node
        ),
        (None, true) => format!(
            "Cilium on {node} refused this pod's IP {ip} as in use, but no pod holds it: a stale \
             Cilium endpoint. The pod stays in ContainerCreating."
        ),
        (Some(h), false) => format!(
            "{} cannot start: Cilium on {node} refused its address {ip} as already in use, and \
             {} on node {} holds {ip} too (its status.podIPs): two live pods were given one \
             address.",
            pod_name(f),
            reader.pod(h),
            f.owner.node
        ),
        (None, false) => format!(
            "{} cannot start: Cilium on {node} refused its address {ip} as already in use, yet no \
             pod and no Cilium address of any node holds {ip}: Cilium keeps an endpoint for a pod \
             that is gone (a stale endpoint, cilium#38313), and the pod stays in \
             ContainerCreating.",
            pod_name(f)
        ),
    });
    if short {
        return what;
    }
    format!(
        "{what} {} {}",
        kubelet_says(kubelet, reader),
        super::remedy_for(&f.remedy, reader)
    )
}

/// Two live pods with one address in their status.
pub(super) fn duplicate(
    f: &Finding,
    holder: &PodRef,
    network: Option<&str>,
    reader: Reader<'_>,
) -> String {
    let ip = f.ip_text();
    let how = match network {
        Some(network) => {
            let seen = if f.owner.source == Source::Kernel {
                "as the node's kernel shows their namespaces holding it"
            } else {
                "as Multus records it (network-status)"
            };
            format!(
                " on secondary network {network}, {seen}: the attachment's IPAM handed one address \
                 out twice (a static address in the attachment, overlapping ranges, whereabouts' \
                 reconciler freeing a live address), and traffic to {ip} on that network reaches \
                 only one of them."
            )
        }
        None => format!(
            " in status.podIPs: two allocators (or one that lost its state) handed out one \
             address, and traffic to {ip} reaches only one of them — which one depends on where \
             it comes from."
        ),
    };
    format!(
        "{} on node {} and {} on node {} both hold {ip}{how} {}",
        pod_name(f),
        f.pod_node().unwrap_or("?"),
        reader.pod(holder),
        f.owner.node,
        super::remedy_for(&f.remedy, reader)
    )
}

/// A finding about a node itself.
pub(super) fn node(f: &Finding, problem: &NodeProblem, reader: Reader<'_>) -> String {
    let node = &f.owner.node;
    let what = match problem {
        NodeProblem::Exhausted { .. } => super::pool::exhausted(node, problem, reader),
        NodeProblem::Capacity {
            ranges,
            usable,
            infra,
            allocatable,
        } => format!(
            "Node {node} accepts {allocatable} pods (status.allocatable.pods), but its pod range \
             {} holds only {usable} addresses pods can get (Cilium's allocator skips the first and \
             last address of a range and keeps {infra} for its router, health and Ingress IPs): \
             once the range is full, new pods on {node} stay in ContainerCreating (\"range is \
             full\") while the scheduler still places pods there.",
            list(ranges)
        ),
        NodeProblem::OperatorError { error, pool } => {
            super::pool::operator_error(node, error, pool.as_ref())
        }
        NodeProblem::PoolNearlyFull(fit) => format!(
            "{}: {} (cilium-operator then reports \"allocator full\" on its CiliumNode).",
            super::pool::fit(fit),
            super::pool::consequence(fit)
        ),
        NodeProblem::MigrationStuck { .. } => migration_stuck(node, problem, false),
        NodeProblem::NotMasqueraded { subnets } => not_masqueraded(f, subnets),
        NodeProblem::StaleBridge { .. } => stale_bridge(node, problem, false),
        NodeProblem::NodeAddressClaimed(c) => super::vip::message(c, reader),
        NodeProblem::Calico(a) => super::calico::tunnel(f, a, false),
    };
    format!("{what} {}", super::remedy_for(&f.remedy, reader))
}

/// A bridge that kept the gateway of the node's previous pod range; `short`:
/// the Event note's prose.
pub(super) fn stale_bridge(node: &str, problem: &NodeProblem, short: bool) -> String {
    let NodeProblem::StaleBridge {
        bridge,
        address,
        own,
        owner,
        pods,
        unreachable,
    } = problem
    else {
        return String::new();
    };
    if short {
        return format!(
            "{bridge} on node {node} keeps {address}, outside its pod range: {node} sends node \
             {owner}'s pod range ({unreachable} pod(s)) into its own bridge."
        );
    }
    let range = address.trunc();
    let named = if pods.is_empty() {
        String::new()
    } else {
        format!(": {}", list(pods))
    };
    let whose = format!(
        "{range} is node {owner}'s pod range now, so {node}'s host cannot reach {owner}'s \
         {unreachable} pod(s) there{named}"
    );
    format!(
        "Bridge {bridge} on node {node} keeps the address {address} and its connected route, \
         outside the node's pod range {} (a previous podCIDR's gateway): {whose}. The bridge \
         plugin also refuses the node's new pods (\"{bridge}\" already has an IP address \
         different from …).",
        list(own)
    )
}

/// An Ingress IP outside every Subnet kube-ovn masquerades.
fn not_masqueraded(f: &Finding, subnets: &[(String, Vec<IpNet>)]) -> String {
    let node = &f.owner.node;
    let names = list(
        subnets
            .iter()
            .map(|(name, cidrs)| format!("{name} ({})", list(cidrs))),
    );
    format!(
        "Cilium's Ingress IP {} of node {node} lies outside every Subnet kube-ovn \
         masquerades host-originated traffic from ({names}): Envoy connects to backends \
         from this address, so Gateway API and Ingress requests to backends on other \
         nodes leave unmasqueraded and time out.",
        f.ip_text()
    )
}

/// A switch to cluster-pool (or a new pool CIDR) that never took on `node`;
/// `short`: the Event note's prose.
pub(super) fn migration_stuck(node: &str, problem: &NodeProblem, short: bool) -> String {
    let NodeProblem::MigrationStuck {
        pod_cidrs,
        pools,
        operator_error,
        pool_change,
    } = problem
    else {
        return String::new();
    };
    if short {
        let says = operator_error.as_deref().map_or_else(String::new, |e| {
            format!(" (cilium-operator: \"{}\")", super::words(e, 60))
        });
        let what = if *pool_change {
            "The cluster pool changed"
        } else {
            "Cilium switched to cluster-pool"
        };
        return format!(
            "{what}, but CiliumNode {node} keeps podCIDRs {} outside the pool {}{says}. Its agent \
             keeps allocating from the old range.",
            list(pod_cidrs),
            list(pools)
        );
    }
    let before = if *pool_change {
        "from an earlier cluster pool (the pool changed, not the IPAM mode; cilium#27245: the new \
         CIDR \"is not used\")"
    } else {
        "from before the switch to cluster-pool"
    };
    let mut m = format!(
        "Cilium runs ipam=cluster-pool with pools {}, but CiliumNode {node} keeps \
         spec.ipam.podCIDRs {} {before}: the operator reuses a filled podCIDRs field instead \
         of allocating, rejects the old range because it lies outside every pool, and the \
         agent on {node} keeps allocating from the old range.",
        list(pools),
        list(pod_cidrs)
    );
    if let Some(e) = operator_error {
        let _ = write!(m, " The operator's error says so: \"{e}\".");
    }
    m
}
