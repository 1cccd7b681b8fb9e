//! The text of Calico's IPAM findings: a node's tunnel address its IPAM
//! does not allocate to it (`UnallocatedTunnelAddress`), and the fixes in
//! Calico's terms (of its refusals too: no address left, one assigned already).

use super::{Reader, pod_name};
use crate::detect::{CalicoFix, Finding, PodRef, Remedy, TunnelAllocation};

/// Where IPAM has the address, in a few words.
fn status(a: &TunnelAllocation) -> String {
    match a {
        TunnelAllocation::Free { block } => format!("unallocated in IPAM block {block}"),
        TunnelAllocation::NoBlock { pool } => format!("in no IPAM block (IPPool {pool})"),
        TunnelAllocation::Pod { block, pod } => {
            format!("allocated to pod {pod} in IPAM block {block}")
        }
        TunnelAllocation::OtherTunnel {
            block,
            node,
            device,
        } => format!("allocated to node {node}'s {device} in IPAM block {block}"),
        TunnelAllocation::Unmarked { block } => format!(
            "allocated with neither handle nor attributes (an older Calico's tunnel address) in \
             IPAM block {block}"
        ),
        TunnelAllocation::Other { block, handle } => match handle {
            Some(h) => format!("allocated to handle {h} in IPAM block {block}"),
            None => format!("allocated to an unknown owner in IPAM block {block}"),
        },
    }
}

/// What it breaks, in one sentence.
fn breaks(node: &str, a: &TunnelAllocation) -> String {
    match a {
        TunnelAllocation::Free { .. } | TunnelAllocation::NoBlock { .. } => {
            format!("Calico can give it to a pod, which {node}'s host then cannot reach.")
        }
        TunnelAllocation::Pod { .. } => {
            format!("{node}'s host keeps traffic to that pod for itself: it cannot reach the pod.")
        }
        TunnelAllocation::OtherTunnel { node: other, .. } => {
            format!("Traffic to it reaches only one of {node} and {other}.")
        }
        TunnelAllocation::Unmarked { .. } => format!(
            "Another node may still announce it as its tunnel: traffic to it reaches only one of \
             {node} and that node."
        ),
        TunnelAllocation::Other { .. } => format!(
            "Calico may give it to a pod while {node}'s tunnel still holds it; {node}'s host could \
             not reach that pod."
        ),
    }
}

/// The device of a tunnel address only the kernel holds (the Node does not
/// announce it).
fn leftover(f: &Finding) -> Option<&str> {
    match &f.remedy {
        Remedy::Calico(CalicoFix::RemoveLeftover { device, .. }) => Some(device),
        _ => None,
    }
}

/// What is wrong and what breaks; `short`: the Event note's prose, else the
/// long message without the fix.
pub(super) fn tunnel(f: &Finding, a: &TunnelAllocation, short: bool) -> String {
    let node = &f.owner.node;
    let (ip, has, then) = (f.ip_text(), status(a), breaks(node, a));
    match (leftover(f), short) {
        (Some(device), true) => format!(
            "Node {node}'s {device} holds {ip}, which its Node does not announce; IPAM has it \
             {has}. {then}"
        ),
        (None, true) => format!("Node {node}'s Calico tunnel address {ip} is {has}. {then}"),
        (Some(device), false) => format!(
            "Calico's tunnel device {device} on node {node} holds {ip}, which no \
             projectcalico.org annotation of the Node announces (a tunnel mode switched off, or \
             a reinstall, left it): IPAM has it {has}. {then}"
        ),
        (None, false) => format!(
            "Calico's tunnel address {ip} of node {node} (according to {}) is {has}: calico-node \
             keeps a tunnel address only while IPAM allocates it to this node's tunnel (a \
             reinstall that kept the Node's annotations, or Calico's IPAM garbage collection \
             releasing it while the node still used it, leaves it so). {then}",
            f.owner.source
        ),
    }
}

/// Calico IPAM's refusal of the address a pod asked for, told in the note
/// (`long`: the message's opening); `None` for any other plugin's refusal.
pub(super) fn refused(
    f: &Finding,
    holder: Option<&PodRef>,
    reader: Reader<'_>,
    long: bool,
) -> Option<String> {
    let Remedy::Calico(CalicoFix::AssignedAddress { node, ip, .. }) = &f.remedy else {
        return None;
    };
    let refused = format!(
        "Calico's IPAM on {node} refused {} the address {ip} it asked for (a fixed address) as \
         assigned already",
        if long {
            pod_name(f)
        } else {
            "this pod".to_owned()
        }
    );
    Some(match (holder, long) {
        (Some(h), false) => format!(
            "{refused}: {} holds it. The pod cannot start.",
            reader.pod(h)
        ),
        (None, false) => format!(
            "{refused}, but no pod holds it: a stale allocation. The pod stays in \
             ContainerCreating."
        ),
        (Some(h), true) => format!(
            "{refused}, and {} on node {} holds {ip} (its status.podIPs): the pod cannot start.",
            reader.pod(h),
            f.owner.node
        ),
        (None, true) => format!(
            "{refused}, yet no pod holds {ip}: IPAM keeps an allocation for a pod that is gone, \
             and the pod stays in ContainerCreating."
        ),
    })
}

/// The fixes of Calico's remedies; `short`: the Event note's one sentence,
/// else the steps for `check`, `audit` and the runbook.
pub(super) fn fix(r: &Remedy, short: bool) -> String {
    match r {
        Remedy::CheckCalicoIpam { .. } if short => "Fix: find the double allocation with \
             `calicoctl ipam check --show-problem-ips`, then delete the pod so Calico gives it \
             another address."
            .to_owned(),
        Remedy::CheckCalicoIpam { node } => format!(
            "Fix: run `calicoctl ipam check --show-problem-ips`: Calico's IPAM gave this address \
             both to the pod and to {node}'s tunnel device (a block handed out twice, or a stale \
             tunnel annotation, calico#3589); then delete the pod so Calico gives it another IP. \
             Releasing the address with `calicoctl ipam release` alone moves nothing: the pod \
             keeps it."
        ),
        Remedy::Calico(c) if short => short_fix(c),
        Remedy::Calico(c) => remedy(c),
        _ => String::new(),
    }
}

/// The one-sentence fix of Calico's own remedies.
fn short_fix(r: &CalicoFix) -> String {
    match r {
        CalicoFix::ReallocateTunnel { node, .. } => format!(
            "Fix: restart calico-node on {node} so it takes a tunnel address IPAM allocates to \
             it, then run `calicoctl ipam check --show-problem-ips`."
        ),
        CalicoFix::RemoveLeftover { node, ip, device } => format!(
            "Fix: restart calico-node on {node} so Felix removes {ip} from {device}; if it stays, \
             `ip addr del {ip}/{} dev {device}` on {node}.",
            host_prefix(*ip)
        ),
        CalicoFix::CheckPools { node } => format!(
            "Fix: find the full IPPools and blocks with `calicoctl ipam show --show-blocks`; add \
             an IPPool, or raise the IPAMConfiguration's maxBlocksPerHost if {node} hit it."
        ),
        CalicoFix::AssignedAddress { ip, held: true, .. } => format!(
            "Fix: give the refused pod another address than {ip} \
             (cni.projectcalico.org/ipAddrs), or delete the pod holding it first."
        ),
        CalicoFix::AssignedAddress { ip, .. } => format!(
            "Fix: run `calicoctl ipam check --show-problem-ips`; once it lists {ip} as leaked, \
             `calicoctl ipam release --ip={ip}`."
        ),
    }
}

/// Calico's tunnel addresses are host addresses: /32, /128.
fn host_prefix(ip: std::net::IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// The fix for `check`, `audit` and the runbook: the steps.
fn remedy(r: &CalicoFix) -> String {
    match r {
        CalicoFix::ReallocateTunnel { node, ip } => format!(
            "Fix: restart calico-node on {node} (delete its calico-node pod, in calico-system or \
             kube-system): on start its tunnel allocator finds {ip} is not allocated to this \
             node's tunnel, takes a new address from IPAM and updates the Node (current \
             releases also re-check every five minutes). Then `calicoctl ipam check \
             --show-problem-ips` must name no problem with {ip}."
        ),
        CalicoFix::RemoveLeftover { node, ip, device } => format!(
            "Fix: node {node}'s Node announces no tunnel address {ip}, but {device} holds it: a \
             tunnel mode switched off or a reinstall left it. Restart calico-node on {node} \
             (delete its calico-node pod, in calico-system or kube-system): Felix removes the \
             addresses of a tunnel mode that is off when it starts, and re-applies the \
             announced address of one that is on. If {ip} stays on {device}, remove it on \
             {node}: `ip addr del {ip}/{} dev {device}`.",
            host_prefix(*ip)
        ),
        CalicoFix::CheckPools { node } => format!(
            "Fix: `calicoctl ipam show --show-blocks` shows which IPPools and blocks are full, \
             and `calicoctl ipam check --show-problem-ips` the addresses leaked to pods that are \
             gone (release those with `calicoctl ipam release`). Then add an IPPool for \
             workloads (a pool's CIDR cannot be changed in place), or, when {node} hit the \
             per-host block limit, raise maxBlocksPerHost in the IPAMConfiguration \
             `default`; with strictAffinity set, {node} borrows no address from other nodes' \
             blocks."
        ),
        CalicoFix::AssignedAddress {
            node,
            ip,
            held: true,
        } => format!(
            "Fix: the pod asked Calico's IPAM for {ip} (a fixed address, the \
             cni.projectcalico.org/ipAddrs annotation), which IPAM assigns to the live pod \
             holding it: give the refused pod another address, or delete the holder first so \
             IPAM releases {ip}; kubelet on {node} retries the sandbox. Never `calicoctl ipam \
             release` an address a pod holds."
        ),
        CalicoFix::AssignedAddress { node, ip, .. } => format!(
            "Fix: no pod holds {ip}, yet Calico's IPAM keeps it assigned (an allocation left by \
             a pod deleted uncleanly, as after a power outage, calico#11358): run `calicoctl \
             ipam check --show-problem-ips -o report.json`; once it lists {ip} as leaked, \
             release it (`calicoctl ipam release --ip={ip}`, or `--from-report=report.json`) \
             and kubelet on {node} gets it at its next retry."
        ),
    }
}
