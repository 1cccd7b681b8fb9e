//! The plan's overlaps that concern a node: those its agent finds (one of
//! its own ranges on a side, from what it reads: its Node, CiliumNodes,
//! Subnets, Calico's pools), and a node's address in an attachment whose
//! pods sit on a node's interface.

use std::sync::Arc;

use super::tests::{calico_in_use, net, node};
use super::*;
use crate::{
    detect::{Pods, detect, detect_with, owners::Index},
    inventory::{CniNode, NodeAddress},
};

fn inventory(me: &str, cluster: ClusterState) -> Inventory {
    let facts = cluster.nodes.iter().find(|n| n.name == me).cloned();
    Inventory::new(me, "cilium_host", Arc::default(), facts, cluster)
}

/// Each plan finding's (node, changed object, other object).
fn plan_findings(found: &[Finding]) -> Vec<(String, String, String)> {
    found
        .iter()
        .filter_map(|f| match &f.cause {
            Cause::Plan(o) => Some((
                f.owner.node.clone(),
                o.change.owner.object.clone(),
                o.other.owner.object.clone(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_calico_pool_in_use_over_the_nodes_own_address_is_found_by_that_node_alone() {
    let (calico, pod) = calico_in_use("10.0.0.0/16");
    let cluster = ClusterState {
        calico,
        pods: Arc::new(vec![pod]),
        nodes: Arc::new(vec![
            node("w1", "10.244.1.0/24", "10.0.3.7"),
            node("w2", "10.244.2.0/24", "192.168.1.12"),
        ]),
        ..ClusterState::default()
    };
    let expected = [(
        "w1".to_owned(),
        "default-ipv4-ippool".to_owned(),
        "w1".to_owned(),
    )];
    assert_eq!(
        plan_findings(&detect(&inventory("w1", cluster.clone()))),
        expected
    );
    assert_eq!(
        plan_findings(&detect(&inventory("w2", cluster.clone()))),
        []
    );
    // An audit's pass over each node leaves the plan to its cluster-wide sweep.
    let inv = inventory("w1", cluster);
    let index = Index::of(&inv);
    assert_eq!(plan_findings(&detect_with(&inv, &index, Pods::Own)), []);
}

#[test]
fn one_pod_range_on_two_cilium_nodes_is_found_by_both_and_by_no_third() {
    let cilium = |name: &str, cidr: &str| CniNode {
        name: name.to_owned(),
        pod_cidrs: vec![net(cidr)],
        ..CniNode::default()
    };
    let cluster = ClusterState {
        cilium_nodes: Arc::new(vec![
            cilium("w1", "10.0.1.0/24"),
            cilium("w2", "10.0.1.0/25"),
            cilium("w3", "10.0.3.0/24"),
        ]),
        ..ClusterState::default()
    };
    for me in ["w1", "w2"] {
        let found = plan_findings(&detect(&inventory(me, cluster.clone())));
        assert_eq!(found.len(), 1, "{me}: {found:?}");
        assert_eq!(found[0].0, me);
        let sides = [found[0].1.as_str(), found[0].2.as_str()];
        assert!(sides.contains(&"w1") && sides.contains(&"w2"), "{found:?}");
    }
    assert_eq!(plan_findings(&detect(&inventory("w3", cluster))), []);
}

#[test]
fn a_node_with_no_range_of_its_own_builds_nothing() {
    let (calico, pod) = calico_in_use("10.0.0.0/16");
    let cluster = ClusterState {
        calico,
        pods: Arc::new(vec![pod]),
        nodes: Arc::new(vec![node("w2", "10.244.2.0/24", "10.0.3.9")]),
        ..ClusterState::default()
    };
    assert_eq!(node_overlaps(&inventory("w1", cluster.clone())), []);
    assert_eq!(node_overlaps(&inventory("w2", cluster)).len(), 1);
}

#[test]
fn a_nodes_two_addresses_in_one_pool_are_one_node_of_the_finding() {
    let mut w1 = node("w1", "10.244.1.0/24", "192.168.1.3");
    w1.addresses.push(NodeAddress {
        ip: "192.168.1.4".parse().expect("test address"),
        kind: "ExternalIP",
    });
    let w2 = node("w2", "10.244.2.0/24", "192.168.1.5");
    let owner = crate::inventory::PlanOwner {
        allocator: "MetalLB",
        kind: "IPAddressPool",
        object: "metallb-system/lan".to_owned(),
        tenant: false,
        field: "spec.addresses",
    };
    let range = crate::cni::plan::parse_entry("192.168.1.0/24").expect("test range");
    let pool = Planned::new(owner, Purpose::LoadBalancer, range, "192.168.1.0/24".into());
    let cluster = ClusterState {
        plan: Arc::new(vec![pool]),
        nodes: Arc::new(vec![w1, w2]),
        ..ClusterState::default()
    };
    let (found, _) = plan_overlaps(&cluster);
    assert_eq!(found.len(), 1, "{found:?}");
    let Cause::Plan(o) = &found[0].cause else {
        panic!("not a plan overlap: {:?}", found[0])
    };
    assert_eq!(o.other.owner.object, "w1");
    assert_eq!(o.more, (vec!["w2".to_owned()], 1));
}

#[test]
fn a_macvlan_range_holding_a_nodes_address_is_found_a_bridges_is_not() {
    // multus' quickstart: macvlan on eth0, host-local 192.168.1.200-216.
    let quickstart = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/realworld/multus/nad-multus-quickstart-macvlan-host-local-rangestart-rangeend.json"
    ))
    .expect("corpus file");
    let list: serde_json::Value = serde_json::from_str(&quickstart).expect("a List");
    let nad = list["items"][0].to_string();
    let read = |nad: &str| {
        let mut bad = Vec::new();
        let ranges = (crate::cni::multus::ATTACHMENTS.read)(nad, &mut bad);
        assert_eq!(bad, [], "{nad}");
        ranges
    };
    let found = |plan: Vec<Planned>, node_ip: &str| {
        let cluster = ClusterState {
            plan: Arc::new(plan),
            nodes: Arc::new(vec![node("w1", "10.244.1.0/24", node_ip)]),
            ..ClusterState::default()
        };
        plan_overlaps(&cluster).0
    };
    let hit = found(read(&nad), "192.168.1.205");
    assert_eq!(hit.len(), 1, "{hit:?}");
    let Cause::Plan(o) = &hit[0].cause else {
        panic!("not a plan overlap: {:?}", hit[0])
    };
    assert_eq!(o.change.owner.object, "macvlan-conf");
    assert_eq!(o.other.owner.object, "w1");
    assert_eq!(found(read(&nad), "192.168.1.10"), []);
    // The same range on a bridge of its own is no node's interface.
    let bridged = nad.replace(
        r#"\"type\": \"macvlan\", \"master\": \"eth0\""#,
        r#"\"type\": \"bridge\""#,
    );
    assert_ne!(bridged, nad);
    assert_eq!(found(read(&bridged), "192.168.1.205"), []);
}

#[test]
fn ciliums_cluster_pool_counts_in_audit_only_and_only_where_its_ipam_is_cluster_pool() {
    let config = |ipam: &str| crate::inventory::CiliumConfig {
        ipam: ipam.to_owned(),
        cluster_pool: vec![net("10.0.0.0/8")],
        ..crate::inventory::CiliumConfig::default()
    };
    let cluster = |ipam: &str| ClusterState {
        cilium_config: Some(Arc::new(config(ipam))),
        nodes: Arc::new(vec![node("w1", "10.244.1.0/24", "10.3.0.7")]),
        ..ClusterState::default()
    };
    let audited = |ipam: &str| -> Vec<(String, String)> {
        plan_overlaps(&cluster(ipam))
            .0
            .iter()
            .filter_map(|f| match &f.cause {
                Cause::Plan(o) => {
                    Some((o.change.owner.object.clone(), o.other.owner.object.clone()))
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        audited("cluster-pool"),
        [("cilium-config".to_owned(), "w1".to_owned())]
    );
    // The key stays, often at its default, in configs of other modes.
    assert_eq!(audited("kubernetes"), []);
    // The agent leaves the whole pool to audit (its default holds many a node
    // network it will not reach for thousands of nodes).
    assert_eq!(
        plan_findings(&detect(&inventory("w1", cluster("cluster-pool")))),
        []
    );
}
