//! kube-ovn's lean Subnet (`cni::kube_ovn`) reads as the whole object does.

use serde_json::Value;

use super::whole;
use crate::cni::{
    kube_ovn::{LeanSubnet, subnet},
    read::shape::corpus_items,
};

/// The real Subnets of the corpus: each kept field as the object has it,
/// and the same Subnet (or the same refusal) lean as whole.
#[test]
fn real_subnets_keep_what_the_converter_reads() {
    let mut seen = 0;
    for (name, item) in corpus_items("subnet-") {
        let bytes = serde_json::to_vec(&item).expect("bytes");
        let lean: LeanSubnet = serde_json::from_slice(&bytes).expect("lean");
        assert_eq!(
            lean.metadata.name.as_deref(),
            item.pointer("/metadata/name").and_then(Value::as_str),
            "{name}"
        );
        let s = lean.spec.as_ref().expect("a spec");
        for (field, kept) in [
            ("cidrBlock", &s.cidr_block),
            ("excludeIps", &s.exclude_ips),
            ("provider", &s.provider),
            ("vpc", &s.vpc),
            ("vlan", &s.vlan),
            ("default", &s.default),
        ] {
            let want = item.pointer(&format!("/spec/{field}"));
            assert_eq!(
                kept.as_ref(),
                want.filter(|v| !v.is_null()),
                "{name} {field}"
            );
        }
        // `status` and `metadata.managedFields` have no field to be kept in.
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        let whole = whole::subnet(&item, &mut p1);
        let pruned = subnet(&lean, &mut p2);
        assert_eq!(whole, pruned, "{name}");
        assert_eq!(p1, p2, "{name}");
        seen += 1;
    }
    assert!(seen >= 15, "only {seen} Subnets in the corpus");
}

#[test]
fn the_ovn_default_subnet_keeps_its_cidr_and_exclusions() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/realworld/subnet-kubeovn-docs-ovn-default-kubectl-get.json"
    );
    let list: Value = serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json");
    // The list's one item, from bytes as a watch event carries it.
    let bytes = serde_json::to_vec(&list["items"][0]).expect("bytes");
    let lean: LeanSubnet = serde_json::from_slice(&bytes).expect("lean");
    assert_eq!(lean.metadata.name.as_deref(), Some("ovn-default"));
    assert!(lean.metadata.resource_version.is_some());
    let mut problems = Vec::new();
    let subnet = subnet(&lean, &mut problems).expect("a Subnet");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(subnet.name, "ovn-default");
    assert!(subnet.primary && subnet.is_default);
    assert!(!subnet.cidrs.is_empty() && !subnet.exclude.is_empty());
}

#[test]
fn wrong_types_parse_and_are_named_as_the_whole_object_names_them() {
    for junk in [
        serde_json::json!({"metadata": {"name": "s"}, "spec": "x", "status": {"v4usingIPs": 3}}),
        serde_json::json!({"metadata": {"name": 5}, "spec": {"cidrBlock": "10.0.0.0/16"}}),
        serde_json::json!({"metadata": {"name": "s"}, "spec": {"cidrBlock": 7,
            "excludeIps": "x", "provider": 3, "vpc": [], "vlan": {}, "default": "yes"}}),
        serde_json::json!({"metadata": {"name": "s"}, "spec": {"cidrBlock": "10.0.0.0/16,junk",
            "excludeIps": ["10.0.0.1", 4, "10.0.0.9..10.0.0.2"], "provider": null}}),
    ] {
        let bytes = serde_json::to_vec(&junk).expect("bytes");
        let lean: LeanSubnet = serde_json::from_slice(&bytes).expect("never fails");
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        let whole = whole::subnet(&junk, &mut p1);
        let pruned = subnet(&lean, &mut p2);
        assert_eq!(whole, pruned, "{junk}");
        assert_eq!(p1, p2, "{junk}");
    }
}
