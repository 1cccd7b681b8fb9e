//! The audit on a four-node cluster shaped like the cozystack report: each
//! finding under the pod's node, once; duplicates across the cluster; nothing
//! from what only a node's kernel shows.

use std::sync::Arc;

use super::*;
use crate::detect::{Cause, FindingKind, Scope};
use crate::inventory::{
    ClusterState,
    fixtures::{ME, OTHER, cilium_node, cilium_nodes, ip, net, ovn_default, pod},
};

fn cluster(pods: Vec<Pod>) -> ClusterState {
    let mut nodes = cilium_nodes();
    nodes.push(cilium_node(
        "node-c",
        &[ip("10.96.2.7")],
        &[],
        &[],
        &[net("10.96.2.0/24")],
    ));
    nodes.push(cilium_node(
        "node-d",
        &[ip("10.96.3.7")],
        &[],
        &[],
        &[net("10.96.3.0/24")],
    ));
    ClusterState {
        pods: Arc::new(pods),
        cilium_nodes: Arc::new(nodes),
        ..ClusterState::default()
    }
}

fn kinds(a: &Audit, node: &str) -> Vec<(FindingKind, Scope, String)> {
    a.nodes
        .iter()
        .find(|n| n.node == node)
        .map(|n| {
            n.findings
                .iter()
                .map(|f| {
                    (
                        f.kind,
                        f.scope,
                        f.pod().map_or_else(String::new, |p| p.name.clone()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_node_is_audited_and_each_finding_is_reported_once_under_the_pods_node() {
    let mut older = pod("web-0", "node-c", &["10.96.2.50"]);
    older.created = Some(100);
    let mut newer = pod("web-1", "node-d", &["10.96.2.50"]);
    newer.created = Some(200);
    let pods = vec![
        pod("virt-operator", ME, &["10.244.4.251"]),
        pod("gateway", OTHER, &["10.244.4.12"]),
        pod("fine", "node-c", &["10.96.2.9"]),
        older,
        newer,
    ];
    let mut state = cluster(pods);
    state.subnets = Arc::new(vec![ovn_default(&[])]);
    let mut calls = Vec::new();
    let a = audit(&state, "cilium_host", &mut |done, total| {
        calls.push((done, total));
    });
    assert_eq!(a.nodes_checked, 4);
    assert_eq!(a.pods_checked, 5);
    assert_eq!(calls.last(), Some(&(4, 4)));
    assert_eq!(
        kinds(&a, ME)[0],
        (
            FindingKind::RouterIpCollision,
            Scope::SameNode,
            "virt-operator".into()
        )
    );
    assert!(
        kinds(&a, ME)
            .iter()
            .any(|(k, _, _)| *k == FindingKind::AllocatorOverlap),
        "{:?}",
        kinds(&a, ME)
    );
    // The pod on node-b holding node-a's Ingress IP: under node-b only.
    assert!(kinds(&a, OTHER).contains(&(
        FindingKind::IngressIpCollision,
        Scope::CrossNode,
        "gateway".into()
    )));
    let gateway = a
        .findings()
        .filter(|f| f.pod().is_some_and(|p| p.name == "gateway"))
        .count();
    assert_eq!(gateway, 1);
    // The newer of two pods on one address, under its node, naming the older.
    assert_eq!(
        kinds(&a, "node-d"),
        [(
            FindingKind::DuplicatePodIp,
            Scope::CrossNode,
            "web-1".into()
        )]
    );
    let dup = a
        .findings()
        .find(|f| f.kind == FindingKind::DuplicatePodIp)
        .expect("a duplicate");
    let Cause::Duplicate { holder, .. } = &dup.cause else {
        panic!("{dup:?}")
    };
    assert_eq!(holder.name, "web-0");
    assert!(kinds(&a, "node-c").is_empty());
    // The node with a running pod its host cannot reach comes first.
    assert_eq!(a.nodes[0].node, ME);
}

#[test]
fn terminating_and_host_network_pods_are_no_duplicates() {
    let mut leaving = pod("old", "node-c", &["10.96.2.50"]);
    leaving.terminating = true;
    let mut host_a = pod("exporter-a", "node-c", &["192.0.2.10"]);
    host_a.host_network = true;
    let mut host_b = pod("exporter-b", "node-c", &["192.0.2.10"]);
    host_b.host_network = true;
    let state = cluster(vec![
        leaving,
        pod("new", "node-c", &["10.96.2.50"]),
        host_a,
        host_b,
    ]);
    let a = audit(&state, "cilium_host", &mut |_, _| {});
    assert!(a.nodes.is_empty(), "{:?}", a.nodes);
}

#[test]
fn an_audit_finds_nothing_only_a_kernel_shows() {
    // The agent's fixture host has 10.244.4.99 on eth1; the audit has no host.
    let state = cluster(vec![pod("p", ME, &["10.244.4.99"])]);
    let a = audit(&state, "cilium_host", &mut |_, _| {});
    assert!(a.nodes.is_empty(), "{:?}", a.nodes);
}
