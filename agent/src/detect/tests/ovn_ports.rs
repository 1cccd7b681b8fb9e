//! ovn-kubernetes' router ports: the join and transit addresses its Nodes
//! publish or derive from `k8s.ovn.org/node-id`. Annotations from real Nodes
//! (tests/corpus/realworld/ovn-kubernetes): OKEP-5521's kind worker (node-id 3,
//! transit 100.88.0.3, join derived 100.64.0.3) and an OpenShift node
//! (`node-gateway-router-lrp-ifaddrs` 100.64.0.4, transit 100.88.0.4).

use std::sync::Arc;

use super::{row, rows};
use crate::{
    detect::{FindingKind::GatewayIpCollision, Remedy, Reserver, Scope::*, detect},
    inventory::{
        ClusterState, CniNode, HostNetwork, Inventory, LocalAddress,
        Role::OvnRouterPort,
        Source,
        fixtures::{ME, OTHER, ip, pod},
    },
};

/// A node's router ports as kube::objects reads them from its Node's
/// annotations (tests there read the same real values).
fn annotated(node: &str, ports: &[(&str, Source)]) -> CniNode {
    let mut n = CniNode {
        name: node.into(),
        ..CniNode::default()
    };
    for (a, source) in ports {
        n.add(ip(a), OvnRouterPort, *source);
    }
    n
}

/// Two ovn-kubernetes nodes as their real Nodes annotate them; this node's
/// kernel holds only its uplink and management port (OVN's router ports are
/// not the host's).
fn ovn_nodes(pods: Vec<crate::inventory::Pod>) -> Inventory {
    let mut host = HostNetwork::default();
    for (a, device) in [("172.18.0.3", "eth0"), ("10.244.2.2", "ovn-k8s-mp0")] {
        host.addresses.push(LocalAddress {
            ip: ip(a),
            device: device.into(),
        });
    }
    Inventory {
        node: ME.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(host),
        cluster: ClusterState {
            pods: Arc::new(pods),
            annotated_nodes: Arc::new(vec![
                annotated(
                    ME,
                    &[
                        ("100.64.0.3", Source::OvnNodeId),
                        ("100.88.0.3", Source::OvnTransitAnnotation),
                    ],
                ),
                annotated(
                    OTHER,
                    &[
                        ("100.64.0.4", Source::OvnJoinAnnotation),
                        ("100.88.0.4", Source::OvnTransitAnnotation),
                    ],
                ),
            ]),
            ..Default::default()
        },
        ..Inventory::default()
    }
}

#[test]
fn a_pod_on_a_join_or_transit_address_is_found_on_this_node_and_another() {
    let inv = ovn_nodes(vec![
        pod("web", ME, &["100.64.0.3"]),
        pod("api", ME, &["100.64.0.4"]),
        pod("db", OTHER, &["100.88.0.3"]),
        pod("clean", ME, &["10.244.2.7"]),
        pod("elsewhere", OTHER, &["10.129.0.9"]),
    ]);
    let findings = detect(&inv);
    let mut got = rows(&findings);
    got.sort();
    let mut want = vec![
        row(
            GatewayIpCollision,
            SameNode,
            "100.64.0.3",
            "web",
            ME,
            OvnRouterPort,
            None,
        ),
        row(
            GatewayIpCollision,
            CrossNode,
            "100.64.0.4",
            "api",
            OTHER,
            OvnRouterPort,
            None,
        ),
        row(
            GatewayIpCollision,
            CrossNode,
            "100.88.0.3",
            "db",
            ME,
            OvnRouterPort,
            None,
        ),
    ];
    want.sort();
    assert_eq!(got, want);
    for f in &findings {
        assert!(
            matches!(
                f.remedy,
                Remedy::ReservedAddress {
                    by: Reserver::OvnRouterPort
                }
            ),
            "{f:?}"
        );
    }
}

#[test]
fn a_healthy_ovn_kubernetes_node_gives_nothing() {
    let inv = ovn_nodes(vec![
        pod("web", ME, &["10.244.2.5"]),
        pod("api", OTHER, &["10.129.0.5"]),
    ]);
    assert_eq!(rows(&detect(&inv)), []);
}

#[test]
fn no_join_address_is_derived_where_the_cluster_moved_its_join_subnet() {
    // A healthy cluster whose pod ranges overlap 100.64.0.0/16 must move the
    // join subnet: node-b's subnet shows it, so node-a's node-id names nothing.
    let mut inv = ovn_nodes(vec![pod("web", OTHER, &["100.64.0.3"])]);
    let mut nodes = (*inv.cluster.annotated_nodes).clone();
    nodes[1].ovn_subnets = vec!["100.64.2.0/23".parse().expect("CIDR")];
    inv.cluster.annotated_nodes = Arc::new(nodes.clone());
    assert!(
        !detect(&inv).iter().any(|f| f.kind == GatewayIpCollision),
        "a derived join address on a cluster that moved its join subnet"
    );
    // Or a node publishes its join address outside the default.
    nodes[1].ovn_subnets.clear();
    nodes[1].addresses.clear();
    nodes[1].add(ip("100.99.0.4"), OvnRouterPort, Source::OvnJoinAnnotation);
    inv.cluster.annotated_nodes = Arc::new(nodes);
    assert!(!detect(&inv).iter().any(|f| f.kind == GatewayIpCollision));
    // The default everywhere: derived, and found.
    let inv = ovn_nodes(vec![pod("web", OTHER, &["100.64.0.3"])]);
    assert!(detect(&inv).iter().any(|f| f.kind == GatewayIpCollision));
}
