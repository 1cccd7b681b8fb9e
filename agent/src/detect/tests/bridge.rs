//! A bridge that kept its previous pod range's gateway (flannel's `cni0` after
//! the node got a new podCIDR).

use std::sync::Arc;

use crate::{
    detect::{Cause, FindingKind, NodeProblem, detect},
    inventory::{
        ClusterState, HostNetwork, Inventory, Link, LocalAddress, NodeFacts, Route, RouteKind,
        TABLE_MAIN,
        fixtures::{ME, OTHER, ip, net, pod},
    },
};

fn node(name: &str, cidr: &str) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        pod_cidrs: vec![net(cidr)],
        ..NodeFacts::default()
    }
}

/// This node's `cni0` holds `bridge` with its connected route; its podCIDR is 10.244.5.0/24.
fn laid_out(bridge: &str) -> Inventory {
    let mut host = HostNetwork::default();
    host.links.push(Link {
        index: 4,
        name: "cni0".into(),
    });
    let addr: ipnet::IpNet = net(bridge);
    host.addresses.push(LocalAddress {
        ip: addr.addr(),
        device: "cni0".into(),
    });
    host.routes.push(Route {
        table: TABLE_MAIN,
        dst: addr.trunc(),
        kind: RouteKind::Unicast,
        oif: Some(4),
        gateway: None,
    });
    let me = node(ME, "10.244.5.0/24");
    Inventory {
        node: ME.into(),
        host: Arc::new(host),
        node_facts: Some(me.clone()),
        cluster: ClusterState {
            nodes: Arc::new(vec![me, node(OTHER, "10.244.1.0/24")]),
            pods: Arc::new(vec![
                pod("web-0", OTHER, &["10.244.1.7"]),
                pod("web-1", OTHER, &["10.244.1.8"]),
                pod("elsewhere", OTHER, &["10.244.9.8"]),
            ]),
            ..Default::default()
        },
        ..Inventory::default()
    }
}

#[test]
fn a_bridge_on_its_previous_range_names_the_node_owning_it_and_the_pods_cut_off() {
    let findings = detect(&laid_out("10.244.1.1/24"));
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(f.kind, FindingKind::StaleBridgeAddress);
    assert_eq!(f.ip, Some(ip("10.244.1.1")));
    let Cause::Node(NodeProblem::StaleBridge {
        owner,
        pods,
        unreachable,
        bridge,
        ..
    }) = &f.cause
    else {
        panic!("{f:?}")
    };
    assert_eq!(
        (owner.as_str(), *unreachable, bridge.as_str()),
        (OTHER, 2, "cni0")
    );
    let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["web-0", "web-1"]);
}

#[test]
fn a_bridge_on_this_nodes_range_or_an_unknown_range_is_no_finding() {
    assert!(detect(&laid_out("10.244.5.1/24")).is_empty());
    let mut unknown = laid_out("10.244.1.1/24");
    unknown.node_facts = None;
    assert!(
        detect(&unknown).is_empty(),
        "no pod range known: nothing to compare with"
    );
    // containerd's default bridge left on the node: nobody's range.
    assert!(detect(&laid_out("10.88.0.1/16")).is_empty());
}
