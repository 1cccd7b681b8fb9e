//! A pod's address whose duplicate address detection failed in its own
//! namespace (issue 39): reported on the pod, as a hint, with its fix (its words:
//! `report/message/catalog_tests/kernel.rs`); a
//! failed copy elsewhere leaves the pod's own working address alone. One whose
//! DAD never ends (tentative for long) is reported the same way.

use std::sync::Arc;

use super::tests::api;
use crate::{
    detect::{Cause, Finding, FindingKind, KernelFix, Remedy, Trust, detect},
    inventory::{
        Inventory, NsAddress,
        fixtures::ip,
        ptp_fixtures::{PTP_PODS, hold, ptp_inventory},
    },
};

/// Marks the copy of `addr` in namespace `nsid` as failed DAD.
fn fail_dad(inv: &mut Inventory, nsid: i32, addr: &str) {
    mark(inv, nsid, addr, |a| a.dad_failed = true);
}

fn mark(inv: &mut Inventory, nsid: i32, addr: &str, set: impl Fn(&mut NsAddress)) {
    let host = Arc::make_mut(&mut inv.host);
    let ns = Arc::make_mut(host.namespaces.namespaces.get_mut(&nsid).expect("nsid"));
    for a in ns.addresses.iter_mut().filter(|a| a.ip == ip(addr)) {
        set(a);
    }
}

fn about(inv: &Inventory, addr: &str) -> Option<Finding> {
    detect(inv)
        .into_iter()
        .find(|f| matches!(f.cause, Cause::Kernel(_)) && f.ip == Some(ip(addr)))
}

#[test]
fn a_pods_own_address_that_failed_dad_is_reported_on_the_pod_with_its_fix() {
    let mut inv = ptp_inventory(api());
    fail_dad(&mut inv, 0, PTP_PODS[0]);
    let f = about(&inv, PTP_PODS[0]).expect("a finding about pod a");
    assert_eq!(f.kind, FindingKind::PodAddressDadFailed);
    assert_eq!(f.pod().map(|p| p.name.as_str()), Some("a"));
    assert_eq!(f.trust, Trust::Hint, "a pod can fail its own DAD");
    assert_eq!(f.owner.device.as_deref(), Some("veth0"));
    assert!(
        matches!(&f.remedy, Remedy::Kernel(crate::detect::KernelFix::RedoDad { others, .. }) if others.is_empty())
    );
    // The healthy pods next to it: nothing.
    assert_eq!(about(&inv, PTP_PODS[1]), None);
}

#[test]
fn without_the_kernels_verdict_there_is_no_dad_finding() {
    let inv = ptp_inventory(api());
    assert_eq!(about(&inv, PTP_PODS[0]), None);
}

#[test]
fn a_failed_copy_in_another_namespace_leaves_the_pods_working_address_held_twice() {
    // Pod b adds a's address; the kernel fails b's copy (a's answered for it).
    let mut inv = ptp_inventory(api());
    hold(&mut inv, 1, &[PTP_PODS[1], PTP_PODS[0]]);
    fail_dad(&mut inv, 1, PTP_PODS[0]);
    let f = about(&inv, PTP_PODS[0]).expect("a finding about pod a");
    assert_eq!(f.kind, FindingKind::PodAddressHeldTwice);
    // But where a's own copy failed and b's works, a's is the dead one.
    let mut inv = ptp_inventory(api());
    hold(&mut inv, 1, &[PTP_PODS[1], PTP_PODS[0]]);
    fail_dad(&mut inv, 0, PTP_PODS[0]);
    let f = about(&inv, PTP_PODS[0]).expect("a finding about pod a");
    assert_eq!(f.kind, FindingKind::PodAddressDadFailed);
    assert!(
        matches!(&f.remedy, Remedy::Kernel(KernelFix::RedoDad { others, .. }) if others == &["veth1"]),
        "{:?}",
        f.remedy
    );
}

#[test]
fn a_pods_own_address_tentative_for_long_is_reported_with_its_link() {
    let mut inv = ptp_inventory(api());
    mark(&mut inv, 0, PTP_PODS[0], |a| a.dad_stuck = true);
    let f = about(&inv, PTP_PODS[0]).expect("a finding about pod a");
    assert_eq!(f.kind, FindingKind::PodAddressTentative);
    assert_eq!(f.pod().map(|p| p.name.as_str()), Some("a"));
    assert_eq!(f.trust, Trust::Hint, "a pod can stall its own DAD");
    assert!(
        matches!(&f.remedy, Remedy::Kernel(KernelFix::FinishDad { iface, .. }) if iface == "veth0"),
        "{:?}",
        f.remedy
    );
    assert_eq!(about(&inv, PTP_PODS[1]), None);
    // A failed DAD is the verdict told, not the wait before it.
    mark(&mut inv, 0, PTP_PODS[0], |a| a.dad_failed = true);
    let f = about(&inv, PTP_PODS[0]).expect("a finding about pod a");
    assert_eq!(f.kind, FindingKind::PodAddressDadFailed);
}

#[test]
fn a_stuck_copy_in_another_namespace_leaves_the_pods_working_address_held_twice() {
    let mut inv = ptp_inventory(api());
    hold(&mut inv, 1, &[PTP_PODS[1], PTP_PODS[0]]);
    mark(&mut inv, 1, PTP_PODS[0], |a| a.dad_stuck = true);
    let f = about(&inv, PTP_PODS[0]).expect("a finding about pod a");
    assert_eq!(f.kind, FindingKind::PodAddressHeldTwice);
}
