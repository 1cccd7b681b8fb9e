//! Calico's lean IPPool (`cni::calico`) reads as the whole object does.

use serde_json::Value;

use super::whole_calico;
use crate::cni::calico::{LeanIpPool, ip_pool};

/// The real IPPools of the corpus: the same pool (or refusal) lean as whole.
#[test]
fn real_ippools_read_the_same_lean_as_whole() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/realworld/calico"
    );
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("corpus") {
        let path = entry.expect("entry").path();
        let name = path.display().to_string();
        if !path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("ippool-"))
        {
            continue;
        }
        let list: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        let items = list["items"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![list]);
        for item in items {
            let bytes = serde_json::to_vec(&item).expect("bytes");
            let lean: LeanIpPool = serde_json::from_slice(&bytes).expect("lean");
            assert_eq!(
                lean.metadata.name.as_deref(),
                item.pointer("/metadata/name").and_then(Value::as_str),
                "{name}"
            );
            let (mut p1, mut p2) = (Vec::new(), Vec::new());
            let whole = whole_calico::ip_pool(&item, &mut p1);
            let pruned = ip_pool(&lean, &mut p2);
            assert!(whole.is_ok(), "{name}: {whole:?}");
            assert_eq!(whole, pruned, "{name}");
            assert_eq!(p1, p2, "{name}");
            seen += 1;
        }
    }
    assert!(seen >= 3, "only {seen} IPPools in the corpus");
}

#[test]
fn wrong_types_parse_and_are_named_as_the_whole_object_names_them() {
    for junk in [
        serde_json::json!({"metadata": {"name": "p"}, "spec": "x"}),
        serde_json::json!({"metadata": {"name": 5}, "spec": {"cidr": "10.0.0.0/16"}}),
        serde_json::json!({"metadata": {"name": "p"}, "spec": {"cidr": 7, "blockSize": "x",
            "disabled": "no", "allowedUses": "Workload"}}),
    ] {
        let bytes = serde_json::to_vec(&junk).expect("bytes");
        let lean: LeanIpPool = serde_json::from_slice(&bytes).expect("never fails");
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        // Refused both ways, naming the same object (a spec of the wrong
        // type reads as `[]` lean, so serde names another type).
        match (
            whole_calico::ip_pool(&junk, &mut p1),
            ip_pool(&lean, &mut p2),
        ) {
            (Err(whole), Err(pruned)) => {
                assert_eq!(
                    (whole.resource, &whole.object),
                    (pruned.resource, &pruned.object)
                );
            }
            other => panic!("{junk}: {other:?}"),
        }
        assert_eq!(p1, p2, "{junk}");
    }
}
