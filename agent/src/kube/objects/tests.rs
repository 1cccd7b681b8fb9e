//! Conversions of real and odd objects.

use serde_json::json;

use k8s_openapi::api::core::v1::Pod as K8sPod;
use serde_json::Value;

use std::net::IpAddr;

use super::*;
use crate::{
    inventory::{IpSource, Role},
    kube::cluster::lean::LeanIp,
};

fn k8s_pod(v: Value) -> K8sPod {
    serde_json::from_value(v).expect("test pod")
}

fn keys() -> Vec<String> {
    vec![crate::inventory::DEFAULT_POD_IP_ANNOTATION.to_owned()]
}

#[test]
fn pod_ips_come_from_status_and_the_annotation_only_without_them() {
    let mut problems = vec![];
    let running = k8s_pod(json!({
        "metadata": {"name": "a", "namespace": "ns", "uid": "u1",
                     "annotations": {"ovn.kubernetes.io/ip_address": "10.244.9.9"}},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Running", "podIP": "10.244.0.5",
                   "podIPs": [{"ip": "10.244.0.5"}, {"ip": "fd00::5"}]}
    }));
    let p = pod(&running, &keys(), &mut problems);
    assert_eq!(
        p.ips.iter().map(|i| i.ip.to_string()).collect::<Vec<_>>(),
        ["10.244.0.5", "fd00::5"]
    );
    assert!(p.ips.iter().all(|i| i.source == IpSource::Status));
    assert_eq!(p.node.as_deref(), Some("n1"));

    let pending = k8s_pod(json!({
        "metadata": {"name": "b", "namespace": "ns",
                     "annotations": {"ovn.kubernetes.io/ip_address": "10.244.1.12,fd00::c"}},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Pending"}
    }));
    let p = pod(&pending, &keys(), &mut problems);
    assert_eq!(p.ips.len(), 2);
    assert!(p.ips.iter().all(|i| i.source == IpSource::Annotation));
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn a_pod_whose_default_network_multus_replaced_is_marked() {
    let mut problems = vec![];
    // As Multus' docs write it: the default network named by NetworkAttachmentDefinition.
    let sriov = k8s_pod(json!({
        "metadata": {"name": "dpdk", "namespace": "ns",
                     "annotations": {"v1.multus-cni.io/default-network": "kube-system/sriov-net"}},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Running", "podIP": "10.56.217.9"}
    }));
    assert!(pod(&sriov, &keys(), &mut problems).default_network_elsewhere);
    // Secondary networks alone leave eth0 to the node's CNI.
    let secondary = k8s_pod(json!({
        "metadata": {"name": "web", "namespace": "ns",
                     "annotations": {"k8s.v1.cni.cncf.io/networks": "macvlan-conf"}},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Running", "podIP": "10.244.0.7"}
    }));
    assert!(!pod(&secondary, &keys(), &mut problems).default_network_elsewhere);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn a_bad_annotation_is_reported_by_object_and_cut_short() {
    let mut problems = vec![];
    let huge = "x".repeat(1 << 20);
    let p = k8s_pod(json!({
        "metadata": {"name": "c", "namespace": "ns", "annotations": {"ovn.kubernetes.io/ip_address": huge}},
        "spec": {"containers": []}
    }));
    let p = pod(&p, &keys(), &mut problems);
    assert!(p.ips.is_empty());
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].object, "ns/c");
    assert!(problems[0].problem.contains("not an IP address"));
    assert!(
        problems[0].problem.len() < 200,
        "{}",
        problems[0].problem.len()
    );
}

#[test]
fn a_megabyte_of_addresses_in_the_annotation_keeps_one_per_family_and_stops_early() {
    let mut problems = vec![];
    // Tens of thousands of addresses: reading stops after a few parts.
    let many = (0..120_000)
        .map(|i| format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255))
        .collect::<Vec<_>>()
        .join(",");
    assert!(many.len() > 1 << 20);
    let p = k8s_pod(json!({
        "metadata": {"name": "d", "namespace": "ns", "annotations": {
            "ovn.kubernetes.io/ip_address": many,
            "ovn.kubernetes.io/logical_switch": "ovn-default"}},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Pending"}
    }));
    let p = pod(&p, &keys(), &mut problems);
    assert_eq!(p.ips.len(), 1, "{:?}", p.ips);
    assert_eq!(p.logical_switch.as_deref(), Some("ovn-default"));
    let text: Vec<&str> = problems.iter().map(|p| p.problem.as_str()).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("second address of one family")),
        "{text:?}"
    );
    // Reading stopped early: past 4 parts the rest is not parsed.
    assert!(
        text.iter().any(|t| t.contains("more than 4 parts")),
        "{text:?}"
    );
}

#[test]
fn kube_ovns_ip_record_holds_the_pods_addresses_only_for_that_pod() {
    let record = json!({"apiVersion": "kubeovn.io/v1", "kind": "IP",
        "metadata": {"name": "gw.tenant"},
        "spec": {"podName": "gw", "namespace": "tenant", "ipAddress": "10.244.4.12,fd00::c",
                 "v4IpAddress": "10.244.4.12", "v6IpAddress": "fd00::c"}});
    let lean = |v: Value| -> LeanIp { serde_json::from_value(v).expect("any object reads") };
    let record = lean(record);
    let ips = kube_ovn_ip(&record, "tenant", "gw");
    assert_eq!(ips.len(), 2, "{ips:?}");
    assert!(kube_ovn_ip(&record, "tenant", "other").is_empty());
    assert!(kube_ovn_ip(&lean(json!({"spec": "junk"})), "tenant", "gw").is_empty());
}

#[test]
fn cilium_node_infra_addresses_are_read_and_bad_fields_named() {
    let mut problems = vec![];
    let v = json!({
        "metadata": {"name": "node-a"},
        "spec": {
            "addresses": [
                {"type": "InternalIP", "ip": "192.168.100.11"},
                {"type": "CiliumInternalIP", "ip": "10.244.4.251"},
                {"type": "CiliumInternalIP", "ip": "not-an-ip"}
            ],
            "ingress": {"ipv4": "10.244.4.12", "ipv6": "10.244.4.13"},
            "health": {"ipv4": 42}
        }
    });
    let n = cilium_node(&whole::lean(&v), &mut problems).expect("named node");
    assert_eq!(
        n.ips(Role::Router).collect::<Vec<_>>(),
        vec!["10.244.4.251".parse::<IpAddr>().expect("ip")]
    );
    assert_eq!(
        n.ips(Role::Ingress).collect::<Vec<_>>(),
        vec!["10.244.4.12".parse::<IpAddr>().expect("ip")]
    );
    assert_eq!(n.ips(Role::Health).count(), 0);
    let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 3, "{text:?}");
    assert!(
        text[0].contains("ciliumnodes node-a: spec.addresses[2].ip \"not-an-ip\""),
        "{text:?}"
    );
    assert!(
        text[1].contains("spec.ingress.ipv6 \"10.244.4.13\" is of the wrong address family"),
        "{text:?}"
    );
    assert!(
        text[2].contains("spec.health.ipv4 is \"42\", not a string"),
        "{text:?}"
    );
}

#[test]
fn subnets_read_blocks_and_exclusions_and_name_bad_entries() {
    let mut problems = vec![];
    let v = json!({
        "metadata": {"name": "ovn-default"},
        "spec": {"cidrBlock": "10.244.0.0/16,fd00:10:244::/112",
                 "excludeIps": ["10.244.0.1", "10.244.248.0..10.244.255.255", "10.0.0.9..10.0.0.1", 7]}
    });
    let s = subnet(&whole::lean(&v), &mut problems).expect("usable subnet");
    assert_eq!(s.cidrs.len(), 2);
    assert_eq!(s.exclude.len(), 2);
    assert!(!s.allocates("10.244.0.1".parse().expect("ip")));
    assert!(!s.allocates("10.244.250.3".parse().expect("ip")));
    assert!(s.allocates("10.244.4.251".parse().expect("ip")));
    assert!(!s.allocates("10.245.0.1".parse().expect("ip")));
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].problem.contains("excludeIps[2]"));
    let err = subnet(
        &whole::lean(&json!({"metadata": {"name": "x"}, "spec": {"cidrBlock": "nope"}})),
        &mut problems,
    )
    .expect_err("no valid block");
    assert!(err.problem.contains("no valid CIDR"));
}

#[test]
fn a_cilium_node_without_a_name_is_rejected() {
    let mut problems = vec![];
    let err = cilium_node(&whole::lean(&json!({"spec": {}})), &mut problems).expect_err("no name");
    assert!(err.problem.contains("metadata.name"));
}
