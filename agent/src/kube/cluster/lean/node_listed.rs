//! Nodes as the one-shot lists read them (`check`'s own Node, `audit`'s
//! pages of every Node): what [`objects::node_facts`],
//! [`objects::with_addresses`] and [`objects::node_annotations`] read, the
//! rest (images, managedFields, nodeInfo, every other annotation) skipped.
//!
//! [`objects::node_facts`]: crate::kube::objects::node_facts
//! [`objects::with_addresses`]: crate::kube::objects::with_addresses
//! [`objects::node_annotations`]: crate::kube::objects::node_annotations

use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Deserializer};

use super::node::LeanNodeWire;

/// A Node cut to its name, uid, read annotations, pod CIDRs, allocatable
/// pods, conditions and addresses.
#[derive(Clone, Debug, Default)]
pub(in crate::kube) struct LeanListedNode {
    /// The kept fields as a `Node`, for the converters.
    pub(in crate::kube) node: Node,
    /// Whether any `projectcalico.org/` annotation was there (calico-node's
    /// Kubernetes datastore writes them), read or not: the converters see
    /// only the annotations they read.
    pub(in crate::kube) calico_annotated: bool,
}

impl<'de> Deserialize<'de> for LeanListedNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (mut node, annotations) = LeanNodeWire::deserialize(d)?.split();
        let calico_annotated = annotations.as_ref().is_some_and(|a| a.1);
        node.metadata.annotations = annotations.map(|a| a.0);
        Ok(Self {
            node,
            calico_annotated,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kube::objects;

    /// What the one-shot lists make of a Node: its facts with addresses, and
    /// Cilium's addresses in its annotations.
    fn converted(n: &Node, calico: bool) -> String {
        let mut p = Vec::new();
        let mut facts = objects::with_addresses(objects::node_facts(n, &mut p), n, &mut p);
        facts.calico_annotated |= calico;
        let name = n.metadata.name.clone().unwrap_or_default();
        let annotations = n.metadata.annotations.clone().unwrap_or_default();
        let annotated = objects::node_annotations(&name, &annotations, &mut p);
        format!("{facts:?} {annotated:?} {p:?}")
    }

    #[test]
    fn a_listed_node_converts_the_same_lean_as_whole() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus/realworld");
        let mut nodes = Vec::new();
        for sub in ["ovn-kubernetes", "flannel", "calico"] {
            for entry in std::fs::read_dir(format!("{dir}/{sub}")).expect("corpus") {
                let bytes = std::fs::read(entry.expect("entry").path()).unwrap_or_default();
                let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
                    continue;
                };
                let items = v["items"].as_array().cloned().unwrap_or_else(|| vec![v]);
                nodes.extend(
                    items
                        .into_iter()
                        .filter(|i| i["kind"] == "Node" && i["apiVersion"] == "v1"),
                );
            }
        }
        assert!(nodes.len() >= 4, "only {} Nodes in the corpus", nodes.len());
        nodes.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "uid": "u1", "managedFields": [{"manager": "kubelet"}],
                "annotations": {"network.cilium.io/ipv4-cilium-host": "10.0.0.1",
                                "projectcalico.org/kube-labels": "{}", "other": "x"}},
            "spec": {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"]},
            "status": {"allocatable": {"pods": "110", "cpu": "4"},
                       "addresses": [{"type": "InternalIP", "address": "192.168.1.10"},
                                     {"type": "Hostname", "address": "n1"}],
                       "images": [{"names": ["pause"], "sizeBytes": 1}]}
        }));
        for item in nodes {
            let whole: Node = serde_json::from_value(item.clone()).expect("a Node");
            let bytes = serde_json::to_vec(&item).expect("bytes");
            let lean: LeanListedNode = serde_json::from_slice(&bytes).expect("lean");
            assert!(lean.node.metadata.managed_fields.is_none());
            assert!(lean.node.status.as_ref().is_none_or(|s| s.images.is_none()));
            assert_eq!(
                converted(&lean.node, lean.calico_annotated),
                converted(&whole, false),
                "{item}"
            );
        }
    }
}
