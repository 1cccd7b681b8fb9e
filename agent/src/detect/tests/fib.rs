//! What the kernel's FIB answer decides: local delivery, shadowed routes, blackholes.

use std::sync::Arc;

use super::{row, rows};
use crate::{
    detect::{Cause, FindingKind::*, Role::*, Scope::*, detect},
    inventory::{
        FibResult, Route, RouteKind,
        fixtures::{ME, inventory, ip, net, pod, shadowed_pod_route, with_fib},
    },
};

#[test]
fn pod_on_router_ip_is_found_through_the_fib_lookup_alone() {
    // No CiliumNode and no address list: only the kernel's answer that the IP is local.
    let mut inv = inventory(vec![pod("postgres-0", ME, &["10.244.4.251"])]);
    Arc::make_mut(&mut inv.cluster.cilium_nodes).clear();
    Arc::make_mut(&mut inv.host).addresses.clear();
    Arc::make_mut(&mut inv.host)
        .fib
        .insert(ip("10.244.4.251"), FibResult::Local { oif: Some(4) });
    let f = detect(&inv);
    assert_eq!(
        rows(&f),
        vec![row(
            RouterIpCollision,
            SameNode,
            "10.244.4.251",
            "postgres-0",
            ME,
            Router,
            Some("cilium_host")
        )]
    );
    assert!(
        matches!(&f[0].cause, Cause::Collision { fib: Some(t), .. } if t == "local dev cilium_host"),
        "{:?}",
        f[0].cause
    );
}

#[test]
fn pod_route_shadowed_by_a_local_address_names_the_route() {
    // Cilium/Calico style: a /32 per pod in the main table, but the IP is also on kube-ipvs0.
    let f = detect(&shadowed_pod_route());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].kind, LocalAddressCollision);
    assert!(
        matches!(&f[0].cause, Cause::Collision { shadowed_route: Some(r), .. } if r == "10.96.0.10/32 dev lxc1234"),
        "{:?}",
        f[0].cause
    );
}

#[test]
fn host_route_blackholes_of_every_kind_are_found() {
    for (answer, word) in [
        (FibResult::Blackhole, "blackhole"),
        (FibResult::Unreachable, "unreachable"),
        (FibResult::Prohibit, "prohibit"),
        (FibResult::NoRoute, "no route"),
    ] {
        let mut inv = inventory(vec![pod("lost", ME, &["10.244.0.99"])]);
        Arc::make_mut(&mut inv.host).routes.push(Route {
            table: 254,
            dst: net("10.244.0.99/32"),
            kind: match answer {
                FibResult::Blackhole => RouteKind::Blackhole,
                FibResult::Unreachable => RouteKind::Unreachable,
                FibResult::Prohibit => RouteKind::Prohibit,
                _ => RouteKind::Throw,
            },
            oif: None,
            gateway: None,
        });
        let inv = with_fib(inv, &[("10.244.0.99", answer.clone())]);
        let f = detect(&inv);
        assert_eq!(
            rows(&f),
            vec![row(
                HostRouteBlackhole,
                SameNode,
                "10.244.0.99",
                "lost",
                ME,
                Local,
                None
            )],
            "{word}"
        );
        assert!(
            matches!(&f[0].cause, Cause::Blackhole { dead_end, route: Some(_), .. } if dead_end.to_string() == word),
            "{:?}",
            f[0].cause
        );
    }
}

#[test]
fn a_collision_wins_over_a_blackhole_for_the_same_ip() {
    // Ingress IP is in no kernel table; suppose the lookup also fails: still one finding.
    let inv = with_fib(
        inventory(vec![pod("p", ME, &["10.244.4.12"])]),
        &[("10.244.4.12", FibResult::Blackhole)],
    );
    assert_eq!(
        rows(&detect(&inv)),
        vec![row(
            IngressIpCollision,
            SameNode,
            "10.244.4.12",
            "p",
            ME,
            Ingress,
            None
        )]
    );
}

#[test]
fn the_same_pod_ip_listed_twice_gives_one_finding() {
    let inv = inventory(vec![pod("dup", ME, &["10.244.4.251", "10.244.4.251"])]);
    assert_eq!(detect(&inv).len(), 1);
}

#[test]
fn an_address_the_pod_was_refused_is_checked_for_owners_not_routes() {
    use crate::inventory::IpSource;
    // kubelet's Event names the address Cilium refused: the pod never had it, so
    // a dead-end route to it says nothing about the pod; an owner does.
    let mut refused = pod("waiting", ME, &["10.244.0.99"]);
    refused.ips[0].source = IpSource::Event;
    let inv = with_fib(
        inventory(vec![refused.clone()]),
        &[("10.244.0.99", FibResult::Blackhole)],
    );
    assert!(detect(&inv).is_empty());
    let mut gateway = pod("gateway", ME, &["10.244.4.12"]);
    gateway.ips[0].source = IpSource::Event;
    let f = detect(&inventory(vec![gateway]));
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!((f[0].kind, f[0].scope), (IngressIpCollision, SameNode));
}
