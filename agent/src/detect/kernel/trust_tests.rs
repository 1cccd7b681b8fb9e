//! Who could have written what a kernel-truth finding rests on: a pod with
//! NET_ADMIN rewrites its own namespace (its addresses, its link state), so
//! only what the host shows speaks for the node (issue 38).

use std::sync::Arc;

use super::tests::api;
use crate::{
    detect::{Cause, Finding, FindingKind, Trust, detect},
    inventory::{
        Inventory, OperState,
        fixtures::ip,
        ptp_fixtures::{PTP_PODS, hold, ptp_inventory, reroute, veth},
    },
};

/// The kernel-truth finding about `addr`.
fn about(inv: &Inventory, addr: &str) -> Finding {
    detect(inv)
        .into_iter()
        .find(|f| matches!(f.cause, Cause::Kernel(_)) && f.ip == Some(ip(addr)))
        .unwrap_or_else(|| panic!("a kernel-truth finding about {addr}"))
}

fn other_pod(f: &Finding) -> Option<String> {
    let Cause::Kernel(k) = &f.cause else {
        panic!("kernel cause")
    };
    k.other_pod.as_ref().map(|p| p.name.clone())
}

#[test]
fn a_route_the_host_moved_onto_another_pods_veth_speaks_for_the_node() {
    let mut inv = ptp_inventory(api());
    // The host routes a's address out veth1, which it also routes b's out of.
    reroute(&mut inv, PTP_PODS[0], veth(1));
    let f = about(&inv, PTP_PODS[0]);
    assert_eq!(f.kind, FindingKind::PodRouteMisdirected);
    assert_eq!(f.trust, Trust::Kernel);
    assert_eq!(other_pod(&f).as_deref(), Some("b"));
}

#[test]
fn a_pod_that_rewrites_its_own_addresses_is_a_hint_that_names_no_other_pod() {
    // Pod b (NET_ADMIN in its namespace) drops its address and adds a's.
    let mut inv = ptp_inventory(api());
    hold(&mut inv, 1, &[PTP_PODS[0]]);
    let own = about(&inv, PTP_PODS[1]);
    assert_eq!(own.kind, FindingKind::PodRouteMisdirected);
    assert_eq!(own.trust, Trust::Hint);
    assert_eq!(other_pod(&own), None, "a's name rests on what b wrote");
    // a's route still reaches a's namespace: a second holder, b's word alone.
    let victim = about(&inv, PTP_PODS[0]);
    assert_eq!(victim.kind, FindingKind::PodAddressHeldTwice);
    assert_eq!(victim.trust, Trust::Hint);
    // Pod c moves to an address nobody has: its own route, its own doing.
    let mut inv = ptp_inventory(api());
    hold(&mut inv, 2, &["10.250.1.40"]);
    let f = about(&inv, PTP_PODS[2]);
    assert_eq!(
        (f.kind, f.trust),
        (FindingKind::PodRouteMisdirected, Trust::Hint)
    );
}

#[test]
fn a_dead_end_speaks_for_the_node_only_where_the_host_set_its_interface_down() {
    // Pod b sets its eth0 down: the host's veth loses its carrier (the kernel
    // reports `down` where the two ifindexes are equal, else lowerlayerdown).
    for state in [OperState::Down, OperState::LowerLayerDown] {
        let mut inv = ptp_inventory(api());
        Arc::make_mut(&mut inv.host).namespaces.ifaces[1].state = state;
        let f = about(&inv, PTP_PODS[1]);
        assert_eq!(
            (f.kind, f.trust),
            (FindingKind::PodRouteDeadEnd, Trust::Hint),
            "{state}"
        );
    }
    // The host's own interface set down: only the host does that.
    let mut inv = ptp_inventory(api());
    let iface = &mut Arc::make_mut(&mut inv.host).namespaces.ifaces[1];
    iface.state = OperState::Down;
    iface.admin_up = false;
    let f = about(&inv, PTP_PODS[1]);
    assert_eq!(
        (f.kind, f.trust),
        (FindingKind::PodRouteDeadEnd, Trust::Kernel)
    );
}
