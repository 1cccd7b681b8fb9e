//! Table tests of the detector. Addresses are the cozystack report's (seed 001):
//! pod CIDR 10.244.0.0/16 flat in kube-ovn; node podCIDRs 10.244.<n>.0/24 for Cilium.

use std::{net::IpAddr, sync::Arc};

use ipnet::IpNet;

use super::*;
use crate::inventory::{
    CiliumNode, FibResult, HostNetwork, IpRange, IpSource, Link, LocalAddress, Pod, PodIp, Route,
    RouteKind, Subnet,
};

const ME: &str = "node-a";
const OTHER: &str = "node-b";

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test IP")
}

fn net(s: &str) -> IpNet {
    s.parse().expect("test prefix")
}

/// A node laid out as kube-ovn + chained Cilium lay it: lo, eth0, ovn0 with the
/// subnet route via the gateway (no per-pod routes), cilium_host/cilium_net.
fn host() -> HostNetwork {
    let link = |index, name: &str, kind: Option<&str>| Link {
        index,
        name: name.into(),
        kind: kind.map(Into::into),
        peer_index: None,
        peer_netns_id: None,
    };
    let addr = |a: &str, p, ifindex, device: &str| LocalAddress {
        ip: ip(a),
        prefix_len: p,
        ifindex,
        device: device.into(),
    };
    let route = |table, dst: &str, kind, oif, gw: Option<&str>| Route {
        table,
        dst: net(dst),
        kind,
        oif,
        gateway: gw.map(ip),
    };
    HostNetwork {
        links: vec![
            link(1, "lo", None),
            link(2, "eth0", None),
            link(3, "ovn0", Some("openvswitch")),
            link(4, "cilium_host", Some("veth")),
            link(5, "cilium_net", Some("veth")),
            link(6, "kube-ipvs0", Some("dummy")),
        ],
        addresses: vec![
            addr("127.0.0.1", 8, 1, "lo"),
            addr("::1", 128, 1, "lo"),
            addr("192.168.100.11", 24, 2, "eth0"),
            addr("10.244.0.2", 16, 3, "ovn0"),
            addr("10.244.4.251", 32, 4, "cilium_host"),
            addr("fd00:10:244:4::1f", 128, 4, "cilium_host"),
            addr("10.96.0.10", 32, 6, "kube-ipvs0"),
        ],
        routes: vec![
            route(
                254,
                "10.244.0.0/16",
                RouteKind::Unicast,
                Some(3),
                Some("10.244.0.1"),
            ),
            route(254, "192.168.100.0/24", RouteKind::Unicast, Some(2), None),
            route(255, "10.244.4.251/32", RouteKind::Local, Some(4), None),
            route(255, "10.96.0.10/32", RouteKind::Local, Some(6), None),
        ],
        fib: Default::default(),
    }
}

fn cilium_nodes() -> Vec<CiliumNode> {
    vec![
        CiliumNode {
            name: ME.into(),
            router: vec![ip("10.244.4.251"), ip("fd00:10:244:4::1f")],
            ingress: vec![ip("10.244.4.12")],
            health: vec![ip("10.244.4.104")],
            pod_cidrs: vec![net("10.244.4.0/24")],
        },
        CiliumNode {
            name: OTHER.into(),
            router: vec![ip("10.244.1.182")],
            ingress: vec![ip("10.244.1.12")],
            health: vec![ip("10.244.1.243")],
            pod_cidrs: vec![net("10.244.1.0/24")],
        },
    ]
}

fn pod(name: &str, node: &str, ips: &[&str]) -> Pod {
    Pod {
        namespace: "tenant".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        node: Some(node.into()),
        ips: ips
            .iter()
            .map(|a| PodIp {
                ip: ip(a),
                source: IpSource::Status,
            })
            .collect(),
        host_network: false,
        phase: Some("Running".into()),
    }
}

/// The FIB answers the kernel gives on this node for `ips`, as the netlink adapter records them.
fn with_fib(mut inv: Inventory, answers: &[(&str, FibResult)]) -> Inventory {
    for (a, r) in answers {
        inv.host.fib.insert(ip(a), r.clone());
    }
    inv
}

fn unicast_via_ovn0() -> FibResult {
    FibResult::Unicast {
        oif: Some(3),
        gateway: Some(ip("10.244.0.1")),
    }
}

fn inventory(pods: Vec<Pod>) -> Inventory {
    let mut inv = Inventory {
        node: ME.into(),
        router_device: "cilium_host".into(),
        host: host(),
        pods: Arc::new(pods),
        cilium_nodes: Arc::new(cilium_nodes()),
        subnets: Arc::default(),
    };
    // Every own-pod IP gets a lookup, as the adapter does: local for local addresses, else via ovn0.
    let own: Vec<IpAddr> = inv
        .pods
        .iter()
        .filter(|p| p.node.as_deref() == Some(ME))
        .flat_map(|p| p.ips.iter().map(|i| i.ip))
        .collect();
    for a in own {
        let local = inv.host.addresses.iter().any(|x| x.ip == a);
        let r = if local {
            FibResult::Local { oif: Some(1) }
        } else {
            unicast_via_ovn0()
        };
        inv.host.fib.insert(a, r);
    }
    inv
}

/// (kind, scope, ip, pod name, owner node, role, device) of each finding.
type Row = (
    FindingKind,
    Scope,
    IpAddr,
    String,
    String,
    Role,
    Option<String>,
);

fn rows(findings: &[Finding]) -> Vec<Row> {
    findings
        .iter()
        .map(|f| {
            (
                f.kind,
                f.scope,
                f.ip,
                f.pod.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
                f.owner.node.clone(),
                f.owner.role,
                f.owner.device.clone(),
            )
        })
        .collect()
}

fn row(
    kind: FindingKind,
    scope: Scope,
    a: &str,
    pod: &str,
    owner: &str,
    role: Role,
    device: Option<&str>,
) -> Row {
    (
        kind,
        scope,
        ip(a),
        pod.into(),
        owner.into(),
        role,
        device.map(Into::into),
    )
}

use FindingKind::*;
use Role::*;
use Scope::*;

#[test]
fn detector_table() {
    struct Case {
        name: &'static str,
        inv: Inventory,
        want: Vec<Row>,
    }
    let pending_on_ingress = {
        // The loud case: Cilium refused the sandbox, so the pod has no status IP,
        // only the one kube-ovn assigned in its annotation.
        let mut p = pod("pg-pending", ME, &["10.244.4.12"]);
        p.ips[0].source = IpSource::Annotation;
        p.phase = Some("Pending".into());
        p
    };
    let cases = vec![
        Case {
            name: "clean node: pods off every infrastructure address",
            inv: inventory(vec![
                pod("web", ME, &["10.244.0.35"]),
                pod("db", OTHER, &["10.244.0.65"]),
            ]),
            want: vec![],
        },
        Case {
            name: "silent: pod on this node's router IP (cilium_host)",
            inv: inventory(vec![pod("postgres-0", ME, &["10.244.4.251"])]),
            want: vec![row(
                RouterIpCollision,
                SameNode,
                "10.244.4.251",
                "postgres-0",
                ME,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "loud: pending pod on this node's ingress IP, IP only in the kube-ovn annotation",
            inv: inventory(vec![pending_on_ingress]),
            want: vec![row(
                IngressIpCollision,
                SameNode,
                "10.244.4.12",
                "pg-pending",
                ME,
                Ingress,
                None,
            )],
        },
        Case {
            name: "pod here on another node's router IP",
            inv: inventory(vec![pod("api", ME, &["10.244.1.182"])]),
            want: vec![row(
                RouterIpCollision,
                CrossNode,
                "10.244.1.182",
                "api",
                OTHER,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "pod here on another node's ingress IP",
            inv: inventory(vec![pod("api", ME, &["10.244.1.12"])]),
            want: vec![row(
                IngressIpCollision,
                CrossNode,
                "10.244.1.12",
                "api",
                OTHER,
                Ingress,
                None,
            )],
        },
        Case {
            name: "health IP of this node and of another node",
            inv: inventory(vec![
                pod("h1", ME, &["10.244.4.104"]),
                pod("h2", ME, &["10.244.1.243"]),
            ]),
            want: vec![
                row(
                    HealthIpCollision,
                    CrossNode,
                    "10.244.1.243",
                    "h2",
                    OTHER,
                    Health,
                    Some("lxc_health"),
                ),
                row(
                    HealthIpCollision,
                    SameNode,
                    "10.244.4.104",
                    "h1",
                    ME,
                    Health,
                    Some("lxc_health"),
                ),
            ],
        },
        Case {
            name: "pod elsewhere on this node's router IP: the owner node reports it",
            inv: inventory(vec![pod("webhook", OTHER, &["10.244.4.251"])]),
            want: vec![row(
                RouterIpCollision,
                CrossNode,
                "10.244.4.251",
                "webhook",
                ME,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "pod elsewhere on this node's ingress IP",
            inv: inventory(vec![pod("webhook", OTHER, &["10.244.4.12"])]),
            want: vec![row(
                IngressIpCollision,
                CrossNode,
                "10.244.4.12",
                "webhook",
                ME,
                Ingress,
                None,
            )],
        },
        Case {
            name: "pod elsewhere on another node's address is that node's business",
            inv: inventory(vec![pod("x", OTHER, &["10.244.1.182"])]),
            want: vec![],
        },
        Case {
            name: "IPv6 router IP",
            inv: inventory(vec![pod("v6", ME, &["fd00:10:244:4::1f"])]),
            want: vec![row(
                RouterIpCollision,
                SameNode,
                "fd00:10:244:4::1f",
                "v6",
                ME,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "dual stack: v4 clean, v6 on the router IP gives one finding for the v6 IP",
            inv: inventory(vec![pod("ds", ME, &["10.244.0.77", "fd00:10:244:4::1f"])]),
            want: vec![row(
                RouterIpCollision,
                SameNode,
                "fd00:10:244:4::1f",
                "ds",
                ME,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "pod on another local address (kube-ipvs0)",
            inv: inventory(vec![pod("svc-clash", ME, &["10.96.0.10"])]),
            want: vec![row(
                LocalAddressCollision,
                SameNode,
                "10.96.0.10",
                "svc-clash",
                ME,
                Local,
                Some("kube-ipvs0"),
            )],
        },
        Case {
            name: "host-network and terminated pods are not findings",
            inv: {
                let mut hn = pod("kube-proxy", ME, &["10.244.4.251"]);
                hn.host_network = true;
                let mut done = pod("job", ME, &["10.244.4.251"]);
                done.phase = Some("Succeeded".into());
                let mut failed = pod("crash", OTHER, &["10.244.4.251"]);
                failed.phase = Some("Failed".into());
                inventory(vec![hn, done, failed])
            },
            want: vec![],
        },
        Case {
            name: "unscheduled pod is skipped",
            inv: {
                let mut p = pod("pending", ME, &["10.244.4.251"]);
                p.node = None;
                inventory(vec![p])
            },
            want: vec![],
        },
    ];
    for c in cases {
        assert_eq!(rows(&detect(&c.inv)), c.want, "case: {}", c.name);
    }
}

#[test]
fn pod_on_router_ip_is_found_through_the_fib_lookup_alone() {
    // No CiliumNode and no address list: only the kernel's answer that the IP is local.
    let mut inv = inventory(vec![pod("postgres-0", ME, &["10.244.4.251"])]);
    Arc::make_mut(&mut inv.cilium_nodes).clear();
    inv.host.addresses.clear();
    inv.host
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
    assert_eq!(f[0].fib.as_deref(), Some("local dev cilium_host"));
}

#[test]
fn pod_route_shadowed_by_a_local_address_names_the_route() {
    // Cilium/Calico style: a /32 per pod in the main table, but the IP is also on kube-ipvs0.
    let mut inv = inventory(vec![pod("shadowed", ME, &["10.96.0.10"])]);
    inv.host.links.push(Link {
        index: 7,
        name: "lxc1234".into(),
        kind: Some("veth".into()),
        peer_index: Some(2),
        peer_netns_id: Some(0),
    });
    inv.host.routes.push(Route {
        table: 254,
        dst: net("10.96.0.10/32"),
        kind: RouteKind::Unicast,
        oif: Some(7),
        gateway: None,
    });
    let f = detect(&inv);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].kind, LocalAddressCollision);
    assert_eq!(
        f[0].shadowed_route.as_deref(),
        Some("10.96.0.10/32 dev lxc1234")
    );
    assert!(
        f[0].message
            .contains("10.96.0.10/32 dev lxc1234 is shadowed"),
        "{}",
        f[0].message
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
        inv.host.routes.push(Route {
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
            f[0].message.contains(&format!("ends in {word}")),
            "{}",
            f[0].message
        );
        assert_eq!(f[0].fib.as_deref(), Some(word));
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
fn messages_name_ip_owner_impact_and_fix() {
    let inv = inventory(vec![
        pod("postgres-0", ME, &["10.244.4.251"]),
        pod("api", ME, &["10.244.1.182"]),
    ]);
    let f = detect(&inv);
    let router_here = &f[1];
    assert_eq!(router_here.ip, ip("10.244.4.251"));
    for needle in [
        "Pod tenant/postgres-0",
        "10.244.4.251",
        "router IP",
        "node-a on device cilium_host",
        "kubelet probes",
        "Fix:",
        "excludeIps",
    ] {
        assert!(
            router_here.message.contains(needle),
            "{needle:?} missing in {}",
            router_here.message
        );
    }
    let cross = &f[0];
    assert!(
        cross
            .message
            .contains("host network of node node-b cannot reach it"),
        "{}",
        cross.message
    );
}

#[test]
fn findings_serialize_to_the_json_contract() {
    let inv = inventory(vec![pod("postgres-0", ME, &["10.244.4.251"])]);
    let v = serde_json::to_value(detect(&inv)).expect("serializes");
    let f = &v[0];
    assert_eq!(f["kind"], "RouterIPCollision");
    assert_eq!(f["scope"], "same-node");
    assert_eq!(f["ip"], "10.244.4.251");
    assert_eq!(f["pod"]["namespace"], "tenant");
    assert_eq!(f["pod"]["name"], "postgres-0");
    assert_eq!(f["pod"]["uid"], "uid-postgres-0");
    assert_eq!(f["owner"]["node"], ME);
    assert_eq!(f["owner"]["role"], "router");
    assert_eq!(f["owner"]["device"], "cilium_host");
    assert!(f["message"].as_str().is_some_and(|m| !m.is_empty()));
}

fn ovn_default(exclude: &[(&str, &str)]) -> Subnet {
    Subnet {
        name: "ovn-default".into(),
        cidrs: vec![net("10.244.0.0/16")],
        exclude: exclude
            .iter()
            .map(|(a, b)| IpRange {
                first: ip(a),
                last: ip(b),
            })
            .collect(),
    }
}

#[test]
fn allocator_overlap_is_found_in_the_cozystack_configuration() {
    // ovn-default over the whole pod CIDR with only the gateway excluded, while
    // Cilium takes its addresses from node-a's podCIDR 10.244.4.0/24 in the same /16.
    let mut inv = inventory(vec![]);
    inv.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
    let f = detect(&inv);
    assert_eq!(
        rows(&f),
        vec![
            row(
                AllocatorOverlap,
                SameNode,
                "10.244.4.12",
                "",
                ME,
                Ingress,
                None
            ),
            row(
                AllocatorOverlap,
                SameNode,
                "10.244.4.104",
                "",
                ME,
                Health,
                Some("lxc_health")
            ),
            row(
                AllocatorOverlap,
                SameNode,
                "10.244.4.251",
                "",
                ME,
                Router,
                Some("cilium_host")
            ),
        ]
    );
    let router = &f[2];
    assert_eq!(router.subnet.as_deref(), Some("ovn-default"));
    assert_eq!(router.cilium_range.as_deref(), Some("10.244.4.0/24"));
    assert!(
        router
            .message
            .contains("add \"10.244.4.0..10.244.4.255\" to spec.excludeIps of Subnet ovn-default"),
        "{}",
        router.message
    );
    assert!(router.pod.is_none());
}

#[test]
fn allocator_overlap_is_not_found_once_cilium_s_range_is_excluded() {
    // The fix of seed 001's alternative: Cilium's pool is a /21 cut from the end of
    // the pod CIDR, and kube-ovn excludes exactly that /21.
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cilium_nodes)[0].pod_cidrs = vec![net("10.244.252.0/24")];
    Arc::make_mut(&mut inv.cilium_nodes)[0].router = vec![ip("10.244.252.77")];
    Arc::make_mut(&mut inv.cilium_nodes)[0].ingress = vec![ip("10.244.252.12")];
    Arc::make_mut(&mut inv.cilium_nodes)[0].health = vec![];
    inv.host.addresses.retain(|a| a.device != "cilium_host");
    inv.subnets = Arc::new(vec![ovn_default(&[
        ("10.244.0.1", "10.244.0.1"),
        ("10.244.248.0", "10.244.255.255"),
    ])]);
    assert_eq!(rows(&detect(&inv)), vec![]);
}

#[test]
fn a_range_partly_excluded_is_still_an_overlap_before_any_address_is_taken() {
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cilium_nodes)[0].router.clear();
    Arc::make_mut(&mut inv.cilium_nodes)[0].ingress.clear();
    Arc::make_mut(&mut inv.cilium_nodes)[0].health.clear();
    // Only the first half of 10.244.4.0/24 is excluded.
    inv.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.127")])]);
    let f = detect(&inv);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!((f[0].kind, f[0].ip), (AllocatorOverlap, ip("10.244.4.128")));
    assert!(
        f[0].message.contains("allocation range 10.244.4.0/24"),
        "{}",
        f[0].message
    );
}

#[test]
fn other_nodes_overlaps_are_theirs_to_report() {
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cilium_nodes).retain(|c| c.name == OTHER);
    inv.subnets = Arc::new(vec![ovn_default(&[])]);
    assert_eq!(rows(&detect(&inv)), vec![]);
}
