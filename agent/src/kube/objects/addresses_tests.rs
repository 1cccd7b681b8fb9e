//! Every object's addresses and ranges read as Kubernetes reads them
//! ([`crate::inventory::ip_text`]): leading zeros decimal, IPv4-mapped IPv6
//! folded, nothing trimmed but around a list's separators.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::inventory::{InfraAddress, Invalid, Role, SandboxRefusal};

fn texts<T: ToString>(items: impl IntoIterator<Item = T>) -> Vec<String> {
    items.into_iter().map(|t| t.to_string()).collect()
}

fn roles(addresses: &[InfraAddress]) -> Vec<(String, Role)> {
    addresses
        .iter()
        .map(|a| (a.ip.to_string(), a.role))
        .collect()
}

#[test]
fn pods_and_nodes_read_their_addresses_as_the_api_server_validated_them() {
    let mut problems: Vec<Invalid> = vec![];
    let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "a", "namespace": "ns"},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Running",
                   "podIPs": [{"ip": "010.244.004.050"}, {"ip": "::ffff:10.244.4.51"}]}
    }))
    .expect("pod");
    let got = pod(&p, &[], &mut problems);
    assert_eq!(
        texts(got.ips.iter().map(|i| i.ip)),
        ["10.244.4.50", "10.244.4.51"]
    );
    let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "spec": {"podCIDRs": ["010.244.004.000/024", "::ffff:10.245.0.0/112", "10.246.0.0/+24",
                              " 10.247.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.168.001.010"},
                                 {"type": "ExternalIP", "address": " 192.0.2.1"}]}
    }))
    .expect("node");
    let facts = with_addresses(node_facts(&n, &mut problems), &n, &mut problems);
    assert_eq!(texts(&facts.pod_cidrs), ["10.244.4.0/24", "10.245.0.0/16"]);
    assert_eq!(
        texts(facts.addresses.iter().map(|a| a.ip)),
        ["192.168.1.10"]
    );
    // The mapped address is IPv4: two of one family. A sign and whitespace
    // are no part of an address to Go: named, not read.
    let named: Vec<&str> = problems.iter().map(|p| p.problem.as_str()).collect();
    assert_eq!(named.len(), 4, "{named:#?}");
    for bad in [
        "(2 IPv4, 0 IPv6)",
        "\"10.246.0.0/+24\"",
        "\" 10.247.0.0/24\"",
        "\" 192.0.2.1\"",
    ] {
        assert!(
            named.iter().any(|p| p.contains(bad)),
            "{bad} not named: {named:#?}"
        );
    }
}

#[test]
fn cni_objects_and_annotations_read_their_addresses_as_kubernetes_does() {
    let mut problems = vec![];
    let cn = cilium_node(
        &whole::lean(&json!({"metadata": {"name": "n1"},
                "spec": {"addresses": [{"type": "CiliumInternalIP", "ip": "::ffff:10.244.4.251"}],
                         "ingress": {"ipv4": "010.244.004.012"},
                         "ipam": {"podCIDRs": ["010.244.004.000/24"]}}})),
        &mut problems,
    )
    .expect("a CiliumNode");
    assert_eq!(
        roles(&cn.addresses),
        [
            ("10.244.4.251".to_owned(), Role::Router),
            ("10.244.4.12".to_owned(), Role::Ingress)
        ]
    );
    assert_eq!(texts(&cn.pod_cidrs), ["10.244.4.0/24"]);
    let s = subnet(
        &whole::lean(&json!({"metadata": {"name": "ovn-default"},
                "spec": {"cidrBlock": "010.016.000.000/16, fd00:10:16::/64",
                         "excludeIps": ["010.016.000.001", "10.16.0.010..10.16.0.020"]}})),
        &mut problems,
    )
    .expect("a Subnet");
    assert_eq!(texts(&s.cidrs), ["10.16.0.0/16", "fd00:10:16::/64"]);
    assert_eq!(texts(&s.exclude), ["10.16.0.1", "10.16.0.10..10.16.0.20"]);
    let pool = ip_pool(
        &whole::lean(&json!({"metadata": {"name": "p"}, "spec": {"cidr": "192.168.000.000/16"}})),
        &mut problems,
    )
    .expect("an IPPool");
    assert_eq!(pool.cidr.to_string(), "192.168.0.0/16");
    let annotations = BTreeMap::from([
        (
            "k8s.ovn.org/node-subnets".to_owned(),
            r#"{"default":["010.128.000.000/23"]}"#.to_owned(),
        ),
        (
            "projectcalico.org/IPv4VXLANTunnelAddr".to_owned(),
            "::ffff:10.1.0.1".to_owned(),
        ),
    ]);
    let annotated = node_annotations("n1", &annotations, &mut problems).expect("addresses");
    let mut got = roles(&annotated.addresses);
    got.sort();
    assert_eq!(
        got,
        [
            ("10.1.0.1".to_owned(), Role::Tunnel),
            ("10.128.0.1".to_owned(), Role::Gateway),
            ("10.128.0.2".to_owned(), Role::ManagementPort)
        ]
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn kubelets_wordings_name_the_address_as_kubernetes_reads_it() {
    let refused = sandbox_refusal(
        "plugin type=\"cilium-cni\" failed (add): unable to create endpoint: [PUT /endpoint/{id}][400] \
         putEndpointIdInvalid \"IP ipv4:010.244.004.012 is already in use\"",
    );
    assert_eq!(
        refused,
        Some(SandboxRefusal::AddressInUse(
            "10.244.4.12".parse().expect("ip")
        ))
    );
}
