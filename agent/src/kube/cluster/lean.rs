//! CiliumNodes as the watch holds them: only what detection reads.
//!
//! Every agent lists every CiliumNode. Held as `DynamicObject`s, the initial
//! list of a 5,000-node cluster is parsed whole into JSON trees — annotations,
//! managedFields, ENI and Azure interface details, one `status.ipam.used` entry
//! per pod — before conversion, and the allocator keeps that peak (~100 MiB per
//! agent in the fleet benchmark). Each object is parsed on its own here, pruned
//! at once to the fields the converter reads, and the rest dropped, so a list
//! costs one object's tree at a time. A malformed object still parses (every
//! field is optional JSON) and is reported by the converter, never failing the list.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, Resource};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// A CiliumNode pruned to what [`crate::kube::objects::cilium_node`] reads.
#[derive(Clone, Debug, Default)]
pub(super) struct LeanCiliumNode {
    /// Name, uid and resourceVersion only.
    pub(super) metadata: ObjectMeta,
    /// `{"metadata": {"name"}, "spec": {…}, "status": {"ipam": {"used"}}}`, pruned.
    pub(super) json: Value,
}

impl Resource for LeanCiliumNode {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        "CiliumNode".into()
    }
    fn group((): &()) -> Cow<'_, str> {
        "cilium.io".into()
    }
    fn version((): &()) -> Cow<'_, str> {
        "v2".into()
    }
    fn plural((): &()) -> Cow<'_, str> {
        "ciliumnodes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de> Deserialize<'de> for LeanCiliumNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self::from_value(Value::deserialize(d)?))
    }
}

/// `v[key]` moved out, if it is there.
fn take(v: &mut Value, key: &str) -> Option<Value> {
    v.as_object_mut().and_then(|m| m.remove(key))
}

/// A map cut to its entries `keep` wants, plus one other entry when there were
/// others: the converter only asks whether there were any.
fn cut(v: Value, keep: impl Fn(&Value) -> bool) -> Value {
    let Value::Object(map) = v else { return v };
    let mut out = Map::new();
    let mut marker = None;
    for (k, e) in map {
        if keep(&e) {
            out.insert(k, e);
        } else if marker.is_none() {
            marker = Some((k, e));
        }
    }
    if let Some((k, e)) = marker {
        out.insert(k, e);
    }
    Value::Object(out)
}

impl LeanCiliumNode {
    fn from_value(mut v: Value) -> Self {
        let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let metadata = ObjectMeta {
            name: str_at(&v, "/metadata/name"),
            uid: str_at(&v, "/metadata/uid"),
            resource_version: str_at(&v, "/metadata/resourceVersion"),
            ..ObjectMeta::default()
        };
        let mut spec = take(&mut v, "spec").unwrap_or(Value::Null);
        let mut lean_spec = Map::new();
        if spec.is_object() {
            for key in ["addresses", "ingress", "health"] {
                if let Some(x) = take(&mut spec, key) {
                    lean_spec.insert(key.to_owned(), x);
                }
            }
            if let Some(mut ipam) = take(&mut spec, "ipam") {
                let mut lean_ipam = Map::new();
                if ipam.is_object() {
                    for key in ["podCIDRs", "pools"] {
                        if let Some(x) = take(&mut ipam, key) {
                            lean_ipam.insert(key.to_owned(), x);
                        }
                    }
                    // ENI/Azure's available addresses: only whether there are any counts.
                    if let Some(pool) = take(&mut ipam, "pool") {
                        lean_ipam.insert("pool".to_owned(), cut(pool, |_| false));
                    }
                    lean_spec.insert("ipam".to_owned(), Value::Object(lean_ipam));
                } else {
                    lean_spec.insert("ipam".to_owned(), ipam);
                }
            }
        }
        let used = v
            .pointer_mut("/status/ipam/used")
            .map(Value::take)
            .map(|u| {
                // Cilium's own addresses, and one pod's as the mark of a CRD-style allocator.
                cut(u, |e| {
                    matches!(
                        e.get("owner").and_then(Value::as_str),
                        Some("router" | "health" | "ingress")
                    )
                })
            });
        let operator_error = v
            .pointer_mut("/status/ipam/operator-status/error")
            .map(Value::take);
        let mut json = serde_json::json!({
            "metadata": {"name": metadata.name},
            "spec": if spec.is_object() { Value::Object(lean_spec) } else { spec },
        });
        let mut ipam = Map::new();
        if let Some(used) = used {
            ipam.insert("used".to_owned(), used);
        }
        if let Some(error) = operator_error {
            ipam.insert(
                "operator-status".to_owned(),
                serde_json::json!({ "error": error }),
            );
        }
        if !ipam.is_empty() {
            json["status"] = serde_json::json!({ "ipam": ipam });
        }
        Self { metadata, json }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::objects;

    /// Every real CiliumNode converts to the same thing lean as whole.
    #[test]
    fn the_real_objects_convert_the_same_lean_or_whole() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus/realworld");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("corpus") {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.starts_with("ciliumnode-") {
                continue;
            }
            let v: Value =
                serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
            let items = match v.get("items").and_then(Value::as_array) {
                Some(items) => items.clone(),
                None => vec![v],
            };
            for item in items {
                let (mut p1, mut p2) = (Vec::new(), Vec::new());
                let whole = objects::cilium_node(&item, &mut p1);
                let lean: LeanCiliumNode = serde_json::from_value(item.clone()).expect("lean");
                let pruned = objects::cilium_node(&lean.json, &mut p2);
                assert_eq!(format!("{whole:?}"), format!("{pruned:?}"), "{name}");
                assert_eq!(p1, p2, "{name}");
                seen += 1;
            }
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
        assert_eq!(
            lean.json
                .pointer("/status/ipam/used")
                .and_then(Value::as_object)
                .map(Map::len),
            Some(2)
        );
        assert_eq!(
            lean.json
                .pointer("/spec/ipam/pool")
                .and_then(Value::as_object)
                .map(Map::len),
            Some(1)
        );
        assert!(
            lean.json.pointer("/spec/eni").is_none() && lean.json.pointer("/status/eni").is_none()
        );
        for junk in [
            serde_json::json!({"spec": "junk"}),
            serde_json::json!(42),
            serde_json::json!({"spec": {"ipam": []}}),
        ] {
            let lean: LeanCiliumNode = serde_json::from_value(junk.clone()).expect("never fails");
            let _ = objects::cilium_node(&lean.json, &mut Vec::new());
        }
    }
}
