//! IPv6 duplicate address detection: the kernel keeps an address whose DAD
//! failed (`dadfailed`) and never uses it, so the pod has no working address
//! however healthy it looks. Another holder on its link answered for it: a
//! namespace of this node (a bridge CNI, a leaked sandbox) or a host beyond it.
//! An address whose DAD never ends (`tentative` for long) is as unusable.

use super::{Index, finding, kernel_spec};
use crate::{
    detect::{
        Finding, FindingKind, PodRef, PodSite, Trust,
        kind::Spec,
        truth::{KernelFix, KernelTruth},
    },
    inventory::{Holder, IpSource, NsAddress, Pod, TruthRow},
};

/// The pod's IPv6 address failed duplicate address detection in its namespace.
pub(in crate::detect) const DAD_FAILED: Spec = kernel_spec(
    "PodAddressDadFailed",
    "the pod's IPv6 address failed duplicate address detection (dadfailed) in its namespace: it \
     carries no traffic",
    DAD_UNSEEN,
);

/// The pod's IPv6 address has stayed tentative: its DAD never ended.
pub(in crate::detect) const DAD_STUCK: Spec = kernel_spec(
    "PodAddressTentative",
    "the pod's IPv6 address has stayed tentative in its namespace (duplicate address detection \
     never ended): it carries no traffic",
    DAD_UNSEEN,
);

/// Why `audit` sees no DAD: it runs in the node's kernel.
pub(super) const DAD_UNSEEN: &str = "duplicate address detection runs in the node's kernel";

/// The finding about `pod`'s address `row.ip` where its namespace's copy
/// failed DAD, else where it has stayed tentative. Which namespace is the
/// pod's: the one its host route reaches, else the one named for it; where
/// neither tells, only a verdict on every holder is surely the pod's (else:
/// two holders, [`super`]'s held twice).
pub(super) fn dad_verdict(idx: &Index<'_>, row: &TruthRow, pod: &Pod) -> Option<Finding> {
    let failed = |a: &NsAddress| a.dad_failed;
    let stuck = |a: &NsAddress| a.dad_stuck;
    verdict(idx, row, pod, FindingKind::PodAddressDadFailed, &failed)
        .or_else(|| verdict(idx, row, pod, FindingKind::PodAddressTentative, &stuck))
}

fn verdict(
    idx: &Index<'_>,
    row: &TruthRow,
    pod: &Pod,
    kind: FindingKind,
    marked: &dyn Fn(&NsAddress) -> bool,
) -> Option<Finding> {
    let inv = idx.inv;
    let marked_in = |h: &Holder| {
        inv.host
            .namespaces
            .namespaces
            .get(&h.nsid)
            .is_some_and(|n| n.addresses.iter().any(|a| a.ip == row.ip && marked(a)))
    };
    // Most pods' addresses are marked nowhere: nothing more is looked at
    // (nor allocated) for them on every reconcile.
    if !row.holders.iter().any(marked_in) {
        return None;
    }
    let named = |h: &Holder| {
        h.named_for.as_deref().is_some_and(|n| {
            n.strip_prefix(pod.namespace.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
                == Some(pod.name.as_str())
        })
    };
    let by_route = row.route.as_ref().and_then(|r| r.nsid);
    let own = row
        .holders
        .iter()
        .find(|h| Some(h.nsid) == by_route || named(h))
        .or_else(|| {
            row.holders
                .iter()
                .all(marked_in)
                .then(|| row.holders.first())
                .flatten()
        })?;
    if !marked_in(own) {
        return None;
    }
    let fix = fix(kind, &inv.node, row, own, pod);
    let truth = KernelTruth {
        site: Some(PodSite::new(pod, &inv.node, IpSource::Status)),
        row: row.clone(),
        reached: Some(own.clone()),
        other_pod: None,
    };
    let device = Some(own.iface.clone());
    // A pod with NET_ADMIN can fail its own DAD (or a neighbour's on a shared
    // link), or stall it with its own sysctls.
    let f = finding(inv, (kind, row.ip), truth, fix, device, Trust::Hint);
    Some(f)
}

/// A failed DAD: remove the other holders on the pod's link. One that never
/// ends: let the pod's own link finish it.
fn fix(kind: FindingKind, node: &str, row: &TruthRow, own: &Holder, pod: &Pod) -> KernelFix {
    let (node, pod) = (node.to_owned(), PodRef::from(pod));
    if kind == FindingKind::PodAddressDadFailed {
        let others = row
            .holders
            .iter()
            .filter(|h| h.nsid != own.nsid)
            .map(|h| h.iface.clone())
            .collect();
        KernelFix::RedoDad { node, pod, others }
    } else {
        KernelFix::FinishDad {
            node,
            pod,
            iface: own.iface.clone(),
        }
    }
}
