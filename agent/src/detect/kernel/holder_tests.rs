//! Which namespace the kernel says a pod is in: the one holding its address
//! for a collision's words, its own while a plugin still configures it.

use std::sync::Arc;

use super::tests::api;
use crate::{
    detect::{FindingKind, detect},
    inventory::{
        Inventory,
        fixtures::{ME, ip, net, pod},
        ptp_fixtures::{PTP_PODS, hold, ptp_inventory, reroute, veth},
    },
};

/// The kernel-truth findings' kinds.
fn kernel(inv: &Inventory) -> Vec<(FindingKind,)> {
    detect(inv)
        .into_iter()
        .filter(|f| matches!(f.cause, crate::detect::Cause::Kernel(_)))
        .map(|f| (f.kind,))
        .collect()
}

#[test]
fn a_collision_names_the_one_pod_namespace_holding_the_address_only() {
    let inv = ptp_inventory(api());
    assert_eq!(
        super::sole_pod_holder(&inv, ip(PTP_PODS[0])).as_deref(),
        Some("veth0")
    );
    // Two namespaces hold it: which is the pod's is not the kernel's to say.
    let mut twice = ptp_inventory(api());
    hold(&mut twice, 1, &[PTP_PODS[1], PTP_PODS[0]]);
    assert_eq!(super::sole_pod_holder(&twice, ip(PTP_PODS[0])), None);
}

#[test]
fn a_route_into_the_pods_own_namespace_still_without_its_ipv6_is_not_misdirected() {
    let mut pods = api();
    pods[0] = pod("a", ME, &[PTP_PODS[0], "fd00:10:250:1::2"]);
    let mut inv = ptp_inventory(pods);
    // The plugin laid the /128 out of a's veth before putting the IPv6 inside.
    let host = Arc::make_mut(&mut inv.host);
    host.routes.push(crate::inventory::Route {
        table: crate::inventory::TABLE_MAIN,
        dst: net("fd00:10:250:1::2/128"),
        kind: crate::inventory::RouteKind::Unicast,
        oif: Some(veth(0)),
        gateway: None,
    });
    assert!(kernel(&inv).is_empty(), "{:#?}", kernel(&inv));
    // Into b's namespace instead: misdirected.
    reroute(&mut inv, "fd00:10:250:1::2", veth(1));
    let Some(route) = Arc::make_mut(&mut inv.host).routes.last_mut() else {
        panic!("a route")
    };
    route.dst = net("fd00:10:250:1::2/128");
    let kinds: Vec<_> = kernel(&inv).into_iter().map(|k| k.0).collect();
    assert_eq!(kinds, [FindingKind::PodRouteMisdirected]);
}
