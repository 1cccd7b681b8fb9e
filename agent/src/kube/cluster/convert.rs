//! Watched objects converted to inventory types, keyed for the caches.

use k8s_openapi::api::core::v1::{ConfigMap, Pod as K8sPod};

use kube::Resource;

use super::{
    cache::Converted,
    lean::{LeanNode, LeanNodeMeta},
};
use crate::{
    inventory::{CiliumConfig, CniNode, Invalid, NodeFacts, Pod},
    kube::objects,
};

fn pod_key(p: &K8sPod) -> String {
    let m = &p.metadata;
    format!(
        "{}/{}/{}",
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or(""),
        m.uid.as_deref().unwrap_or("")
    )
}

pub(super) fn convert_pod(p: &K8sPod, keys: &[String]) -> Converted<Pod> {
    let mut problems = Vec::new();
    let pod = objects::pod(p, keys, &mut problems);
    (pod_key(p), Ok(pod), problems)
}

/// A CNI's object (a CiliumNode, a Subnet, an IPPool) converted by
/// `convert`, keyed by its name.
pub(super) fn by_name<L: Resource, T>(
    o: &L,
    convert: fn(&L, &mut Vec<Invalid>) -> Result<T, Invalid>,
) -> Converted<T> {
    let mut problems = Vec::new();
    let r = convert(o, &mut problems);
    (o.meta().name.clone().unwrap_or_default(), r, problems)
}

pub(super) fn convert_node(n: &LeanNode) -> Converted<NodeFacts> {
    let mut problems = Vec::new();
    let facts = objects::node_facts(n, &mut problems);
    let facts = objects::with_status_addresses(facts, n, &mut problems);
    (facts.name.clone(), Ok(facts), problems)
}

/// A Node's metadata as Cilium's addresses in its annotations (an entry with
/// none for a Node without them, so that a removed annotation clears).
pub(super) fn convert_node_annotations(n: &LeanNodeMeta) -> Converted<CniNode> {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mut problems = Vec::new();
    let node = n
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| objects::node_annotations(&name, a, &mut problems))
        .unwrap_or_else(|| CniNode {
            name: name.clone(),
            ..CniNode::default()
        });
    (name, Ok(node), problems)
}

pub(super) fn convert_cilium_config(cm: &ConfigMap) -> Converted<CiliumConfig> {
    let mut problems = Vec::new();
    let data = cm.data.clone().unwrap_or_default();
    let config = objects::cilium_config(&data, &mut problems);
    (
        cm.metadata.name.clone().unwrap_or_default(),
        Ok(config),
        problems,
    )
}
