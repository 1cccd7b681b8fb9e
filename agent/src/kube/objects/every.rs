//! One object's JSON read every way ipshadow reads an object: into each lean
//! struct the watches and lists read, then through its converter, and through
//! the converters that read JSON or k8s types. What the fuzz target drives,
//! so that it covers the paths the agent takes, lean types included.

use serde::Deserialize;
use serde_json::Value;

use super::{impact, sandbox_failure};
use crate::{
    inventory::Invalid,
    kube::cluster::lean::{
        LeanCaller, LeanCiliumNode, LeanEvent, LeanIp, LeanIpPool, LeanIpamBlock, LeanSlice,
        LeanSubnet,
    },
};

/// Reads `item` as every kind of object; what each converter refuses or
/// names goes into `problems`. Never panics, whatever `item` holds.
pub fn every_reading(item: &Value, keys: &[String], problems: &mut Vec<Invalid>) {
    let _ = super::service_json(item, problems);
    if let Ok(n) = LeanCiliumNode::deserialize(item) {
        let _ = super::cilium_node(&n, problems);
    }
    if let Ok(s) = LeanSubnet::deserialize(item) {
        let _ = super::subnet(&s, problems);
    }
    if let Ok(p) = LeanIpPool::deserialize(item) {
        let _ = super::ip_pool(&p, problems);
    }
    if let Ok(b) = LeanIpamBlock::deserialize(item) {
        let _ = super::ipam_block(&b, problems);
    }
    if let Ok(r) = LeanIp::deserialize(item) {
        let _ = super::kube_ovn_ip(&r, "fuzz", "fuzz");
    }
    if let Ok(e) = LeanEvent::deserialize(item) {
        let _ = sandbox_failure(&e);
    }
    if let Ok(s) = LeanSlice::deserialize(item) {
        let _ = impact::endpoint_slice(&s);
    }
    if let Ok(c) = LeanCaller::deserialize(item) {
        let kind = item["kind"].as_str().unwrap_or_default();
        let _ = impact::callers(&c, kind);
    }
    if let Ok(pod) = k8s_openapi::api::core::v1::Pod::deserialize(item) {
        let _ = super::pod(&pod, keys, problems);
    }
    if let Ok(node) = k8s_openapi::api::core::v1::Node::deserialize(item) {
        let _ = super::node_facts(&node, problems);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of the corpus reads without a panic, and a malformed
    /// CiliumNode is named (the lean path reached its converter).
    #[test]
    fn an_object_of_any_kind_is_read_every_way() {
        let mut problems = Vec::new();
        let keys = vec!["ovn.kubernetes.io/ip_address".to_owned()];
        for v in [
            serde_json::json!({"kind": "CiliumNode", "metadata": {"name": "n1"},
                               "spec": {"addresses": "junk"}}),
            serde_json::json!({"kind": "Event", "message": "x", "reason": 7}),
            serde_json::json!("a string"),
            serde_json::json!(null),
        ] {
            every_reading(&v, &keys, &mut problems);
        }
        assert!(problems.iter().any(|p| p.object == "n1"), "{problems:?}");
    }
}
