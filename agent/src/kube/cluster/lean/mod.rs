//! CiliumNodes as the watch holds them: only what detection reads.
//!
//! Every agent lists every CiliumNode. Held as `DynamicObject`s, the initial
//! list of a 5,000-node cluster is parsed whole into JSON trees — annotations,
//! managedFields, ENI and Azure interface details, one `status.ipam.used` entry
//! per pod — before conversion, and the allocator keeps that peak (~100 MiB per
//! agent in the fleet benchmark). Here serde reads each object straight from
//! the response's bytes into [`Lean`], which names the fields the converter
//! reads and skips every other one unparsed. A malformed object still parses
//! (an object where one is expected, any JSON at the leaves, which the
//! converter checks and names) and is reported, never failing the list.
//!
//! Subnets ([`subnet`]), Nodes ([`node`]) and Calico's IPPools ([`ippool`]) are read the same way: one object
//! at a time, only what their converters read kept, the rest skipped unparsed.

mod bounded;
mod event;
mod ippool;
mod node;
mod node_listed;
mod pod;
mod routes;
mod shape;
mod subnet;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, de};
use serde_json::Value;

use self::shape::{Shape, Skipped};
pub(in crate::kube) use self::{
    event::LeanEvent,
    ippool::{LeanIpPool, LeanIpamBlock},
    node::{LeanNode, LeanNodeMeta},
    node_listed::LeanListedNode,
    pod::LeanPod,
    routes::{LeanCaller, LeanSlice},
    subnet::LeanSubnet,
};

/// Implements kube's `Resource` for a cluster-scoped lean type holding its
/// `metadata`: the API path is the real kind's, the value ours. `metadata_only`:
/// ask for `PartialObjectMetadata` (kube then sends the Accept header that
/// makes the API server send only the metadata), as `PartialObjectMeta` does.
macro_rules! cluster_resource {
    ($ty:ty, $kind:literal, $group:literal, $version:literal, $plural:literal) => {
        cluster_resource!($ty, $kind, $group, $version, $plural, metadata_only: false);
    };
    ($ty:ty, $kind:literal, $group:literal, $version:literal, $plural:literal,
     metadata_only: $meta:literal) => {
        impl kube::core::Resource for $ty {
            type DynamicType = ();
            type Scope = kube::core::ClusterResourceScope;

            fn metadata_api() -> bool {
                $meta
            }

            fn kind((): &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group((): &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version((): &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural((): &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
use cluster_resource;

/// A custom resource cut to what its converter reads, as JSON.
pub(in crate::kube) trait LeanJson {
    /// What the converter reads.
    fn json(&self) -> &Value;
}

impl LeanJson for LeanCiliumNode {
    fn json(&self) -> &Value {
        &self.json
    }
}

impl<S> LeanJson for LeanSpec<S> {
    fn json(&self) -> &Value {
        &self.json
    }
}

/// A CiliumNode cut to what [`crate::kube::objects::cilium_node`] reads.
#[derive(Clone, Debug, Default)]
pub(in crate::kube) struct LeanCiliumNode {
    /// Name, uid and resourceVersion only.
    pub(in crate::kube) metadata: ObjectMeta,
    /// `{"metadata": {…}, "spec": {…}, "status": {"ipam": {…}}}`: [`Lean`] as JSON.
    pub(super) json: Value,
}

cluster_resource!(
    LeanCiliumNode,
    "CiliumNode",
    "cilium.io",
    "v2",
    "ciliumnodes"
);

impl<'de> Deserialize<'de> for LeanCiliumNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut lean = Shape::<Lean>::deserialize(d)?.or_default();
        let metadata = lean.metadata.object_meta();
        lean.cut();
        let json = serde_json::to_value(&lean).map_err(de::Error::custom)?;
        Ok(Self { metadata, json })
    }
}

/// The fields of a CiliumNode the converter reads; serde skips the others
/// unparsed. Each level is a [`Shape`], so that a wrong type anywhere parses.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct Lean {
    #[serde(skip_serializing_if = "Shape::is_absent")]
    metadata: Shape<Meta>,
    #[serde(skip_serializing_if = "Shape::is_absent")]
    spec: Shape<Spec>,
    #[serde(skip_serializing_if = "Shape::is_absent")]
    status: Shape<Status>,
}

impl Lean {
    /// Keeps, of the lists that grow with the node's pods or the cloud's
    /// interfaces, what the converter reads: the owners Cilium itself holds in
    /// `status.ipam.used`, and one entry besides of it and of `spec.ipam.pool`
    /// (the mark of a CRD-style allocator: it only asks whether there are any).
    fn cut(&mut self) {
        if let Shape::Map(spec) = &mut self.spec
            && let Shape::Map(ipam) = &mut spec.ipam
            && let Shape::Map(pool) = &mut ipam.pool
        {
            while pool.len() > 1 {
                pool.pop_last();
            }
        }
        if let Shape::Map(status) = &mut self.status
            && let Shape::Map(ipam) = &mut status.ipam
            && let Shape::Map(used) = &mut ipam.used
        {
            let infra = |u: &Shape<Used>| {
                matches!(u, Shape::Map(Used { owner: Some(Value::String(o)) })
                    if matches!(o.as_str(), "router" | "health" | "ingress"))
            };
            let marker = used
                .iter()
                .find(|(_, u)| !infra(u))
                .map(|(ip, _)| ip.clone());
            used.retain(|ip, u| infra(u) || Some(ip) == marker.as_ref());
        }
    }
}

/// A cluster-scoped object cut to its name and the fields of its `spec` that
/// `S` names (kube-ovn's Subnets, Calico's IPPools); serde skips the others
/// unparsed, and the leaves are any JSON: the converter checks their types.
#[derive(Clone, Debug, Default)]
pub(in crate::kube) struct LeanSpec<S> {
    /// Name, uid and resourceVersion only.
    pub(in crate::kube) metadata: ObjectMeta,
    /// `{"metadata": {"name"}, "spec": {…}}`: what the converter reads, as JSON.
    pub(super) json: Value,
    spec: std::marker::PhantomData<S>,
}

impl<'de, S: Deserialize<'de> + Serialize + Default> Deserialize<'de> for LeanSpec<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let lean = Shape::<SpecOnly<S>>::deserialize(d)?.or_default();
        let metadata = lean.metadata.object_meta();
        let json = serde_json::to_value(&lean).map_err(de::Error::custom)?;
        Ok(Self {
            metadata,
            json,
            spec: std::marker::PhantomData,
        })
    }
}

/// An object's metadata and `spec` as `S`, each a [`Shape`] so that a wrong
/// type parses.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(
    default,
    bound(
        deserialize = "S: Deserialize<'de> + Default",
        serialize = "S: Serialize + Default"
    )
)]
struct SpecOnly<S> {
    #[serde(skip_serializing_if = "Shape::is_absent")]
    metadata: Shape<Meta>,
    #[serde(skip_serializing_if = "Shape::is_absent")]
    spec: Shape<S>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<Value>,
    #[serde(skip_serializing)]
    uid: Option<Value>,
    #[serde(skip_serializing)]
    resource_version: Option<Value>,
}

impl Shape<Meta> {
    /// What the watcher reads of the metadata (the key, and where to resume):
    /// the strings among name, uid and resourceVersion.
    fn object_meta(&self) -> ObjectMeta {
        let Self::Map(meta) = self else {
            return ObjectMeta::default();
        };
        let text = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).map(str::to_owned);
        ObjectMeta {
            name: text(&meta.name),
            uid: text(&meta.uid),
            resource_version: text(&meta.resource_version),
            ..ObjectMeta::default()
        }
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct Spec {
    #[serde(skip_serializing_if = "Option::is_none")]
    addresses: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ingress: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    health: Option<Value>,
    #[serde(skip_serializing_if = "Shape::is_absent")]
    ipam: Shape<SpecIpam>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct SpecIpam {
    #[serde(rename = "podCIDRs", skip_serializing_if = "Option::is_none")]
    pod_cidrs: Option<Value>,
    #[serde(skip_serializing_if = "Shape::is_absent")]
    pools: Shape<Pools>,
    /// ENI/Azure's available addresses: their keys only.
    #[allow(
        clippy::zero_sized_map_values,
        reason = "a JSON object read for its keys, written back as one"
    )]
    #[serde(skip_serializing_if = "Shape::is_absent")]
    pool: Shape<BTreeMap<String, Skipped>>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct Pools {
    #[serde(skip_serializing_if = "Option::is_none")]
    allocated: Option<Value>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct Status {
    #[serde(skip_serializing_if = "Shape::is_absent")]
    ipam: Shape<StatusIpam>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct StatusIpam {
    /// One entry per address the node's allocator handed out.
    #[serde(skip_serializing_if = "Shape::is_absent")]
    used: Shape<BTreeMap<String, Shape<Used>>>,
    #[serde(rename = "operator-status", skip_serializing_if = "Shape::is_absent")]
    operator_status: Shape<OperatorStatus>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct OperatorStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

/// One `status.ipam.used` entry: its owner, nothing else.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
struct Used {
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<Value>,
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::kube::objects;

    /// Every real CiliumNode converts to the same thing lean as whole.
    #[test]
    fn the_real_objects_convert_the_same_lean_or_whole() {
        let mut seen = 0;
        for (name, item) in super::shape::corpus_items("ciliumnode-") {
            let (mut p1, mut p2) = (Vec::new(), Vec::new());
            let whole = objects::cilium_node(&item, &mut p1);
            // From bytes, as the watch reads a list.
            let bytes = serde_json::to_vec(&item).expect("bytes");
            let lean: LeanCiliumNode = serde_json::from_slice(&bytes).expect("lean");
            let pruned = objects::cilium_node(&lean.json, &mut p2);
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
            let whole = objects::cilium_node(&junk, &mut p1);
            let pruned = objects::cilium_node(&lean.json, &mut p2);
            assert_eq!(format!("{whole:?}"), format!("{pruned:?}"), "{junk}");
            assert_eq!(p1, p2, "{junk}");
            named += p1.len();
        }
        assert!(named >= 10, "the junk names only {named} problems");
    }
}
