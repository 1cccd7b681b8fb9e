//! Calico's tunnel addresses: the kernel's (`tunl0` on this node) and the
//! `projectcalico.org/*` annotations of every node. Addresses from real
//! objects: 10.42.0.1 is calico#5705's `ipv4IPIPTunnelAddr`, 10.233.67.0
//! calico#9086's `ipv4VXLANTunnelAddr` (tests/corpus/realworld/calico).

use std::sync::Arc;

use super::{row, rows};
use crate::{
    detect::{FindingKind::TunnelIpCollision, Remedy, Scope::*, detect},
    inventory::{
        ClusterState, CniNode, FibResult, HostNetwork, Inventory, Link, LocalAddress,
        Role::Tunnel,
        Source,
        fixtures::{ME, OTHER, ip, pod},
    },
};

const MY_TUNNEL: &str = "10.42.0.1";
const OTHER_TUNNEL: &str = "10.233.67.0";

/// A node as Calico in IPIP mode lays it: the tunnel address on `tunl0`, no
/// Cilium; both nodes' tunnel addresses in their Nodes' annotations.
fn calico_node(pods: Vec<crate::inventory::Pod>) -> Inventory {
    let annotated = |node: &str, a: &str| {
        let mut n = CniNode {
            name: node.into(),
            ..CniNode::default()
        };
        n.add(ip(a), Tunnel, Source::CalicoNodeAnnotation);
        n
    };
    let mut host = HostNetwork::default();
    for (index, name) in [(1, "lo"), (2, "eth0"), (3, "tunl0")] {
        host.links.push(Link {
            index,
            name: name.into(),
        });
    }
    for (a, device) in [
        ("127.0.0.1", "lo"),
        ("192.168.1.10", "eth0"),
        (MY_TUNNEL, "tunl0"),
    ] {
        host.addresses.push(LocalAddress {
            ip: ip(a),
            device: device.into(),
        });
    }
    let own: Vec<_> = pods
        .iter()
        .filter(|p| p.node.as_deref() == Some(ME))
        .flat_map(|p| p.ips.iter().map(|i| i.ip))
        .collect();
    for a in own {
        let local = host.addresses.iter().any(|x| x.ip == a);
        let answer = if local {
            FibResult::Local { oif: Some(3) }
        } else {
            FibResult::Unicast {
                oif: Some(2),
                gateway: None,
            }
        };
        host.fib.insert(a, answer);
    }
    Inventory {
        node: ME.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(host),
        cluster: ClusterState {
            pods: Arc::new(pods),
            annotated_nodes: Arc::new(vec![
                annotated(ME, MY_TUNNEL),
                annotated(OTHER, OTHER_TUNNEL),
            ]),
            ..Default::default()
        },
        ..Inventory::default()
    }
}

#[test]
fn a_pod_on_a_calico_tunnel_address_is_found_on_both_sides_with_calicos_fix() {
    let inv = calico_node(vec![
        pod("web", ME, &[MY_TUNNEL]),
        pod("api", ME, &[OTHER_TUNNEL]),
        pod("db", OTHER, &[MY_TUNNEL]),
        pod("clean", ME, &["10.42.0.7"]),
    ]);
    let findings = detect(&inv);
    let mut got = rows(&findings);
    got.sort();
    let mut want = vec![
        row(
            TunnelIpCollision,
            SameNode,
            MY_TUNNEL,
            "web",
            ME,
            Tunnel,
            Some("tunl0"),
        ),
        row(
            TunnelIpCollision,
            CrossNode,
            OTHER_TUNNEL,
            "api",
            OTHER,
            Tunnel,
            None,
        ),
        row(
            TunnelIpCollision,
            CrossNode,
            MY_TUNNEL,
            "db",
            ME,
            Tunnel,
            Some("tunl0"),
        ),
    ];
    want.sort();
    assert_eq!(got, want);
    for f in &findings {
        assert!(
            matches!(f.remedy, Remedy::CheckCalicoIpam { ref node } if *node == f.owner.node),
            "{f:?}"
        );
    }
}

#[test]
fn the_kernel_alone_names_a_tunnel_device_when_no_annotation_says_so() {
    let mut inv = calico_node(vec![pod("web", ME, &[MY_TUNNEL])]);
    inv.cluster.annotated_nodes = Arc::default();
    assert_eq!(
        rows(&detect(&inv)),
        [row(
            TunnelIpCollision,
            SameNode,
            MY_TUNNEL,
            "web",
            ME,
            Tunnel,
            Some("tunl0")
        )]
    );
}
