//! Pods as the one-shot lists read them (`check`'s pods of its node,
//! `audit`'s pages, the lookups of who holds an address): what
//! [`objects::pod`] reads, the rest skipped unparsed.
//!
//! Anyone who may create pods sizes them: 110 pods of 256 KiB of annotations
//! each on one node is 28 MB of JSON, and the typed `Pod` builds every
//! container, volume, env var and `managedFields` entry besides. Kept here:
//! the metadata the converter reads (the annotations whole: which ones are
//! read is configured at run time, and the API server bounds them to 256 KiB
//! an object), `spec.nodeName`, `spec.hostNetwork`, `status.phase` and the
//! pod's IPs, typed as in `Pod` (a value of the wrong type fails the object
//! as it did).
//!
//! [`objects::pod`]: crate::kube::objects::pod

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Pod, PodIP, PodSpec, PodStatus},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time},
};
use serde::Deserialize;

/// A pod cut to what the converter reads.
#[derive(Clone, Debug, Default)]
pub(in crate::kube) struct LeanPod(pub(in crate::kube) Pod);

impl<'de> Deserialize<'de> for LeanPod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(d)?;
        let m = w.metadata;
        let metadata = ObjectMeta {
            namespace: m.namespace,
            name: m.name,
            uid: m.uid,
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            owner_references: m.owner_references,
            ..ObjectMeta::default()
        };
        let spec = w.spec.map(|s| PodSpec {
            node_name: s.node_name,
            host_network: s.host_network,
            ..PodSpec::default()
        });
        let status = w.status.map(|s| PodStatus {
            phase: s.phase,
            pod_ip: s.pod_ip,
            pod_ips: s.pod_ips,
            ..PodStatus::default()
        });
        Ok(Self(Pod {
            metadata,
            spec,
            status,
        }))
    }
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: Meta,
    spec: Option<Spec>,
    status: Option<Status>,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    owner_references: Option<Vec<OwnerReference>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    node_name: Option<String>,
    host_network: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    phase: Option<String>,
    #[serde(rename = "podIP")]
    pod_ip: Option<String>,
    #[serde(rename = "podIPs")]
    pod_ips: Option<Vec<PodIP>>,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::kube::objects;

    fn keys() -> Vec<String> {
        vec!["ovn.kubernetes.io/ip_address".to_owned()]
    }

    /// Every real pod converts to the same thing lean as whole.
    #[test]
    fn real_pods_convert_the_same_lean_or_whole() {
        let mut seen = 0;
        for (name, item) in super::super::shape::corpus_items("pod-") {
            if item["kind"] != "Pod" {
                continue;
            }
            let whole: Pod = serde_json::from_value(item.clone()).expect("a Pod");
            let bytes = serde_json::to_vec(&item).expect("bytes");
            let lean: LeanPod = serde_json::from_slice(&bytes).expect("lean");
            let (mut p1, mut p2) = (Vec::new(), Vec::new());
            assert_eq!(
                objects::pod(&lean.0, &keys(), &mut p1),
                objects::pod(&whole, &keys(), &mut p2),
                "{name}"
            );
            assert_eq!(p1, p2, "{name}");
            seen += 1;
        }
        assert!(seen >= 10, "only {seen} pods in the corpus");
    }

    #[test]
    fn what_the_converter_never_reads_is_not_kept() {
        let item = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "t", "uid": "u",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "x"}, "managedFields": [{"manager": "kubectl"}],
                "annotations": {"ovn.kubernetes.io/ip_address": "10.0.0.9"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                     "uid": "r", "controller": true}]},
            "spec": {"nodeName": "n1", "hostNetwork": false,
                     "containers": [{"name": "c", "image": "i", "env": [{"name": "A", "value": "B"}]}],
                     "volumes": [{"name": "v", "emptyDir": {}}]},
            "status": {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}],
                       "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0,
                                              "image": "i", "imageID": "x"}],
                       "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let lean: LeanPod = serde_json::from_value(item.clone()).expect("lean");
        let p = &lean.0;
        assert!(p.metadata.labels.is_none() && p.metadata.managed_fields.is_none());
        let spec = p.spec.as_ref().expect("spec");
        assert!(spec.containers.is_empty() && spec.volumes.is_none());
        let status = p.status.as_ref().expect("status");
        assert!(status.container_statuses.is_none() && status.conditions.is_none());
        let whole: Pod = serde_json::from_value(item).expect("a Pod");
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        assert_eq!(
            objects::pod(p, &keys(), &mut p1),
            objects::pod(&whole, &keys(), &mut p2)
        );
        // A pod of no fields at all still reads (and converts as empty).
        let empty: LeanPod =
            serde_json::from_value(Value::Object(serde_json::Map::new())).expect("lean");
        assert!(empty.0.spec.is_none());
    }
}
