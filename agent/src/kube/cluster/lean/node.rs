//! Nodes as the watches hold them: this node's Node, cut to what
//! [`objects::node_facts`] reads, and every Node's metadata (read only while
//! the cluster has no CiliumNodes), cut to the annotations
//! [`objects::node_annotations`] reads.
//!
//! A Node carries kilobytes the agent never reads: managedFields, labels and
//! annotations of every other component, `status.images` (every image on the
//! node, with its digests), `status.volumesAttached`, `nodeInfo`. The typed
//! `Node` and `PartialObjectMeta<Node>` built all of it, for every Node at
//! once in a list. Here the fields kept are typed as in `Node` (a value of
//! the wrong type fails the object as it did); the others are skipped unparsed.
//!
//! [`objects::node_facts`]: crate::kube::objects::node_facts
//! [`objects::node_annotations`]: crate::kube::objects::node_annotations

use std::{collections::BTreeMap, fmt, marker::PhantomData};

use k8s_openapi::{
    api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus},
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::ObjectMeta},
};
use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, Visitor},
};

use super::cluster_resource;
use crate::cni::annotations::node_annotation_read;

/// This node's Node: a `Node` holding its name, uid, resourceVersion, pod
/// CIDRs, allocatable pods, conditions and addresses, nothing else.
#[derive(Clone, Debug, Default)]
pub(in crate::kube) struct LeanNode(Node);

cluster_resource!(LeanNode, "Node", "", "v1", "nodes");

impl std::ops::Deref for LeanNode {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.0
    }
}

impl std::ops::DerefMut for LeanNode {
    fn deref_mut(&mut self) -> &mut Node {
        &mut self.0
    }
}

impl<'de> Deserialize<'de> for LeanNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self(LeanNodeWire::deserialize(d)?.split().0))
    }
}

/// A Node's metadata cut to its name, uid, resourceVersion and the
/// annotations the converter reads.
#[derive(Clone, Debug, Default)]
pub(in crate::kube) struct LeanNodeMeta {
    pub(in crate::kube) metadata: ObjectMeta,
}

// Metadata only on the wire, as `PartialObjectMeta<Node>` asked: a Node's
// status (images, conditions) never leaves the API server.
cluster_resource!(LeanNodeMeta, "Node", "", "v1", "nodes", metadata_only: true);

impl<'de> Deserialize<'de> for LeanNodeMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let lean = LeanNodeMetaWire::deserialize(d)?;
        let mut metadata = lean.metadata.object_meta();
        metadata.annotations = lean.metadata.annotations.map(|a| a.0);
        Ok(Self { metadata })
    }
}

#[derive(Deserialize)]
pub(super) struct LeanNodeWire {
    #[serde(default)]
    metadata: Meta,
    spec: Option<Spec>,
    status: Option<Status>,
}

impl LeanNodeWire {
    /// The kept fields as a `Node` without annotations, and its annotations.
    pub(super) fn split(self) -> (Node, Option<Annotations>) {
        let spec = self.spec.map(|s| NodeSpec {
            pod_cidr: s.pod_cidr,
            pod_cidrs: s.pod_cidrs,
            ..NodeSpec::default()
        });
        let status = self.status.map(|s| NodeStatus {
            allocatable: s
                .allocatable
                .map(|a| a.0.into_iter().map(|q| ("pods".to_owned(), q)).collect()),
            conditions: s.conditions,
            addresses: s.addresses,
            ..NodeStatus::default()
        });
        let node = Node {
            metadata: self.metadata.object_meta(),
            spec,
            status,
        };
        (node, self.metadata.annotations)
    }
}

#[derive(Deserialize)]
struct LeanNodeMetaWire {
    #[serde(default)]
    metadata: Meta,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    annotations: Option<Annotations>,
}

impl Meta {
    fn object_meta(&self) -> ObjectMeta {
        ObjectMeta {
            name: self.name.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            ..ObjectMeta::default()
        }
    }
}

#[derive(Deserialize)]
struct Spec {
    #[serde(rename = "podCIDR")]
    pod_cidr: Option<String>,
    #[serde(rename = "podCIDRs")]
    pod_cidrs: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Status {
    allocatable: Option<AllocatablePods>,
    conditions: Option<Vec<NodeCondition>>,
    /// InternalIP and ExternalIP entries become the Node's addresses.
    addresses: Option<Vec<k8s_openapi::api::core::v1::NodeAddress>>,
}

/// `status.allocatable`'s `pods`, the other resources skipped.
struct AllocatablePods(Option<Quantity>);

impl<'de> Deserialize<'de> for AllocatablePods {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(KeptVisitor(|k: &str| k == "pods", PhantomData::<Quantity>))
            .map(|mut kept| AllocatablePods(kept.remove("pods")))
    }
}

/// The annotations [`node_annotation_read`] names, the others skipped; and
/// whether any of calico-node's (`projectcalico.org/…`) was there.
pub(super) struct Annotations(pub(super) BTreeMap<String, String>, pub(super) bool);

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut calico = false;
        let kept = d.deserialize_map(KeptVisitor(
            |k: &str| {
                calico |= k.starts_with("projectcalico.org/");
                node_annotation_read(k)
            },
            PhantomData,
        ))?;
        Ok(Annotations(kept, calico))
    }
}

/// Reads a JSON object keeping the entries whose key `keep` accepts; the
/// values of the others are skipped unparsed.
struct KeptVisitor<F, V>(F, PhantomData<V>);

impl<'de, F: FnMut(&str) -> bool, V: Deserialize<'de>> Visitor<'de> for KeptVisitor<F, V> {
    type Value = BTreeMap<String, V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut kept = BTreeMap::new();
        while let Some(key) = m.next_key::<String>()? {
            if (self.0)(&key) {
                kept.insert(key, m.next_value()?);
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::kube::objects;

    /// The v1 Nodes of the corpus (ovn-kubernetes', flannel's), from bytes
    /// as a watch reads them.
    fn real_nodes() -> Vec<(String, Value)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus/realworld");
        let mut nodes = Vec::new();
        for sub in ["", "ovn-kubernetes", "flannel", "calico"] {
            for entry in std::fs::read_dir(format!("{dir}/{sub}")).expect("corpus") {
                let path = entry.expect("entry").path();
                let Ok(v) =
                    serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap_or_default())
                else {
                    continue;
                };
                let items = match v.get("items").and_then(Value::as_array) {
                    Some(items) => items.clone(),
                    None => vec![v],
                };
                let name = path.display().to_string();
                nodes.extend(
                    items
                        .into_iter()
                        .filter(|i| i["kind"] == "Node" && i["apiVersion"] == "v1")
                        .map(|i| (name.clone(), i)),
                );
            }
        }
        nodes
    }

    #[test]
    fn real_nodes_keep_what_node_facts_reads() {
        let nodes = real_nodes();
        assert!(nodes.len() >= 4, "only {} Nodes in the corpus", nodes.len());
        for (file, item) in nodes {
            let bytes = serde_json::to_vec(&item).expect("bytes");
            let lean: LeanNode = serde_json::from_slice(&bytes).expect("lean");
            let whole: Node = serde_json::from_value(item.clone()).expect("a Node");
            assert_eq!(lean.metadata.name, whole.metadata.name, "{file}");
            assert_eq!(lean.metadata.uid, whole.metadata.uid, "{file}");
            assert_eq!(lean.metadata.annotations, None, "{file}: not read");
            let spec = lean.spec.clone().unwrap_or_default();
            let want = whole.spec.clone().unwrap_or_default();
            assert_eq!(
                (spec.pod_cidr, spec.pod_cidrs),
                (want.pod_cidr, want.pod_cidrs),
                "{file}"
            );
            assert_eq!(spec.provider_id, None, "{file}: not read");
            let (mut p1, mut p2) = (Vec::new(), Vec::new());
            let facts = objects::node_facts(&lean, &mut p1);
            assert_eq!(facts, objects::node_facts(&whole, &mut p2), "{file}");
            assert_eq!(p1, p2, "{file}");
        }
    }

    #[test]
    fn real_nodes_keep_the_annotations_node_annotations_reads() {
        let mut kept = 0;
        for (file, item) in real_nodes() {
            let bytes = serde_json::to_vec(&item).expect("bytes");
            let lean: LeanNodeMeta = serde_json::from_slice(&bytes).expect("lean");
            let whole: Node = serde_json::from_value(item.clone()).expect("a Node");
            let all = whole.metadata.annotations.clone().unwrap_or_default();
            let read: BTreeMap<String, String> = all
                .iter()
                .filter(|(k, _)| node_annotation_read(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let got = lean.metadata.annotations.clone().unwrap_or_default();
            assert_eq!(got, read, "{file}");
            assert!(got.len() < all.len(), "{file}: others dropped");
            kept += got.len();
            let name = lean.metadata.name.clone().unwrap_or_default();
            let (mut p1, mut p2) = (Vec::new(), Vec::new());
            assert_eq!(
                objects::node_annotations(&name, &got, &mut p1),
                objects::node_annotations(&name, &all, &mut p2),
                "{file}"
            );
            assert_eq!(p1, p2, "{file}");
        }
        // ovn-kubernetes' k8s.ovn.org/node-subnets on its three Nodes.
        assert!(kept >= 3, "only {kept} annotations kept");
    }

    #[test]
    fn every_nodes_metadata_is_asked_for_alone_this_nodes_whole() {
        use kube::core::Resource as _;
        assert!(LeanNodeMeta::metadata_api());
        assert!(!LeanNode::metadata_api());
        assert_eq!(LeanNodeMeta::url_path(&(), None), "/api/v1/nodes");
    }

    #[test]
    fn a_nodes_status_keeps_allocatable_pods_and_conditions_only() {
        let item = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "7",
                "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
                "annotations": {"network.cilium.io/ipv4-cilium-host": "10.0.0.1",
                                "io.cilium.network.ipv4-health-ip": "10.0.0.2",
                                "network.cilium.io/other": "x", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                                "projectcalico.org/IPv4VXLANTunnelAddr": "10.1.0.1"}},
            "spec": {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"], "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "capacity": {"pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"},
                               {"type": "IPShadowed", "status": "False", "reason": "NoCollisions"}],
                "images": [{"names": ["registry.k8s.io/pause@sha256:abc", "registry.k8s.io/pause:3.9"], "sizeBytes": 321}],
                "nodeInfo": {"kubeletVersion": "v1.34.0"}
            }
        });
        let bytes = serde_json::to_vec(&item).expect("bytes");
        let lean: LeanNode = serde_json::from_slice(&bytes).expect("lean");
        assert_eq!(lean.metadata.resource_version.as_deref(), Some("7"));
        assert!(lean.metadata.managed_fields.is_none());
        let status = lean.status.clone().unwrap_or_default();
        let allocatable = status.allocatable.unwrap_or_default();
        assert_eq!(allocatable.keys().collect::<Vec<_>>(), ["pods"]);
        assert_eq!(allocatable.get("pods"), Some(&Quantity("110".into())));
        assert_eq!(status.conditions.map(|c| c.len()), Some(2));
        assert!(status.images.is_none() && status.capacity.is_none() && status.node_info.is_none());
        assert!(lean.spec.as_ref().is_some_and(|s| s.taints.is_none()));
        let whole: Node = serde_json::from_value(item).expect("a Node");
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        assert_eq!(
            objects::node_facts(&lean, &mut p1),
            objects::node_facts(&whole, &mut p2)
        );
        assert_eq!(p1, p2);
        let meta: LeanNodeMeta = serde_json::from_slice(&bytes).expect("lean");
        let kept = meta.metadata.annotations.unwrap_or_default();
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            [
                "io.cilium.network.ipv4-health-ip",
                "network.cilium.io/ipv4-cilium-host",
                "projectcalico.org/IPv4VXLANTunnelAddr"
            ]
        );
    }
}
