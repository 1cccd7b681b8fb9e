//! Inventories shaped like the cozystack report's nodes (seed 001), shared by
//! the detector's and the reporting layer's tests: pod CIDR 10.244.0.0/16 flat
//! in kube-ovn; node podCIDRs 10.244.<n>.0/24 for Cilium.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use ipnet::IpNet;

use super::{
    ClusterState, CniNode, FibResult, HostNetwork, Inventory, IpRange, IpSource, Link,
    LocalAddress, Pod, PodIp, Role, Route, RouteKind, Source, Subnet,
};

pub(crate) const ME: &str = "node-a";
pub(crate) const OTHER: &str = "node-b";

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().expect("test IP")
}

pub(crate) fn net(s: &str) -> IpNet {
    s.parse().expect("test prefix")
}

/// A node laid out as kube-ovn + chained Cilium lay it: lo, eth0, ovn0 with the
/// subnet route via the gateway (no per-pod routes), cilium_host/cilium_net.
pub(crate) fn host() -> HostNetwork {
    let link = |index, name: &str| Link {
        index,
        name: name.into(),
    };
    let addr = |a: &str, device: &str| LocalAddress {
        ip: ip(a),
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
            link(1, "lo"),
            link(2, "eth0"),
            link(3, "ovn0"),
            link(4, "cilium_host"),
            link(5, "cilium_net"),
            link(6, "kube-ipvs0"),
        ],
        addresses: vec![
            addr("127.0.0.1", "lo"),
            addr("::1", "lo"),
            addr("192.168.100.11", "eth0"),
            addr("10.244.0.2", "ovn0"),
            addr("10.244.4.251", "cilium_host"),
            addr("fd00:10:244:4::1f", "cilium_host"),
            addr("10.96.0.10", "kube-ipvs0"),
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
        fib: BTreeMap::default(),
        namespaces: super::PodNamespaces::default(),
        dad_failed: Vec::new(),
    }
}

/// A CiliumNode as its spec lists them: router IPs in `spec.addresses`,
/// `spec.ingress`, `spec.health`, `spec.ipam.podCIDRs`.
pub(crate) fn cilium_node(
    name: &str,
    router: &[IpAddr],
    ingress: &[IpAddr],
    health: &[IpAddr],
    pod_cidrs: &[IpNet],
) -> CniNode {
    let mut cn = CniNode {
        name: name.into(),
        pod_cidrs: pod_cidrs.to_vec(),
        ..CniNode::default()
    };
    for (ips, role, source) in [
        (router, Role::Router, Source::SpecAddresses),
        (ingress, Role::Ingress, Source::SpecIngress),
        (health, Role::Health, Source::SpecHealth),
    ] {
        for ip in ips {
            cn.add(*ip, role, source);
        }
    }
    cn
}

pub(crate) fn cilium_nodes() -> Vec<CniNode> {
    vec![
        cilium_node(
            ME,
            &[ip("10.244.4.251"), ip("fd00:10:244:4::1f")],
            &[ip("10.244.4.12")],
            &[ip("10.244.4.104")],
            &[net("10.244.4.0/24")],
        ),
        cilium_node(
            OTHER,
            &[ip("10.244.1.182")],
            &[ip("10.244.1.12")],
            &[ip("10.244.1.243")],
            &[net("10.244.1.0/24")],
        ),
    ]
}

pub(crate) fn pod(name: &str, node: &str, ips: &[&str]) -> Pod {
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
        secondary: Vec::new(),
        phase: Some("Running".into()),
        created: None,
        logical_switch: None,
        terminating: false,
        controller: Some("ReplicaSet/rs".into()),
        default_network_elsewhere: false,
    }
}

/// The FIB answers the kernel gives on this node for `ips`, as the netlink adapter records them.
pub(crate) fn with_fib(mut inv: Inventory, answers: &[(&str, FibResult)]) -> Inventory {
    for (a, r) in answers {
        Arc::make_mut(&mut inv.host).fib.insert(ip(a), r.clone());
    }
    inv
}

pub(crate) fn unicast_via_ovn0() -> FibResult {
    FibResult::Unicast {
        oif: Some(3),
        gateway: Some(ip("10.244.0.1")),
    }
}

pub(crate) fn inventory(pods: Vec<Pod>) -> Inventory {
    let mut inv = Inventory {
        node: ME.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(host()),
        cluster: ClusterState {
            pods: Arc::new(pods),
            cilium_nodes: Arc::new(cilium_nodes()),
            annotated_nodes: Arc::default(),
            subnets: Arc::default(),
            ..Default::default()
        },
        ..Inventory::default()
    };
    // Every own-pod IP gets a lookup, as the adapter does: local for local addresses, else via ovn0.
    let own: Vec<IpAddr> = inv
        .cluster
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
        Arc::make_mut(&mut inv.host).fib.insert(a, r);
    }
    inv
}

pub(crate) fn ovn_default(exclude: &[(&str, &str)]) -> Subnet {
    Subnet {
        name: "ovn-default".into(),
        primary: true,
        cidrs: vec![net("10.244.0.0/16")],
        exclude: exclude
            .iter()
            .map(|(a, b)| IpRange {
                first: ip(a),
                last: ip(b),
            })
            .collect(),
        masqueraded: true,
        is_default: true,
    }
}

/// Cilium/Calico style: a /32 pod route in the main table (`dev lxc1234`) for
/// a pod whose IP is also an address of this node (on kube-ipvs0).
pub(crate) fn shadowed_pod_route() -> Inventory {
    let mut inv = inventory(vec![pod("shadowed", ME, &["10.96.0.10"])]);
    Arc::make_mut(&mut inv.host).links.push(Link {
        index: 7,
        name: "lxc1234".into(),
    });
    Arc::make_mut(&mut inv.host).routes.push(Route {
        table: 254,
        dst: net("10.96.0.10/32"),
        kind: RouteKind::Unicast,
        oif: Some(7),
        gateway: None,
    });
    inv
}
