//! The kernel-truth findings as the detector makes them on a `ptp`-laid node,
//! one scenario per kind, for the renderer tests over every kind.

use std::sync::Arc;

use super::cases::Mode;
use crate::{
    detect::{Cause, Finding, detect},
    inventory::{
        Inventory, OperState,
        fixtures::{ME, pod},
        ptp_fixtures::{PTP_PODS, hold, ptp_inventory, reroute, veth},
    },
};

fn api() -> Vec<crate::inventory::Pod> {
    ["postgres-cluster-0", "web-6f7c9d5b8-x2kqz", "api-0"]
        .iter()
        .zip(PTP_PODS)
        .map(|(n, a)| pod(n, ME, &[a]))
        .collect()
}

fn kernel(inv: &Inventory) -> Vec<(Mode, Finding)> {
    detect(inv)
        .into_iter()
        .filter(|f| matches!(f.cause, Cause::Kernel(_)))
        .map(|f| (Mode::CiliumOnly, f))
        .collect()
}

/// One finding of every kernel-truth kind.
pub(super) fn cases() -> Vec<(Mode, Finding)> {
    let mut misdirected = ptp_inventory(api());
    reroute(&mut misdirected, PTP_PODS[0], veth(1));
    let mut changed = ptp_inventory(api());
    hold(&mut changed, 2, &["10.250.1.40"]);
    let mut twice = ptp_inventory(api());
    hold(&mut twice, 1, &[PTP_PODS[1], PTP_PODS[0]]);
    let mut down = ptp_inventory(api());
    Arc::make_mut(&mut down.host).namespaces.ifaces[1].state = OperState::Down;
    let mut leaked_pods = api();
    leaked_pods[2].node = Some("worker-node-b".into());
    let mut missing = api();
    missing.push(pod("cache-0", ME, &["10.250.1.9"]));
    let mut dad = ptp_inventory(api());
    let ns = Arc::make_mut(&mut dad.host)
        .namespaces
        .namespaces
        .get_mut(&0);
    Arc::make_mut(ns.expect("nsid 0")).addresses[0].dad_failed = true;
    let mut stuck = ptp_inventory(api());
    let ns = Arc::make_mut(&mut stuck.host)
        .namespaces
        .namespaces
        .get_mut(&0);
    Arc::make_mut(ns.expect("nsid 0")).addresses[0].dad_stuck = true;
    // The node's gateway address on cni0, its DAD lost to web's namespace.
    let mut node_dad = ptp_inventory(api());
    hold(&mut node_dad, 1, &[PTP_PODS[1], "fd00:10::1"]);
    let host = Arc::make_mut(&mut node_dad.host);
    host.addresses.push(crate::inventory::LocalAddress {
        ip: "fd00:10::1".parse().expect("ip"),
        device: "cni0".into(),
    });
    host.dad_failed.push("fd00:10::1".parse().expect("ip"));
    [
        misdirected,
        changed,
        twice,
        down,
        ptp_inventory(leaked_pods),
        ptp_inventory(missing),
        dad,
        stuck,
        node_dad,
    ]
    .iter()
    .flat_map(kernel)
    .collect()
}

/// A second holder of a pod's address is a hint (any pod with NET_ADMIN can
/// add another's address): its note tells the pod nothing to do to itself and
/// names no other pod (issue 38).
#[test]
fn a_pod_another_namespace_shadows_is_never_told_to_delete_itself() {
    use crate::{
        detect::{FindingKind, Trust},
        report::message::{Reader, note},
    };
    let mut inv = ptp_inventory(api());
    // web's namespace adds postgres' address beside its own.
    hold(&mut inv, 1, &[PTP_PODS[1], PTP_PODS[0]]);
    let twice = detect(&inv)
        .into_iter()
        .find(|f| f.kind == FindingKind::PodAddressHeldTwice)
        .expect("a second holder");
    assert_eq!(twice.trust, Trust::Hint);
    let text = note(&twice, Reader::Namespace("tenant"), None);
    assert!(!text.contains("delete"), "{text}");
    assert!(!text.contains("web-"), "{text}");
}

/// A failed DAD says what the kernel did and, with no other holder on the
/// node, that the other one is beyond it; it names no other pod.
#[test]
fn a_failed_dad_says_dadfailed_and_where_the_other_holder_is() {
    let (_, f) = cases()
        .into_iter()
        .find(|(_, f)| f.kind == crate::detect::FindingKind::PodAddressDadFailed)
        .expect("a DAD case");
    let text = super::super::render(&f);
    assert!(text.contains("dadfailed"), "{text}");
    assert!(text.contains("not a namespace of this node"), "{text}");
    assert!(text.contains("delete pod"), "{text}");
}

/// A DAD that never ends says the address is tentative, names the pod's link
/// and its sysctls, and names no other pod.
#[test]
fn a_stuck_dad_says_tentative_and_names_the_link() {
    let (_, f) = cases()
        .into_iter()
        .find(|(_, f)| f.kind == crate::detect::FindingKind::PodAddressTentative)
        .expect("a stuck DAD case");
    let text = super::super::render(&f);
    assert!(text.contains("tentative"), "{text}");
    assert!(
        text.contains("veth0") && text.contains("dad_transmits"),
        "{text}"
    );
    assert!(text.contains("delete pod"), "{text}");
}
