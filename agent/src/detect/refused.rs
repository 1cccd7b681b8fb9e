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
};
use crate::inventory::{Inventory, IpSource, Pod, SandboxRefusal, Source};

/// Another live pod holds the pod's address: the CNI refused it (Cilium's
/// in use, Calico IPAM's assigned), or both pods hold it in their status.
pub(super) const DUPLICATE: Spec = Spec {
    rank: rank::cannot_start,
    ..Spec::pod(
        "DuplicatePodIP",
        "another live pod holds the pod's address: the CNI refused it as in use (Cilium) or \
         assigned (Calico's IPAM), or both pods hold it",
        Count::IpamProblems,
        Alert::Named("IPShadowDuplicatePodIP"),
    )
};

/// Cilium refused the pod's address as in use, and nothing owns it.
pub(super) const STALE_ENDPOINT: Spec = Spec {
    rank: rank::cannot_start,
    ..Spec::pod(
        "StaleCiliumEndpoint",
        "Cilium refused the pod's address as in use, and nothing owns it: an endpoint Cilium \
         keeps for a pod that is gone",
        Count::IpamProblems,
        Alert::Named("IPShadowStaleCiliumEndpoint"),
    )
};

/// Calico's IPAM refused the pod the address it asked for, and nothing holds it.
pub(super) const STALE_CALICO: Spec = Spec {
    rank: rank::cannot_start,
    ..Spec::pod(
        "StaleCalicoAllocation",
        "Calico's IPAM refused the address the pod asked for as assigned, and no pod holds it: \
         an allocation left by a pod that is gone",
        Count::IpamProblems,
        Alert::None(
            "always a hint: it rests on kubelet's Event alone, which a tenant can write (a pod \
             asking for an address no pod holds is told apart by no other record the agent reads)",
        ),
    )
};

/// kubelet's reports that `pod` was refused `ip` as in use: counts summed, the
/// message of the most repeated.
pub(super) fn kubelet_report(inv: &Inventory, pod: &Pod, ip: IpAddr) -> Option<KubeletReport> {
    let mut matching = inv
        .cluster
        .sandbox
        .iter()
        .filter(|f| f.is_about(pod) && f.refusal.refused_address() == Some(ip))
        .peekable();
    matching.peek()?;
    let (mut count, mut best) = (0u64, None::<(u64, &str)>);
    for f in matching {
        count = count.saturating_add(f.count);
        if best.is_none_or(|(c, _)| f.count > c) {
            best = Some((f.count, &f.message));
        }
    }
    Some(KubeletReport {
        count,
        message: best.map(|(_, m)| m.to_owned()).unwrap_or_default(),
    })
}

/// A pod refused `ip` as in use where no node holds it: another live pod
/// holds it (`DuplicatePodIP`), or nothing does and Cilium keeps an endpoint
/// for a pod that is gone (`StaleCiliumEndpoint`, cilium#38313).
pub(super) fn refused(inv: &Inventory, me: &Pod, site: PodSite, ip: IpAddr) -> Option<Finding> {
    let kubelet = kubelet_report(inv, me, ip)?;
    let holds = |p: &&Pod| {
        p.can_receive_traffic()
            && !(p.namespace == me.namespace && p.name == me.name)
            && p.ips
                .iter()
                .any(|i| i.ip == ip && i.source == IpSource::Status)
    };
    // The pod's own node first: its Cilium is the one that refused.
    let holder = inv
        .cluster
        .pods
        .iter()
        .filter(holds)
        .min_by_key(|p| p.node.as_deref() != Some(site.node.as_str()));
    // Calico's IPAM refused the address the pod asked for: Calico's fix.
    let calico = inv
        .cluster
        .sandbox
        .iter()
        .any(|f| f.is_about(me) && f.refusal == SandboxRefusal::AddressAssigned(ip));
    let (kind, scope, owner, remedy) = match holder {
        Some(h) => duplicate(h, &site.node, calico.then_some(ip)),
        None if calico => stale_allocation(&site.node, ip),
        None => stale_endpoint(inv, &site.node, ip),
    };
    Some(Finding {
        kind,
        scope,
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

/// Who holds the address and what fixes it, when another live pod (`holder`)
/// does; `calico`: the address Calico's IPAM refused as assigned.
fn duplicate(
    holder: &Pod,
    node: &str,
    calico: Option<IpAddr>,
) -> (FindingKind, Scope, Owner, Remedy) {
    let on = holder.node.clone().unwrap_or_else(|| node.to_owned());
    let scope = if on == node {
        Scope::SameNode
    } else {
        Scope::CrossNode
    };
    let owner = Owner {
        node: on,
        role: Role::Pod,
        device: None,
        source: Source::PodStatus,
    };
    let node = node.to_owned();
    let remedy = match calico {
        Some(ip) => Remedy::Calico(CalicoFix::AssignedAddress {
            node,
            ip,
            held: true,
        }),
        None => Remedy::ReallocateDuplicate { node },
    };
    (FindingKind::DuplicatePodIp, scope, owner, remedy)
}

/// The same, when no pod does: Cilium on `node` keeps an endpoint for a pod that is gone.
fn stale_endpoint(inv: &Inventory, node: &str, ip: IpAddr) -> (FindingKind, Scope, Owner, Remedy) {
    let owner = Owner {
        node: node.to_owned(),
        role: Role::Endpoint,
        device: None,
        source: Source::KubeletEvent,
    };
    let remedy = Remedy::DisconnectEndpoint {
        node: node.to_owned(),
        ip,
        cilium_pod: cilium_agent_pod(inv, node),
    };
    (
        FindingKind::StaleCiliumEndpoint,
        Scope::SameNode,
        owner,
        remedy,
    )
}

/// The same, when Calico's IPAM refused it: an allocation it keeps for none.
fn stale_allocation(node: &str, ip: IpAddr) -> (FindingKind, Scope, Owner, Remedy) {
    let owner = Owner {
        node: node.to_owned(),
        role: Role::Node,
        device: None,
        source: Source::KubeletEvent,
    };
    let remedy = Remedy::Calico(CalicoFix::AssignedAddress {
        node: node.to_owned(),
        ip,
        held: false,
    });
    let kind = FindingKind::StaleCalicoAllocation;
    (kind, Scope::SameNode, owner, remedy)
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
        let holder = PodRef::from(*oldest);
        let holder_node = oldest.node.clone().unwrap_or_default();
        for p in newer {
            let node = p.node.clone().unwrap_or_default();
            let scope = if node == holder_node {
                Scope::SameNode
            } else {
                Scope::CrossNode
            };
            out.push(Finding {
                kind: FindingKind::DuplicatePodIp,
                scope,
                ip: Some(*ip),
                owner: Owner {
                    node: holder_node.clone(),
                    role: Role::Pod,
                    device: None,
                    source: Source::PodStatus,
                },
                cause: Cause::Duplicate {
                    site: PodSite {
                        pod: PodRef::from(*p),
                        node,
                        ip_source: IpSource::Status,
                        created: p.created,
                        controller: p.controller.clone(),
                    },
                    holder: holder.clone(),
                    network: None,
                },
                remedy: Remedy::RecreateNewer {
                    pod: PodRef::from(*p),
                },
                // Both addresses are in pod status, which only kubelet writes.
                trust: Trust::Cluster,
            });
        }
    }
    out
}
