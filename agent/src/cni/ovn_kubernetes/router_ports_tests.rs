//! The router ports read from real ovn-kubernetes values
//! (tests/corpus/realworld/ovn-kubernetes).

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use crate::cni::annotations::node_annotations;

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/corpus/realworld/ovn-kubernetes"
);

/// (ip, source) of each router port `annotations` give, and the problems named.
fn ports(annotations: &BTreeMap<String, String>) -> (Vec<(String, Source)>, Vec<String>) {
    let mut problems = Vec::new();
    let node = node_annotations("n", annotations, &mut problems);
    let mut got: Vec<_> = node
        .map(|n| n.addresses)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.role == Role::OvnRouterPort)
        .map(|a| (a.ip.to_string(), a.source))
        .collect();
    got.sort();
    (got, problems.into_iter().map(|p| p.problem).collect())
}

fn one(key: &str, value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(key.to_owned(), value.to_owned())])
}

#[test]
fn every_real_join_transit_and_node_id_value_is_read() {
    let raw = std::fs::read(format!("{CORPUS}/annotation-values-by-release.json")).expect("corpus");
    let values: Vec<Value> = serde_json::from_slice(&raw).expect("json");
    let want: BTreeMap<&str, (&str, Source)> = BTreeMap::from([
        (LRP_IFADDR, ("100.64.0.2", Source::OvnJoinAnnotation)),
        (LRP_IFADDRS, ("100.64.0.4", Source::OvnJoinAnnotation)),
        (TRANSIT_IFADDR, ("100.88.0.3", Source::OvnTransitAnnotation)),
        (NODE_ID, ("100.64.0.3", Source::OvnNodeId)),
    ]);
    let mut seen = 0;
    for v in &values {
        let key = v["annotation"].as_str().expect("annotation");
        let value = v["value"].as_str().expect("value");
        let Some((ip, source)) = want.get(key) else {
            continue;
        };
        seen += 1;
        let (got, problems) = ports(&one(key, value));
        assert!(problems.is_empty(), "{key}: {problems:?}");
        assert_eq!(got, [((*ip).to_owned(), *source)], "{key} {value}");
    }
    assert_eq!(seen, want.len(), "every key has a real value");
}

/// The Nodes of the corpus with their annotations.
fn real_nodes() -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(CORPUS).expect("corpus") {
        let path = entry.expect("entry").path();
        let v: Value = serde_json::from_slice(&std::fs::read(&path).expect("file")).expect("json");
        let items = v.get("items").and_then(Value::as_array).cloned();
        for item in items.unwrap_or_else(|| vec![v.clone()]) {
            if let Some(a) = item.pointer("/metadata/annotations") {
                let a: BTreeMap<String, String> =
                    serde_json::from_value(a.clone()).expect("strings");
                out.push((path.display().to_string(), a));
            }
        }
    }
    out
}

#[test]
fn real_nodes_give_their_join_and_transit_addresses_and_node_id_derives_the_published_one() {
    let mut checked = 0;
    for (file, annotations) in real_nodes() {
        let (got, problems) = ports(&annotations);
        assert!(problems.is_empty(), "{file}: {problems:?}");
        let Some(id) = annotations.get(NODE_ID) else {
            // The 2019-era dual-stack dump: no node-id, no router ports.
            assert!(got.is_empty(), "{file}: {got:?}");
            continue;
        };
        let transit = format!("100.88.0.{id}");
        assert!(
            got.contains(&(transit, Source::OvnTransitAnnotation)),
            "{file}: {got:?}"
        );
        // Where the Node still publishes its join address, the derivation from
        // node-id (join_ips.go) gives the same one.
        let mut alone = one(NODE_ID, id);
        alone.insert(
            "k8s.ovn.org/node-subnets".into(),
            annotations["k8s.ovn.org/node-subnets"].clone(),
        );
        let (derived, _) = ports(&alone);
        let join = format!("100.64.0.{id}");
        assert_eq!(derived, [(join.clone(), Source::OvnNodeId)], "{file}");
        let source = if annotations.contains_key(LRP_IFADDRS) {
            Source::OvnJoinAnnotation
        } else {
            Source::OvnNodeId
        };
        assert!(got.contains(&(join, source)), "{file}: {got:?}");
        assert_eq!(got.len(), 2, "{file}: {got:?}");
        checked += 1;
    }
    assert_eq!(checked, 3, "the three Nodes with a node-id");
}

#[test]
fn node_id_derives_per_family_and_not_where_the_join_subnet_was_moved() {
    let with = |subnets: &str, id: &str| {
        let mut a = one(NODE_ID, id);
        a.insert("k8s.ovn.org/node-subnets".into(), subnets.into());
        ports(&a)
    };
    let (dual, _) = with(r#"{"default":["10.128.0.0/23","fd01:0:0:1::/64"]}"#, "7");
    assert_eq!(
        dual,
        [
            ("100.64.0.7".to_owned(), Source::OvnNodeId),
            ("fd98::7".to_owned(), Source::OvnNodeId)
        ]
    );
    // A node subnet over 100.64.0.0/16: ovn-kubernetes refuses that overlap,
    // so the join subnet is not the default and nothing is derived.
    assert!(with(r#"{"default":["100.64.4.0/24"]}"#, "7").0.is_empty());
    // Id 0 is no node's; 70000 lies outside a /16.
    assert!(with(r#"{"default":["10.128.0.0/23"]}"#, "0").0.is_empty());
    assert!(
        with(r#"{"default":["10.128.0.0/23"]}"#, "70000")
            .0
            .is_empty()
    );
}

#[test]
fn malformed_values_are_named_and_add_nothing() {
    for (key, value) in [
        (NODE_ID, "three"),
        (LRP_IFADDR, "100.64.0.2/16"),
        (LRP_IFADDR, r#"{"ipv4":"100.64.0.2"}"#),
        (LRP_IFADDR, r#"{"ipv4":"fd98::2/64"}"#),
        (LRP_IFADDRS, r#"{"default":"100.64.0.2/16"}"#),
        (TRANSIT_IFADDR, r#"{"ipv4":42}"#),
        (TRANSIT_IFADDR, "{"),
    ] {
        let (got, problems) = ports(&one(key, value));
        assert!(got.is_empty(), "{key} {value}: {got:?}");
        assert_eq!(problems.len(), 1, "{key} {value}: {problems:?}");
    }
    // Another network's join address is not the default network's.
    let (udn, problems) = ports(&one(
        LRP_IFADDRS,
        r#"{"l3-network":{"ipv4":"100.65.0.4/16"}}"#,
    ));
    assert!(
        udn.is_empty() && problems.is_empty(),
        "{udn:?} {problems:?}"
    );
}
