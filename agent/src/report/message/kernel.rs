//! The words of the kernel-truth findings (issue 24): what the namespaces
//! behind the host's interfaces hold against the host's routes and the API.

use super::Reader;
use crate::{
    detect::{Finding, FindingKind, KernelFix, KernelTruth, PodRef},
    inventory::Holder,
};

/// What is wrong and what breaks, in at most two short sentences.
pub(super) fn what(f: &Finding, k: &KernelTruth, reader: Reader<'_>) -> String {
    let (ip, node) = (f.ip_text(), &f.owner.node);
    let iface = f.owner.device.as_deref().unwrap_or("?");
    match f.kind {
        FindingKind::PodRouteMisdirected => {
            // A pod is named only where the host shows the interface is its.
            let whose = k
                .other_pod
                .as_ref()
                .map_or_else(|| "that namespace".to_owned(), |p| reader.pod(p));
            format!(
                "Node {node} routes this pod's IP {ip} into the namespace behind {iface}, which \
                 does not hold it. Probes and webhooks reach {whose} instead."
            )
        }
        FindingKind::PodRouteDeadEnd => format!(
            "Node {node} routes this pod's IP {ip} out {iface}, which is {}. Probes and webhooks \
             from {node} go nowhere.",
            k.row
                .route
                .as_ref()
                .and_then(|r| r.state)
                .map_or_else(|| "down".to_owned(), |s| s.to_string())
        ),
        FindingKind::PodAddressHeldTwice => format!(
            "On node {node}, {} network namespaces hold this pod's IP {ip} ({}). Traffic to it \
             reaches only the one the route leads to.",
            k.row.holders.len(),
            ifaces(&k.row.holders)
        ),
        FindingKind::LeakedSandboxAddress => {
            let also = k.other_pod.as_ref().map_or_else(String::new, |p| {
                format!("; {} elsewhere has it too", reader.pod(p))
            });
            format!(
                "The namespace behind {iface} on node {node} holds {ip}, which no pod of the node \
                 has{also}: a sandbox never torn down. A new pod given {ip} is shadowed."
            )
        }
        FindingKind::PodAddressDadFailed => format!(
            "On node {node}, this pod's IPv6 address {ip} failed duplicate address detection \
             (the kernel marks it dadfailed): another holder on its link answered for it, and \
             the pod's namespace will not use it. Traffic to it reaches no pod."
        ),
        FindingKind::NodeAddressDadFailed => node_dad(f, k, reader),
        FindingKind::PodAddressTentative => format!(
            "On node {node}, this pod's IPv6 address {ip} is still tentative: duplicate address \
             detection never ended (its link has no carrier, or the namespace's DAD sysctls \
             stall it), so the pod's namespace will not use it. Traffic to it reaches no pod."
        ),
        FindingKind::PodAddressNotHeld => format!(
            "No network namespace on node {node} holds this pod's IP {ip}: its sandbox is gone \
             or holds another address. Traffic to it reaches no pod."
        ),
        _ => String::new(),
    }
}

/// The full message: what, the kernel's evidence, and the fix.
pub(super) fn render(f: &Finding, k: &KernelTruth, reader: Reader<'_>) -> String {
    let pod = k
        .site
        .as_ref()
        .map_or_else(String::new, |_| format!("{}: ", super::pod_name(f)));
    format!(
        "{pod}{} {} {}",
        what(f, k, reader),
        evidence(k),
        super::remedy_for(&f.remedy, reader)
    )
}

/// The kernel's evidence in one sentence: the route and who holds the address.
fn evidence(k: &KernelTruth) -> String {
    let route = k.row.route.as_ref().map_or_else(
        || "no per-pod route".to_owned(),
        |r| format!("route {}", r.route),
    );
    let held = if k.row.holders.is_empty() {
        "no namespace holds it".to_owned()
    } else {
        format!("held behind {}", ifaces(&k.row.holders))
    };
    let reached = k.reached.as_ref().map_or_else(String::new, |h| {
        let named = h
            .named_for
            .as_deref()
            .map_or_else(String::new, |p| format!(", named for pod {p}"));
        format!(
            "; the route reaches nsid {} ({} {}, peer ifindex {}{named})",
            h.nsid,
            h.iface,
            h.peer.as_deref().unwrap_or("?"),
            h.peer_index
        )
    });
    format!("Kernel: {route}; {held}{reached}.")
}

fn ifaces(holders: &[Holder]) -> String {
    super::list(
        holders
            .iter()
            .map(|h| format!("{} (nsid {})", h.iface, h.nsid)),
    )
}

/// The one-sentence fix.
pub(super) fn fix(k: &KernelFix, reader: Reader<'_>) -> String {
    match k {
        KernelFix::RepointRoute { node, ip, to } => match to {
            Some(to) => format!(
                "Fix: on {node}, run ip route replace {ip} dev {to}, then find which CNI call \
                 left the route wrong."
            ),
            None => format!(
                "Fix: on {node}, delete the route to {ip}, then delete the pod so its sandbox is \
                 recreated."
            ),
        },
        // Never "delete this pod": any pod with NET_ADMIN can add another's address.
        KernelFix::RemoveDuplicate { node, ifaces } => format!(
            "Fix: on {node}, find which sandbox behind {} is not this pod's (crictl pods, ipshadow \
             check) and remove it (crictl rmp).",
            ifaces.join(", ")
        ),
        KernelFix::TearDownSandbox { node, iface } => format!(
            "Fix: on {node}, remove the sandbox behind {iface} (crictl rmp, or ip link del \
             {iface}) and free its address in the IPAM store."
        ),
        KernelFix::RecreatePod { pod } => format!(
            "Fix: delete {} so it gets a working sandbox.",
            reader.pod(pod)
        ),
        KernelFix::RedoDad { node, pod, others } => redo_dad(node, pod, others, reader),
        KernelFix::RedoNodeDad {
            node,
            device,
            others,
        } => redo_node_dad(node, device, others),
        KernelFix::FinishDad { node, pod, iface } => format!(
            "Fix: on {node}, give {iface} a carrier (it and its peer up) and check the pod's \
             accept_dad, dad_transmits and retrans_time_ms; else delete {} so its address is \
             added again.",
            reader.pod(pod)
        ),
        KernelFix::RestoreLink { node, iface } => format!(
            "Fix: on {node}, bring {iface} and its peer up, or delete the pod so its sandbox is \
             recreated."
        ),
    }
}

/// A node's own address that lost its DAD, and who answered for it.
fn node_dad(f: &Finding, k: &KernelTruth, reader: Reader<'_>) -> String {
    let (ip, node) = (f.ip_text(), &f.owner.node);
    let iface = f.owner.device.as_deref().unwrap_or("?");
    let who = k.other_pod.as_ref().map_or_else(
        || "another holder on its link".to_owned(),
        |p| format!("{} (given it)", reader.pod(p)),
    );
    format!(
        "Node {node}'s IPv6 address {ip} on {iface} failed duplicate address detection (the \
         kernel marks it dadfailed): {who} answered for it, and {node} does not use it. What \
         needs it on {node} (pods' gateway, the CNI's router) goes without."
    )
}

/// Remove the other holder of the pod's address, then add it again. Never
/// names the other holder's pod: any pod with NET_ADMIN can add an address.
fn redo_dad(node: &str, pod: &PodRef, others: &[String], reader: Reader<'_>) -> String {
    let holder = if others.is_empty() {
        "the host on its link that holds the address (not a namespace of this node)".to_owned()
    } else {
        format!(
            "the sandbox behind {} that is not the pod's",
            others.join(", ")
        )
    };
    format!(
        "Fix: on {node}, remove {holder}, then delete {} so its address is added again.",
        reader.pod(pod)
    )
}

/// Remove the other holder of the node's address, then add it again.
fn redo_node_dad(node: &str, device: &str, others: &[String]) -> String {
    let first = if others.is_empty() {
        "find the other holder on its link (`ip -6 neigh` on it names its MAC) and remove it"
            .to_owned()
    } else {
        format!(
            "delete the pod behind {} (its namespace holds the address)",
            others.join(", ")
        )
    };
    format!(
        "Fix: on {node}, {first}; then add the address again so its DAD runs anew (`ip addr del` \
         and `ip addr add` it on {device}, or restart the component that owns {device})."
    )
}
