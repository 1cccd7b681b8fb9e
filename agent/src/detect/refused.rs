//! A sandbox refused an address as in use that no node holds: another live
//! pod holds it (`DuplicatePodIP`), or nothing does and Cilium keeps an
//! endpoint for a pod that is gone (`StaleCiliumEndpoint`), or Calico's IPAM
//! an allocation (`StaleCalicoAllocation`) — each by the words of the plugin
//! that refused, whose fix it gets. Known from kubelet's Events alone, which a
//! tenant can write: hints.

use std::{collections::HashMap, net::IpAddr};

use super::{
    CalicoFix, Cause, Finding, FindingKind, KubeletReport, Owner, PodRef, PodSite, Remedy, Role,
    Scope, Trust,
    kind::{Alert, Count, Spec, rank},
    status_ips,
};
use crate::inventory::{Inventory, Pod, SandboxFailure, SandboxRefusal, Source};

/// A kind about a pod whose sandbox the CNI refused: it cannot start.
pub(super) const fn refusal(name: &'static str, what: &'static str, alert: Alert) -> Spec {
    Spec {
        rank: rank::cannot_start,
        ..Spec::pod(name, what, Count::IpamProblems, alert)
    }
}

/// Another live pod holds the pod's address: the CNI refused it (Cilium's
/// in use, Calico IPAM's assigned), or both pods hold it in their status.
pub(super) const DUPLICATE: Spec = refusal(
    "DuplicatePodIP",
    "another live pod holds the pod's address: the CNI refused it as in use (Cilium) or \
     assigned (Calico's IPAM), or both pods hold it",
    Alert::Named("IPShadowDuplicatePodIP"),
);

/// Cilium refused the pod's address as in use, and nothing owns it.
pub(super) const STALE_ENDPOINT: Spec = refusal(
    "StaleCiliumEndpoint",
    "Cilium refused the pod's address as in use, and nothing owns it: an endpoint Cilium \
     keeps for a pod that is gone",
    Alert::Named("IPShadowStaleCiliumEndpoint"),
);

/// Calico's IPAM refused the pod the address it asked for, and nothing holds it.
pub(super) const STALE_CALICO: Spec = refusal(
    "StaleCalicoAllocation",
    "Calico's IPAM refused the address the pod asked for as assigned, and no pod holds it: \
     an allocation left by a pod that is gone",
    Alert::None(
        "always a hint: it rests on kubelet's Event alone, which a tenant can write (a pod \
         asking for an address no pod holds is told apart by no other record the agent reads)",
    ),
);

/// kubelet's reports that `pod` was refused `ip` as in use.
pub(super) fn kubelet_report(inv: &Inventory, pod: &Pod, ip: IpAddr) -> Option<KubeletReport> {
    summed(
        inv.cluster
            .sandbox
            .iter()
            .filter(|f| f.is_about(pod) && f.refusal.refused_address() == Some(ip)),
    )
}

/// kubelet's reports `failures`: counts summed, the message of the most repeated.
pub(super) fn summed<'a>(
    failures: impl Iterator<Item = &'a SandboxFailure>,
) -> Option<KubeletReport> {
    let mut out: Option<(KubeletReport, u64)> = None;
    for f in failures {
        let (report, best) = out.get_or_insert_with(|| {
            let message = f.message.clone();
            (KubeletReport { count: 0, message }, f.count)
        });
        report.count = report.count.saturating_add(f.count);
        if f.count > *best {
            report.message.clone_from(&f.message);
            *best = f.count;
        }
    }
    out.map(|(r, _)| r)
}

/// The live pod other than `me` whose status holds `ip`: `node`'s first.
pub(super) fn holder_of<'a>(
    inv: &'a Inventory,
    me: &Pod,
    ip: IpAddr,
    node: &str,
) -> Option<&'a Pod> {
    inv.cluster
        .pods
        .iter()
        .filter(|p| {
            p.can_receive_traffic()
                && !(p.namespace == me.namespace && p.name == me.name)
                && status_ips(p).any(|i| i == ip)
        })
        .min_by_key(|p| p.node.as_deref() != Some(node))
}

/// A pod refused `ip` as in use where no node holds it: another live pod
/// holds it (`DuplicatePodIP`), or nothing does and Cilium keeps an endpoint
/// for a pod that is gone (`StaleCiliumEndpoint`, cilium#38313).
pub(super) fn refused(inv: &Inventory, me: &Pod, site: PodSite, ip: IpAddr) -> Option<Finding> {
    let kubelet = kubelet_report(inv, me, ip)?;
    // The pod's own node first: its Cilium is the one that refused.
    let holder = holder_of(inv, me, ip, &site.node);
    // Calico's IPAM refused the address the pod asked for: Calico's fix.
    let calico = inv
        .cluster
        .sandbox
        .iter()
        .any(|f| f.is_about(me) && f.refusal == SandboxRefusal::AddressAssigned(ip));
    let node = site.node.as_str();
    let (kind, owner) = match holder {
        Some(h) => {
            let on = h.node.as_deref().unwrap_or(node);
            let owner = Owner::new(on, Role::Pod, None, Source::PodStatus);
            (FindingKind::DuplicatePodIp, owner)
        }
        None if calico => {
            let owner = Owner::new(node, Role::Node, None, Source::KubeletEvent);
            (FindingKind::StaleCalicoAllocation, owner)
        }
        None => {
            let owner = Owner::new(node, Role::Endpoint, None, Source::KubeletEvent);
            (FindingKind::StaleCiliumEndpoint, owner)
        }
    };
    let remedy = match (holder, calico) {
        (held, true) => Remedy::Calico(CalicoFix::AssignedAddress {
            node: node.to_owned(),
            ip,
            held: held.is_some(),
        }),
        (Some(_), false) => Remedy::ReallocateDuplicate {
            node: node.to_owned(),
        },
        (None, false) => Remedy::DisconnectEndpoint {
            node: node.to_owned(),
            ip,
            cilium_pod: cilium_agent_pod(inv, node),
        },
    };
    Some(Finding {
        kind,
        scope: Scope::between(&owner.node, node),
        ip: Some(ip),
        owner,
        cause: Cause::Refused {
            site,
            kubelet,
            holder: holder.map(PodRef::from),
        },
        remedy,
        // The refusal is known from an Event alone, which a tenant can write.
        trust: Trust::Hint,
    })
}

/// The Cilium agent pod on `node`, by the DaemonSet's naming (`cilium-xxxxx`).
fn cilium_agent_pod(inv: &Inventory, node: &str) -> Option<PodRef> {
    inv.cluster
        .pods
        .iter()
        .find(|p| {
            p.node.as_deref() == Some(node)
                && p.name.strip_prefix("cilium-").is_some_and(|suffix| {
                    suffix.len() == 5 && suffix.bytes().all(|b| b.is_ascii_alphanumeric())
                })
        })
        .map(PodRef::from)
}

/// A duplicate for every live pod whose status IP an older live pod also
/// holds. Terminating pods are left out: their address may already be
/// released and handed on while the object lingers.
pub(super) fn duplicates(holders: &HashMap<IpAddr, Vec<&Pod>>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (ip, pods) in holders.iter().filter(|(_, p)| p.len() > 1) {
        let mut pods = pods.clone();
        pods.sort_by(|a, b| {
            (a.created, &a.namespace, &a.name).cmp(&(b.created, &b.namespace, &b.name))
        });
        pods.dedup_by(|a, b| a.uid == b.uid && a.name == b.name && a.namespace == b.namespace);
        let Some((oldest, newer)) = pods.split_first() else {
            continue;
        };
        for p in newer {
            // Both addresses are in pod status, which only kubelet writes.
            let from = (None, Source::PodStatus);
            out.push(super::secondary::finding(
                from,
                *ip,
                (oldest, None),
                (p, None),
            ));
        }
    }
    out
}
