//! The messages name what collides, what breaks, and the fix.
use std::sync::Arc;

use super::*;
use crate::{
    detect::detect,
    inventory::{
        FibResult, Route, RouteKind,
        fixtures::{ME, inventory, ip, net, ovn_default, pod, shadowed_pod_route, with_fib},
    },
};

fn assert_says(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} missing in {text}");
    }
}

#[test]
fn collisions_name_ip_owner_impact_and_the_kube_ovn_fix() {
    let mut inv = inventory(vec![
        pod("postgres-0", ME, &["10.244.4.251"]),
        pod("api", ME, &["10.244.1.182"]),
    ]);
    inv.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
    let f = detect(&inv);
    assert_eq!(f[1].ip, Some(ip("10.244.4.251")));
    assert_says(
        &render(&f[1]),
        &[
            "Pod tenant/postgres-0",
            "10.244.4.251",
            "router IP",
            "node-a on device cilium_host, according to CiliumNode.spec.addresses",
            "kubelet probes",
            "Fix: give Cilium's IPAM a pool cut from the end of kube-ovn Subnet ovn-default's block 10.244.0.0/16, e.g. 10.244.248.0/21",
            "add \"10.244.248.0..10.244.255.255\" to spec.excludeIps of Subnet ovn-default",
            "Gateway API",
        ],
    );
    assert_says(
        &render(&f[0]),
        &["host network of node node-b cannot reach it"],
    );
}

#[test]
fn without_kube_ovn_no_message_names_it() {
    let mut inv = with_fib(
        inventory(vec![
            pod("postgres-0", ME, &["10.244.4.251"]),
            pod("gw", ME, &["10.244.4.12"]),
            pod("api", ME, &["10.244.1.182"]),
            pod("svc", ME, &["10.96.0.10"]),
            pod("lost", ME, &["10.244.0.99"]),
        ]),
        &[("10.244.0.99", FibResult::NoRoute)],
    );
    inv.subnets = Arc::default();
    let f = detect(&inv);
    assert_eq!(f.len(), 5, "{f:#?}");
    for text in f.iter().map(render) {
        for word in ["kube-ovn", "Subnet", "excludeIps", "ovn0"] {
            assert!(!text.contains(word), "{word:?} in {text}");
        }
    }
    assert_says(
        &render(
            f.iter()
                .find(|f| f.ip == Some(ip("10.244.4.251")))
                .expect("router"),
        ),
        &[
            "Fix: delete the pod so it is given another address",
            "--max-pods",
        ],
    );
    assert_says(
        &render(
            f.iter()
                .find(|f| f.ip == Some(ip("10.96.0.10")))
                .expect("ipvs"),
        ),
        &[
            "find the Service that claims 10.96.0.10 on kube-ipvs0",
            "give Services and pods disjoint ranges",
        ],
    );
}

#[test]
fn a_shadowed_pod_route_is_named() {
    let f = detect(&shadowed_pod_route());
    assert_says(
        &render(&f[0]),
        &[
            "10.96.0.10/32 dev lxc1234 is shadowed",
            "remove the address",
        ],
    );
}

#[test]
fn blackholes_name_the_dead_end_its_route_and_the_fix() {
    for (answer, kind, says) in [
        (
            FibResult::Blackhole,
            RouteKind::Blackhole,
            "ends in blackhole (route blackhole 10.244.0.99/32): kubelet probes",
        ),
        (
            FibResult::NoRoute,
            RouteKind::Throw,
            "Fix: restore the pod network's route on node-a",
        ),
    ] {
        let mut inv = inventory(vec![pod("lost", ME, &["10.244.0.99"])]);
        Arc::make_mut(&mut inv.host).routes.push(Route {
            table: 254,
            dst: net("10.244.0.99/32"),
            kind,
            oif: None,
            gateway: None,
        });
        let f = detect(&with_fib(inv, &[("10.244.0.99", answer)]));
        assert_says(&render(&f[0]), &[says]);
    }
}

#[test]
fn overlaps_name_the_range_and_the_exclusion_that_fixes_them() {
    let mut inv = inventory(vec![]);
    inv.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
    let f = detect(&inv);
    assert_says(
        &render(&f[2]),
        &[
            "Cilium's router IP 10.244.4.251 of node node-a",
            "add \"10.244.4.0..10.244.4.255\" to spec.excludeIps of Subnet ovn-default",
            "cut from the end of 10.244.0.0/16",
        ],
    );
    let cns = Arc::make_mut(&mut inv.cilium_nodes);
    cns[0].addresses.clear();
    inv.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.127")])]);
    let f = detect(&inv);
    assert_says(&render(&f[0]), &["allocation range 10.244.4.0/24"]);
}
