//! The plan's owners the cluster's other objects tell: ovn-kubernetes'
//! internal subnets (what its Node annotations tell: the join, transit and
//! masquerade subnets), where nothing else on the cluster's network may give
//! an address; Calico's LoadBalancer pools, a load-balancer controller's.

use std::sync::Arc;

use super::{found, ip, metallb, net, node, planned, state};
use crate::{
    cni::ovn_kubernetes::{LRP_IFADDR, MASQUERADE_SUBNET, NODE_ID, TRANSIT_IFADDR},
    detect::plan::must_not_meet,
    inventory::{CalicoIpam, ClusterState, CniNode, IpPool, Planned, Purpose},
};

fn ovn_node(name: &str, internal: &[(&'static str, &str)]) -> CniNode {
    CniNode {
        name: name.to_owned(),
        ovn_internal: internal.iter().map(|(k, n)| (*k, net(n))).collect(),
        ..CniNode::default()
    }
}

fn with_ovn(s: ClusterState, nodes: Vec<CniNode>) -> ClusterState {
    ClusterState {
        annotated_nodes: Arc::new(nodes),
        ..s
    }
}

/// Two interconnect nodes as ovn-kubernetes annotates them (the join subnet
/// derived from node-id on one, published on the other).
fn healthy_nodes() -> Vec<CniNode> {
    vec![
        ovn_node(
            "ovn-worker",
            &[
                (NODE_ID, "100.64.0.0/16"),
                (TRANSIT_IFADDR, "100.88.0.0/16"),
                (MASQUERADE_SUBNET, "169.254.0.0/17"),
            ],
        ),
        ovn_node(
            "ovn-worker2",
            &[
                (LRP_IFADDR, "100.64.0.0/16"),
                (TRANSIT_IFADDR, "100.88.0.0/16"),
                (MASQUERADE_SUBNET, "169.254.0.0/17"),
            ],
        ),
    ]
}

#[test]
fn a_metallb_pool_over_the_join_subnet_is_found_naming_the_node_that_tells_it() {
    let s = with_ovn(
        state(
            vec![metallb("metallb-system/cgnat", "100.64.0.0/24")],
            vec![node("worker-a", "10.244.0.0/24", "192.168.1.2")],
        ),
        healthy_nodes(),
    );
    // The published subnet names it, not the one derived from node-id.
    assert_eq!(
        found(&s),
        [(
            "metallb-system/cgnat".to_owned(),
            "ovn-worker2".to_owned(),
            "100.64.0.0..100.64.0.255".to_owned()
        )]
    );
}

#[test]
fn a_healthy_ovn_kubernetes_cluster_gives_nothing_and_each_subnet_is_one_range() {
    let s = with_ovn(
        state(
            vec![metallb("metallb-system/l2", "192.168.10.0/24")],
            vec![node("ovn-worker", "10.244.1.0/24", "172.18.0.3")],
        ),
        healthy_nodes(),
    );
    let (findings, checked) = super::plan_overlaps(&s);
    assert!(findings.is_empty(), "{findings:?}");
    // The pool, the podCIDR, the address, join, transit and masquerade once each.
    assert_eq!(checked, 6);
}

#[test]
fn a_join_subnet_moved_onto_the_transit_subnet_is_found_and_either_may_move() {
    // cluster-network-operator#2584's QE step: internalJoinSubnet set to the
    // transit subnet's default.
    let nodes = vec![ovn_node(
        "ovn-worker",
        &[
            (LRP_IFADDR, "100.88.0.0/16"),
            (TRANSIT_IFADDR, "100.88.0.0/16"),
        ],
    )];
    let (findings, _) = super::plan_overlaps(&with_ovn(ClusterState::default(), nodes));
    assert_eq!(findings.len(), 1, "{findings:?}");
    let crate::detect::Cause::Plan(o) = &findings[0].cause else {
        panic!("{findings:?}")
    };
    assert!(o.either, "{o:?}");
    assert_eq!(o.shared.to_string(), "100.88.0.0..100.88.255.255");
}

#[test]
fn the_default_join_subnet_is_not_claimed_where_the_join_subnet_moved() {
    // A node publishes a join address outside the default: the default that
    // node-id derives elsewhere is no range of ovn-kubernetes.
    let nodes = vec![
        ovn_node("ovn-worker", &[(NODE_ID, "100.64.0.0/16")]),
        ovn_node("ovn-worker2", &[(LRP_IFADDR, "100.65.0.0/16")]),
    ];
    let mut moved = nodes.clone();
    moved[1].addresses.push(crate::inventory::InfraAddress {
        ip: ip("100.65.0.2"),
        role: crate::inventory::Role::OvnRouterPort,
        source: crate::inventory::Source::OvnJoinAnnotation,
    });
    let pool = || vec![metallb("metallb-system/cgnat", "100.64.0.0/24")];
    assert_eq!(found(&with_ovn(state(pool(), vec![]), nodes)).len(), 1);
    assert!(found(&with_ovn(state(pool(), vec![]), moved)).is_empty());
}

#[test]
fn a_nodes_address_in_the_transit_subnet_moves_the_transit_subnet() {
    let s = with_ovn(
        state(vec![], vec![node("edge-1", "10.244.7.0/24", "100.88.4.7")]),
        healthy_nodes(),
    );
    assert_eq!(
        found(&s),
        [(
            "ovn-worker".to_owned(),
            "edge-1".to_owned(),
            "100.88.4.7".to_owned()
        )]
    );
}

#[test]
fn nothing_on_the_cluster_network_may_meet_an_internal_subnet() {
    let internal = |shared: &str| Planned {
        shared: Some(shared.to_owned()),
        ..planned(
            "ovn-kubernetes",
            "Node",
            "ovn-worker",
            Purpose::Internal,
            "100.64.0.0/16",
        )
    };
    let other = |purpose| planned("X", "Kind", "x", purpose, "100.64.0.0/24");
    for purpose in [
        Purpose::Pods,
        Purpose::NodePods,
        Purpose::Services,
        Purpose::LoadBalancer,
        Purpose::NodeAddress,
        Purpose::Secondary,
    ] {
        let j = internal("ovn-kubernetes join subnet");
        assert!(must_not_meet(&j, &other(purpose)), "{purpose:?}");
        assert!(must_not_meet(&other(purpose), &j), "{purpose:?}");
        // A secondary network on its own interface is another network.
        let elsewhere = Planned {
            domain: Some("eth1".into()),
            ..other(purpose)
        };
        assert!(!must_not_meet(&j, &elsewhere), "{purpose:?}");
    }
    let mut by_other_node = internal("ovn-kubernetes join subnet");
    by_other_node.owner.object = "ovn-worker2".into();
    // Two records of one subnet; two of ovn-kubernetes' subnets over each other.
    assert!(!must_not_meet(
        &internal("ovn-kubernetes join subnet"),
        &by_other_node
    ));
    by_other_node.shared = Some("ovn-kubernetes transit switch subnet".into());
    assert!(must_not_meet(
        &internal("ovn-kubernetes join subnet"),
        &by_other_node
    ));
}

/// Calico's LoadBalancer pools (`allowedUses: [LoadBalancer]`), as in its
/// docs' LoadBalancer IPAM example.
fn calico_lb(pools: &[(&str, &str)]) -> Arc<CalicoIpam> {
    let pools = pools
        .iter()
        .map(|(name, cidr)| IpPool {
            name: (*name).to_owned(),
            cidr: net(cidr),
            block_size: Some(24),
            disabled: false,
            workloads: false,
            load_balancer: true,
        })
        .collect();
    Arc::new(CalicoIpam::new(Vec::new(), pools))
}

#[test]
fn a_metallb_pool_over_a_calico_load_balancer_pool_is_found_and_two_of_calicos_are_not() {
    let s = ClusterState {
        calico: calico_lb(&[("loadbalancerIPPool", "192.210.0.0/20")]),
        ..state(
            vec![metallb("metallb-system/lb", "192.210.0.0/24")],
            Vec::new(),
        )
    };
    // Neither is easier to move: the first in address order is named to change.
    assert_eq!(
        found(&s),
        [(
            "loadbalancerIPPool".to_owned(),
            "metallb-system/lb".to_owned(),
            "192.210.0.0..192.210.0.255".to_owned()
        )]
    );
    // Unused, it is kube-controllers' still; two of them are one controller's.
    let two = ClusterState {
        calico: calico_lb(&[("a", "192.210.0.0/20"), ("b", "192.210.0.0/24")]),
        ..ClusterState::default()
    };
    assert!(found(&two).is_empty());
    // Over a node's address, the pool moves.
    let over_node = ClusterState {
        calico: calico_lb(&[("lb", "192.168.1.0/24")]),
        ..state(vec![], vec![node("w1", "10.244.0.0/24", "192.168.1.2")])
    };
    assert_eq!(
        found(&over_node),
        [("lb".to_owned(), "w1".to_owned(), "192.168.1.2".to_owned())]
    );
}

#[test]
fn ovn_kubernetes_node_subnets_are_node_pod_ranges_once_each() {
    // OpenShift's Nodes have no podCIDRs: the annotation is the only record.
    let mut openshift = ovn_node("worker-0", &[]);
    openshift.ovn_subnets = vec![net("10.128.0.0/23")];
    // On kind the annotation repeats spec.podCIDRs: one range, not two.
    let mut kind = ovn_node("ovn-worker", &[]);
    kind.ovn_subnets = vec![net("10.244.2.0/24")];
    let s = with_ovn(
        state(
            vec![metallb("metallb-system/lb", "10.128.1.0/24")],
            vec![node("ovn-worker", "10.244.2.0/24", "172.18.0.3")],
        ),
        vec![openshift, kind],
    );
    assert_eq!(
        found(&s),
        [(
            "metallb-system/lb".to_owned(),
            "worker-0".to_owned(),
            "10.128.1.0..10.128.1.255".to_owned()
        )]
    );
    // The pool, the podCIDR, the address and worker-0's subnet.
    assert_eq!(super::plan_overlaps(&s).1, 4);
}

#[test]
fn a_config_files_join_subnet_replaces_the_default_a_node_id_derives() {
    let from_file = Planned {
        shared: Some(crate::cni::ovn_kubernetes::shared(
            &crate::cni::ovn_kubernetes::JOIN,
        )),
        ..planned(
            "ovn-kubernetes",
            "ConfigMap",
            "openshift-ovn-kubernetes/ovnkube-config",
            Purpose::Internal,
            "100.65.0.0/16",
        )
    };
    let nodes = || vec![ovn_node("ovn-worker", &[(NODE_ID, "100.64.0.0/16")])];
    let pool = metallb("metallb-system/cgnat", "100.64.0.0/24");
    assert_eq!(
        found(&with_ovn(state(vec![pool.clone()], vec![]), nodes())).len(),
        1
    );
    let moved = with_ovn(state(vec![pool, from_file], vec![]), nodes());
    assert!(found(&moved).is_empty());
    // The pool, and the file's join subnet alone.
    assert_eq!(super::plan_overlaps(&moved).1, 2);
}

#[test]
fn ovn_kubernetes_subnets_ordered_apart_from_kube_controller_managers_podcidrs_are_no_overlap() {
    // ovn-kubernetes allocates node subnets itself and never reads podCIDRs:
    // where kube-controller-manager also allocates, the two orders differ.
    let mut a = ovn_node("worker-a", &[]);
    a.ovn_subnets = vec![net("10.244.1.0/24")];
    let mut b = ovn_node("worker-b", &[]);
    b.ovn_subnets = vec![net("10.244.0.0/24")];
    let s = with_ovn(
        state(
            vec![],
            vec![
                node("worker-a", "10.244.0.0/24", "172.18.0.2"),
                node("worker-b", "10.244.1.0/24", "172.18.0.3"),
            ],
        ),
        vec![a, b.clone()],
    );
    assert_eq!(found(&s), []);
    // ovn-kubernetes giving one subnet to two nodes is one range twice.
    let mut c = ovn_node("worker-c", &[]);
    c.ovn_subnets = vec![net("10.244.0.0/24")];
    let twice = with_ovn(state(vec![], vec![]), vec![b, c]);
    assert_eq!(found(&twice).len(), 1, "{:?}", found(&twice));
}

#[test]
fn a_nodes_address_in_the_default_join_subnet_says_the_join_subnet_moved() {
    // Newer ovn-kubernetes publishes no join address: only node-id derives
    // the default, and a node on 100.64/16 means it was moved off it.
    let nodes = || vec![ovn_node("ovn-worker", &[(NODE_ID, "100.64.0.0/16")])];
    let on_cgnat = with_ovn(
        state(
            vec![],
            vec![node("ovn-worker", "10.244.0.0/24", "100.64.3.7")],
        ),
        nodes(),
    );
    assert_eq!(found(&on_cgnat), []);
    let beside = with_ovn(
        state(
            vec![metallb("metallb-system/cgnat", "100.64.0.0/24")],
            vec![node("ovn-worker", "10.244.0.0/24", "172.18.0.2")],
        ),
        nodes(),
    );
    assert_eq!(found(&beside).len(), 1);
}
