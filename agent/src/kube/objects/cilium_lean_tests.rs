//! The lean CiliumNode (`cni::cilium`) converts as the whole object does.

use super::whole;
use crate::cni::{
    cilium::{LeanCiliumNode, cilium_node},
    read::shape::Shape,
};

/// Every real CiliumNode converts to the same thing lean as whole.
#[test]
fn the_real_objects_convert_the_same_lean_or_whole() {
    let mut seen = 0;
    for (name, item) in crate::cni::read::shape::corpus_items("ciliumnode-") {
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        let whole = whole::cilium_node(&item, &mut p1);
        // From bytes, as the watch reads a list.
        let bytes = serde_json::to_vec(&item).expect("bytes");
        let lean: LeanCiliumNode = serde_json::from_slice(&bytes).expect("lean");
        let pruned = cilium_node(&lean, &mut p2);
        assert_eq!(format!("{whole:?}"), format!("{pruned:?}"), "{name}");
        assert_eq!(p1, p2, "{name}");
        seen += 1;
    }
    assert!(seen >= 10, "only {seen} CiliumNodes in the corpus");
}

#[test]
fn malformed_shapes_parse_and_pods_in_used_are_cut_to_one() {
    let v = serde_json::json!({
        "metadata": {"name": "n", "annotations": {"big": "x"}, "managedFields": [{}]},
        "spec": {"ipam": {"pool": {"10.0.0.1": {}, "10.0.0.2": {}}}, "eni": {"x": 1}},
        "status": {"ipam": {"used": {
            "10.0.0.5": {"owner": "router"}, "10.0.0.6": {"owner": "ns/a"}, "10.0.0.7": {"owner": "ns/b"}
        }}, "eni": {"enis": {}}}
    });
    let lean: LeanCiliumNode = serde_json::from_value(v).expect("lean");
    assert_eq!(lean.metadata.name.as_deref(), Some("n"));
    let used = match &lean.status.ipam.used {
        Shape::Map(used) => used.keys().collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(used, ["10.0.0.5", "10.0.0.6"]);
    assert!(lean.spec.ipam.pool_any);
    // `spec.eni` and `status.eni` have no field to be kept in.
    // Wrong types anywhere parse, and convert as the whole object does:
    // the same node, the same problems named.
    let mut named = 0;
    for junk in [
        serde_json::json!({"spec": "junk"}),
        serde_json::json!(42),
        serde_json::json!({"metadata": {"name": 7}}),
        serde_json::json!({"metadata": {"name": "n"}, "spec": {"ipam": []}}),
        serde_json::json!({"metadata": {"name": "n"},
            "spec": {"addresses": "x", "ingress": [1], "health": {"ipv4": 5},
                     "ipam": {"podCIDRs": 5, "pools": {"allocated": {}}, "pool": "x"}},
            "status": {"ipam": {"used": [1], "operator-status": {"error": 3}}}}),
        serde_json::json!({"metadata": {"name": "n"},
            "spec": {"addresses": [{"type": "CiliumInternalIP", "ip": "bad"}],
                     "ipam": {"podCIDRs": ["10.0.0.0/24", 1], "pool": {}}},
            "status": {"ipam": {"used": {"x": {"owner": "router"}, "10.0.0.9": 5},
                                "operator-status": "x"}}}),
    ] {
        let bytes = serde_json::to_vec(&junk).expect("bytes");
        let lean: LeanCiliumNode = serde_json::from_slice(&bytes).expect("never fails");
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        let whole = whole::cilium_node(&junk, &mut p1);
        let pruned = cilium_node(&lean, &mut p2);
        assert_eq!(format!("{whole:?}"), format!("{pruned:?}"), "{junk}");
        assert_eq!(p1, p2, "{junk}");
        named += p1.len();
    }
    assert!(named >= 10, "the junk names only {named} problems");
}
