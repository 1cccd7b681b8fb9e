//! IPv6 duplicate address detection: the kernel keeps an address whose DAD
//! failed (`dadfailed`) and never uses it, so the pod has no working address
//! however healthy it looks. Another holder on its link answered for it: a
//! namespace of this node (a bridge CNI, a leaked sandbox) or a host beyond it.

use super::{Index, KERNEL_TRUTH, finding, site};
use crate::{
    detect::{
        Finding, FindingKind, PodRef, Trust,
        kind::{Count, Spec},
        truth::{KernelFix, KernelTruth},
    },
    inventory::{Holder, Pod, TruthRow},
};

/// The pod's IPv6 address failed duplicate address detection in its namespace.
pub(in crate::detect) const DAD_FAILED: Spec = Spec {
    unseen_by_audit: Some("duplicate address detection runs in the node's kernel"),
    ..Spec::pod(
        "PodAddressDadFailed",
        "the pod's IPv6 address failed duplicate address detection (dadfailed) in its namespace: \
         it carries no traffic",
        Count::KernelTruth,
        KERNEL_TRUTH,
    )
};

/// The finding about `pod`'s address `row.ip` where its namespace's copy
/// failed DAD. Which namespace is the pod's: the one its host route reaches,
/// else the one named for it; where neither tells, only a failure in every
/// holder is surely the pod's (else: two holders, [`super`]'s held twice).
pub(super) fn dad_failed(idx: &Index<'_>, row: &TruthRow, pod: &Pod) -> Option<Finding> {
    let inv = idx.inv;
    let failed = |h: &Holder| {
        inv.host
            .namespaces
            .namespaces
            .get(&h.nsid)
            .is_some_and(|n| n.addresses.iter().any(|a| a.ip == row.ip && a.dad_failed))
    };
    let name = format!("{}/{}", pod.namespace, pod.name);
    let by_route = row.route.as_ref().and_then(|r| r.nsid);
    let own = row
        .holders
        .iter()
        .find(|h| Some(h.nsid) == by_route || h.named_for.as_deref() == Some(name.as_str()))
        .or_else(|| {
            row.holders
                .iter()
                .all(failed)
                .then(|| row.holders.first())
                .flatten()
        })?;
    if !failed(own) {
        return None;
    }
    let others = row
        .holders
        .iter()
        .filter(|h| h.nsid != own.nsid)
        .map(|h| h.iface.clone())
        .collect();
    let fix = KernelFix::RedoDad {
        node: inv.node.clone(),
        pod: PodRef::from(pod),
        others,
    };
    let truth = KernelTruth {
        site: Some(site(inv, pod)),
        row: row.clone(),
        reached: Some(own.clone()),
        other_pod: None,
    };
    let device = Some(own.iface.clone());
    let mut f = finding(
        inv,
        (FindingKind::PodAddressDadFailed, row.ip),
        truth,
        fix,
        device,
    );
    // A pod with NET_ADMIN can fail its own DAD, or a neighbour's on a shared link.
    f.trust = Trust::Hint;
    Some(f)
}
