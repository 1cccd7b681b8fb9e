//! A Node as detection needs it (its pod ranges, how many pods kubelet
//! accepts, its addresses).

use k8s_openapi::api::core::v1::Node;

use crate::cni::read::{bounded, quote, reporter};
use crate::inventory::{
    ip_text::{parse_cidr, parse_ip},
    text::cleaned,
};
use crate::{
    inventory::{ConditionSeen, Invalid, NodeAddress, NodeFacts},
    report::condition::CONDITION_TYPE,
};

/// Most CIDRs read from one field: a real config has one or two per family.
const CIDRS_MAX: usize = 64;

/// `n` as [`NodeFacts`]; fields that are not what they should be are named in `problems`.
pub fn node_facts(n: &Node, problems: &mut Vec<Invalid>) -> NodeFacts {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mut bad = reporter(problems, "nodes", &name);
    let spec = n.spec.as_ref();
    let raw: Vec<String> = spec
        .and_then(|s| s.pod_cidrs.clone())
        .filter(|v| !v.is_empty())
        .or_else(|| spec.and_then(|s| s.pod_cidr.clone()).map(|c| vec![c]))
        .unwrap_or_default();
    let mut pod_cidrs = Vec::new();
    for c in raw.iter().take(CIDRS_MAX) {
        match parse_cidr(c) {
            Some(c) => pod_cidrs.push(c.net),
            None => bad(format!(
                "spec.podCIDRs entry {} is not a CIDR; ignored",
                quote(c)
            )),
        }
    }
    let status = n.status.as_ref();
    let pods = status.and_then(|s| s.allocatable.as_ref()?.get("pods"));
    let allocatable_pods = pods.and_then(|q| {
        let pods = q.0.trim().parse::<u64>().ok();
        if pods.is_none() {
            bad(format!(
                "status.allocatable.pods {} is not a whole number; ignored",
                quote(&q.0)
            ));
        }
        pods
    });
    let shadowed = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_TYPE))
        .map(|c| ConditionSeen {
            status: c.status == "True",
            reason: bounded(c.reason.as_deref().unwrap_or_default(), 128),
            message: bounded(c.message.as_deref().unwrap_or_default(), 1024),
            last_transition: c.last_transition_time.as_ref().map(|t| t.0.to_string()),
        });
    NodeFacts {
        name: cleaned(n.metadata.name.as_deref().unwrap_or_default()),
        uid: cleaned(n.metadata.uid.as_deref().unwrap_or_default()),
        pod_cidrs,
        allocatable_pods,
        shadowed,
        ..NodeFacts::default()
    }
}

/// Most addresses read from one Node's `status.addresses`: a real Node has a few.
const ADDRESSES_MAX: usize = 32;

/// `n` with its `status.addresses` (see [`with_status_addresses`]), and
/// whether Calico keeps its node in `n`'s annotations. Kept apart from
/// [`node_facts`]: the agent's own-Node watch reads no such flag.
pub fn with_addresses(mut facts: NodeFacts, n: &Node, problems: &mut Vec<Invalid>) -> NodeFacts {
    // calico-node's Kubernetes datastore writes its node's fields as
    // annotations (libcalico-go k8s/resources/node.go
    // `mergeCalicoNodeIntoK8sNode`); an etcd datastore writes none.
    let annotations = n.metadata.annotations.as_ref();
    facts.calico_annotated =
        annotations.is_some_and(|a| a.keys().any(|k| k.starts_with("projectcalico.org/")));
    with_status_addresses(facts, n, problems)
}

/// `n` with its `status.addresses` of type InternalIP and ExternalIP (what a
/// Service's address or a pool must not hold); an entry that is not an IP is
/// named in `problems`.
pub fn with_status_addresses(
    mut facts: NodeFacts,
    n: &Node,
    problems: &mut Vec<Invalid>,
) -> NodeFacts {
    let mut bad = reporter(problems, "nodes", &facts.name);
    let entries = n.status.as_ref().and_then(|s| s.addresses.as_ref());
    for a in entries.into_iter().flatten().take(ADDRESSES_MAX) {
        let kind = match a.type_.as_str() {
            "InternalIP" => "InternalIP",
            "ExternalIP" => "ExternalIP",
            _ => continue,
        };
        match parse_ip(&a.address) {
            Some(ip) => facts.addresses.push(NodeAddress { ip, kind }),
            None => bad(format!(
                "status.addresses {kind} {} is not an IP address; ignored",
                quote(&a.address)
            )),
        }
    }
    drop(bad);
    facts.addresses.sort();
    facts.addresses.dedup();
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_pods_and_pod_cidrs_are_read_and_garbage_named() {
        let n: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "uid": "u1"},
            "spec": {"podCIDR": "10.244.4.0/27", "podCIDRs": ["10.244.4.0/27", "junk"]},
            "status": {"allocatable": {"pods": "110", "cpu": "2"}}
        }))
        .expect("node");
        let mut problems = vec![];
        let f = node_facts(&n, &mut problems);
        assert_eq!(f.allocatable_pods, Some(110));
        assert_eq!(
            f.pod_cidrs,
            vec!["10.244.4.0/27".parse::<ipnet::IpNet>().expect("net")]
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        let n: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"}, "status": {"allocatable": {"pods": "1k"}}
        }))
        .expect("node");
        let f = node_facts(&n, &mut problems);
        assert_eq!(f.allocatable_pods, None);
        assert!(problems[1].problem.contains("\"1k\""), "{problems:?}");
    }

    #[test]
    fn a_node_calico_keeps_in_the_kubernetes_datastore_is_known_by_its_annotations() {
        // The Kubernetes datastore: BGP's IPv4Address, even with no tunnel.
        let facts = |annotations: serde_json::Value| {
            let n: Node = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "n1", "annotations": annotations}
            }))
            .expect("node");
            with_addresses(node_facts(&n, &mut vec![]), &n, &mut vec![]).calico_annotated
        };
        assert!(facts(
            serde_json::json!({"projectcalico.org/IPv4Address": "10.0.0.5/24"})
        ));
        assert!(!facts(
            serde_json::json!({"flannel.alpha.coreos.com/public-ip": "10.0.0.5"})
        ));
        assert!(!facts(serde_json::json!({})));
    }
}
