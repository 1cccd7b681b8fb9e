//! The node's own IPv6 address the kernel marks dadfailed: found with its
//! device, the pod namespaces of the node holding it and the pod given it,
//! each named in the fix.

use std::sync::Arc;

use super::super::tests::api;
use crate::{
    detect::{Cause, FindingKind, KernelFix, Remedy, Trust, detect},
    inventory::{
        Inventory, LocalAddress,
        fixtures::{ip, pod},
        ptp_fixtures::{PTP_PODS, hold, ptp_inventory},
    },
};

const GATEWAY: &str = "fd00:10::1";

/// The node holds `GATEWAY` on `cni0`, its DAD failed.
fn node_dad_failed(inv: &mut Inventory) {
    let host = Arc::make_mut(&mut inv.host);
    host.addresses.push(LocalAddress {
        ip: ip(GATEWAY),
        device: "cni0".into(),
    });
    host.dad_failed.push(ip(GATEWAY));
}

fn found(inv: &Inventory) -> Vec<(FindingKind, Option<String>, Remedy, Option<String>)> {
    detect(inv)
        .into_iter()
        .filter(|f| f.kind == FindingKind::NodeAddressDadFailed)
        .map(|f| {
            let other = match &f.cause {
                Cause::Kernel(k) => k.other_pod.as_ref().map(|p| p.name.clone()),
                _ => None,
            };
            assert_eq!(f.trust, Trust::Kernel, "the node's own kernel's verdict");
            assert!(f.pod().is_none(), "a Node finding");
            (f.kind, f.owner.device, f.remedy, other)
        })
        .collect()
}

#[test]
fn a_node_address_that_failed_dad_names_its_device_and_the_namespace_holding_it() {
    let mut inv = ptp_inventory(api());
    assert_eq!(found(&inv), []);
    node_dad_failed(&mut inv);
    hold(&mut inv, 1, &[PTP_PODS[1], GATEWAY]);
    let got = found(&inv);
    assert_eq!(got.len(), 1, "{got:?}");
    let (kind, device, remedy, other) = &got[0];
    assert_eq!(*kind, FindingKind::NodeAddressDadFailed);
    assert_eq!(device.as_deref(), Some("cni0"));
    assert_eq!(*other, None);
    let Remedy::Kernel(KernelFix::RedoNodeDad { device, others, .. }) = remedy else {
        panic!("{remedy:?}")
    };
    assert_eq!(device, "cni0");
    assert_eq!(others.len(), 1, "the one namespace holding it: {others:?}");
}

#[test]
fn the_pod_given_the_nodes_address_is_named() {
    let mut pods = api();
    pods.push(pod("taker", crate::inventory::fixtures::ME, &[GATEWAY]));
    let mut inv = ptp_inventory(pods);
    node_dad_failed(&mut inv);
    let got = found(&inv);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].3.as_deref(), Some("taker"));
}
