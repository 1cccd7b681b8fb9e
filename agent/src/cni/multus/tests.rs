#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use serde_json::{Value, json};

use super::*;
use crate::cni::read::corpus;

/// Every NetworkAttachmentDefinition of a List, read as `audit` reads them.
pub(super) fn read_list(text: &str) -> (Vec<Planned>, Vec<Invalid>) {
    let list: Value = serde_json::from_str(text).unwrap();
    let (mut out, mut invalid) = (Vec::new(), Vec::new());
    for item in list["items"].as_array().unwrap() {
        let (api, kind) = (item["apiVersion"].as_str(), item["kind"].as_str());
        if ATTACHMENTS.holds(api.unwrap(), kind.unwrap()) {
            out.extend((ATTACHMENTS.read)(&item.to_string(), &mut invalid));
        }
    }
    (out, invalid)
}

/// A NAD named `name` whose `spec.config` is `config` as a string.
pub(super) fn nad(config: &Value) -> String {
    json!({
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "net", "namespace": "ns"},
        "spec": {"config": config.to_string()},
    })
    .to_string()
}

pub(super) fn read_one(json: &str) -> (Vec<Planned>, Vec<Invalid>) {
    let mut invalid = Vec::new();
    let out = (ATTACHMENTS.read)(json, &mut invalid);
    (out, invalid)
}

/// A range as the assertions write it: the range, its domain, what it never
/// gives, and its shared key.
pub(super) fn view(p: &Planned) -> (String, String, Vec<String>, Option<String>) {
    let exclude = p.exclude.iter().map(ToString::to_string).collect();
    let domain = p.domain.clone().unwrap();
    (p.range.to_string(), domain, exclude, p.shared.clone())
}

pub(super) fn views(ps: &[Planned]) -> Vec<(String, String, Vec<String>, Option<String>)> {
    ps.iter().map(view).collect()
}

pub(super) fn v(
    range: &str,
    domain: &str,
    ex: &[&str],
    shared: Option<&str>,
) -> (String, String, Vec<String>, Option<String>) {
    let ex = ex.iter().map(|s| (*s).to_owned()).collect();
    (
        range.to_owned(),
        domain.to_owned(),
        ex,
        shared.map(str::to_owned),
    )
}

pub(super) fn whereabouts(ipam: &Value) -> Value {
    json!({"cniVersion": "0.3.0", "name": "wb", "type": "macvlan", "master": "eth0", "ipam": ipam})
}

#[test]
fn whereabouts_readme_nads_give_their_whole_cidr_on_the_master() {
    let (out, invalid) = read_list(&corpus!(
        "multus/nad-whereabouts-readme-macvlan-range-and-node-slice.json"
    ));
    assert!(invalid.is_empty(), "{invalid:?}");
    let ends = ["192.168.2.224", "192.168.2.239"];
    let wide = ["192.168.2.0", "192.168.2.255"];
    assert_eq!(
        views(&out),
        [
            v(
                "192.168.2.224..192.168.2.239",
                "eth0",
                &ends,
                Some("whereabouts ")
            ),
            v(
                "192.168.2.0..192.168.2.255",
                "eth0",
                &wide,
                Some("whereabouts ")
            ),
        ]
    );
    let owner = &out[0].owner;
    assert_eq!(
        (owner.allocator, owner.kind, owner.object.as_str()),
        (
            "whereabouts",
            "NetworkAttachmentDefinition",
            "whereabouts-conf"
        )
    );
    assert_eq!(
        (owner.field, out[0].text.as_str()),
        ("spec.config ipam.range", "192.168.2.225/28")
    );
    // A namespaced kind namespace admins may create: a tenant may have chosen it.
    assert!(out.iter().all(|p| p.owner.tenant));
    assert!(
        out.iter()
            .all(|p| p.purpose == Purpose::Secondary && p.node.is_none())
    );
}

#[test]
fn harvester_storage_network_is_the_bridge_vlan_minus_its_exclusions() {
    let (out, invalid) = read_list(&corpus!(
        "multus/nad-harvester-storagenetwork-bridge-vlan-whereabouts.json"
    ));
    assert!(invalid.is_empty(), "{invalid:?}");
    let never = [
        "192.168.50.1",
        "192.168.50.2",
        "192.168.50.0",
        "192.168.50.255",
    ];
    assert_eq!(
        views(&out),
        [v(
            "192.168.50.0..192.168.50.255",
            "mgmt-br vlan 50",
            &never,
            Some("whereabouts ")
        )]
    );
    assert_eq!(out[0].owner.object, "harvester-system/storagenetwork-sg8d8");
    let gives = |ip: &str| out[0].gives(ip.parse().unwrap());
    assert!(!gives("192.168.50.1") && !gives("192.168.50.2") && gives("192.168.50.3"));
}

#[test]
fn decl_configs_static_pair_gives_the_same_address_on_two_masters() {
    let (out, invalid) = read_list(&corpus!(
        "multus/nad-declconfigs-macvlan-and-ipvlan-static-same-address.json"
    ));
    assert!(invalid.is_empty(), "{invalid:?}");
    assert_eq!(
        views(&out),
        [
            v("192.168.12.99", "enp1s0f1", &[], None),
            v("192.168.12.99", "ens3", &[], None)
        ]
    );
    assert!(
        out.iter()
            .all(|p| p.owner.allocator == "static" && p.text == "192.168.12.99/24")
    );
}

#[test]
fn host_local_ranges_run_from_start_to_end_and_a_nad_without_spec_gives_nothing() {
    let (out, invalid) = read_list(&corpus!(
        "multus/nad-multus-howto-host-local-ranges-gateway-and-no-spec.json"
    ));
    assert!(invalid.is_empty(), "{invalid:?}");
    assert_eq!(
        views(&out),
        [
            v("10.10.1.20..10.10.3.50", "eth1", &[], None),
            v("12.10.1.20..12.10.3.50", "eth1", &[], None)
        ]
    );
    let objects: Vec<_> = out.iter().map(|p| p.owner.object.as_str()).collect();
    assert_eq!(objects, ["macvlan-conf-1", "testns1/macvlan-conf-3"]);
    assert_eq!(out[0].text, "10.10.0.0/16 from 10.10.1.20 to 10.10.3.50");
    assert_eq!(
        (out[0].owner.allocator, out[0].owner.field),
        ("host-local", "spec.config ipam.ranges")
    );
}

#[test]
fn host_local_flat_range_of_the_quickstart_leaves_its_gateway_outside() {
    let (out, invalid) = read_list(&corpus!(
        "multus/nad-multus-quickstart-macvlan-host-local-rangestart-rangeend.json"
    ));
    assert!(invalid.is_empty(), "{invalid:?}");
    assert_eq!(
        views(&out),
        [v("192.168.1.200..192.168.1.216", "eth0", &[], None)]
    );
    assert_eq!(out[0].owner.field, "spec.config ipam.subnet");
}

#[test]
fn host_local_subnet_never_gives_network_default_gateway_nor_broadcast() {
    let (sriov, invalid) = read_list(&corpus!(
        "multus/nad-multus-howto-sriov-host-local-block-scalar.json"
    ));
    assert!(invalid.is_empty(), "{invalid:?}");
    let never = ["10.0.2.0", "10.0.2.1", "10.0.2.255"];
    assert_eq!(
        views(&sriov),
        [v(
            "10.0.2.0..10.0.2.255",
            "intel.com/sriov_vf",
            &never,
            None
        )]
    );
    let (bridge, invalid) = read_list(&corpus!(
        "multus/nad-multus-e2e-bridge-host-local-subnet.json"
    ));
    assert!(invalid.is_empty(), "{invalid:?}");
    let never = ["10.10.0.0", "10.10.0.1", "10.10.255.255"];
    assert_eq!(
        views(&bridge),
        [v("10.10.0.0..10.10.255.255", "testnet0", &never, None)]
    );
}

#[test]
fn a_templated_config_is_one_invalid_and_no_range() {
    let (out, invalid) = read_list(&corpus!(
        "multus/nad-multus-e2e-macvlan-static-ips-from-pod-annotation-template.json"
    ));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(invalid.len(), 1, "{invalid:?}");
    assert_eq!(
        (invalid[0].resource, invalid[0].object.as_str()),
        ("network-attachment-definitions", "macvlan1-config")
    );
    assert!(
        invalid[0].problem.contains("template"),
        "{}",
        invalid[0].problem
    );
}

#[test]
fn antrea_cookbook_configs_that_are_not_json_are_one_invalid_each() {
    for text in [
        corpus!("antrea/ippool-nad-antrea-cookbook-v1beta1-invalid-json-config.json"),
        corpus!("antrea/ippool-nad-antrea-cookbook-v1alpha2-invalid-json-config.json"),
    ] {
        let (out, invalid) = read_list(&text);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(invalid.len(), 1, "{invalid:?}");
        assert_eq!(invalid[0].object, "macvlan-conf");
        assert!(
            invalid[0].problem.contains("not valid JSON"),
            "{}",
            invalid[0].problem
        );
    }
}

#[test]
fn a_conflist_reads_the_first_plugin_with_ipam() {
    let config = json!({"cniVersion": "1.0.0", "name": "conf", "plugins": [
        {"type": "tuning"},
        {"type": "bridge", "bridge": "br1", "ipam": {"type": "host-local", "subnet": "10.9.0.0/24", "rangeStart": "10.9.0.50"}},
        {"type": "macvlan", "master": "eth9", "ipam": {"type": "static", "addresses": [{"address": "10.9.9.9/24"}]}},
    ]});
    let (out, invalid) = read_one(&nad(&config));
    assert!(invalid.is_empty(), "{invalid:?}");
    assert_eq!(
        views(&out),
        [v("10.9.0.50..10.9.0.255", "br1", &["10.9.0.255"], None)]
    );
}

#[test]
fn more_than_64_ranges_are_cut_at_64_and_said_so() {
    let addresses: Vec<Value> = (0..70)
        .map(|i| json!({"address": format!("10.0.0.{i}/24")}))
        .collect();
    let config = whereabouts(&json!({"type": "static", "addresses": addresses}));
    let (out, invalid) = read_one(&nad(&config));
    assert_eq!(out.len(), 64);
    assert_eq!(out[63].range.to_string(), "10.0.0.63");
    assert_eq!(invalid.len(), 1, "{invalid:?}");
    assert!(
        invalid[0].problem.contains("more than 64"),
        "{}",
        invalid[0].problem
    );
}

#[test]
fn domains_follow_the_plugin_type() {
    let ipam = json!({"type": "static", "addresses": [{"address": "10.0.0.1/24"}]});
    let table = [
        (
            json!({"type": "macvlan", "ipam": ipam}),
            None,
            "the node's default-route interface",
        ),
        (
            json!({"type": "ipvlan", "master": "bond0", "ipam": ipam}),
            None,
            "bond0",
        ),
        (
            json!({"type": "bridge", "vlan": 0, "ipam": ipam}),
            None,
            "cni0",
        ),
        (
            json!({"type": "host-device", "device": "eth5", "ipam": ipam}),
            None,
            "eth5",
        ),
        (
            json!({"type": "sriov", "ipam": ipam}),
            Some("vendor/vf"),
            "vendor/vf",
        ),
        (
            json!({"type": "ovs", "bridge": "br-ex", "ipam": ipam}),
            None,
            "br-ex",
        ),
        (
            json!({"type": "ptp", "name": "p2p", "ipam": ipam}),
            None,
            "ptp p2p",
        ),
    ];
    for (config, resource, want) in table {
        let mut object: Value = serde_json::from_str(&nad(&config)).unwrap();
        if let Some(r) = resource {
            object["metadata"]["annotations"] = json!({"k8s.v1.cni.cncf.io/resourceName": r});
        }
        let (out, _) = read_one(&object.to_string());
        assert_eq!(out[0].domain.as_deref(), Some(want), "{config}");
    }
}

#[test]
fn other_ipams_and_absent_configs_give_nothing_and_nothing_invalid() {
    let configs = [
        nad(&json!({"type": "macvlan", "ipam": {"type": "dhcp"}})),
        nad(&json!({"type": "macvlan", "ipam": {"type": "static"}})),
        nad(&json!({"type": "macvlan"})),
        json!({"metadata": {"name": "a"}, "spec": {}}).to_string(),
        json!({"metadata": {"name": "b"}}).to_string(),
    ];
    for c in configs {
        let (out, invalid) = read_one(&c);
        assert!(
            out.is_empty() && invalid.is_empty(),
            "{c}: {out:?} {invalid:?}"
        );
    }
}

#[test]
fn an_object_that_is_no_nad_is_one_invalid() {
    let (out, invalid) = read_one("{\"metadata\": {\"name\": \"x\"}, \"spec\": 5}");
    assert!(out.is_empty());
    assert_eq!(invalid.len(), 1, "{invalid:?}");
    assert_eq!(invalid[0].object, "x");
    assert!(
        invalid[0]
            .problem
            .contains("not a NetworkAttachmentDefinition"),
        "{invalid:?}"
    );
}
