//! The node-held addresses CNIs publish in their Node's annotations, each
//! CNI's keys declared in its own file: Cilium's (`--annotate-k8s-node`),
//! Calico's tunnel addresses, ovn-kubernetes' subnets and router ports.

use std::{collections::BTreeMap, net::IpAddr};

use serde_json::Value;

use super::{
    calico, cilium, ovn_kubernetes,
    read::{ip_field, reporter},
};
use crate::inventory::{CniNode, Invalid, Role, Source, text::cleaned};

/// Whether [`node_annotations`] reads the annotation `key`: the watch of every
/// Node keeps only these (a Node carries kilobytes of others).
pub fn node_annotation_read(key: &str) -> bool {
    let cilium = cilium::NODE_ANNOTATION_PREFIXES.iter().any(|(prefix, _)| {
        key.strip_prefix(prefix)
            .is_some_and(|suffix| cilium::NODE_ANNOTATIONS.iter().any(|(s, ..)| *s == suffix))
    });
    cilium
        || calico::NODE_ANNOTATIONS.iter().any(|(k, _)| *k == key)
        || key == ovn_kubernetes::NODE_SUBNETS
        || ovn_kubernetes::KEYS.contains(&key)
}

/// The node-held addresses a Node's annotations publish (Cilium's, Calico's
/// tunnel addresses, ovn-kubernetes' gateway, management port and router ports); `None` when it has none. Bad values are named in
/// `problems` (resource `nodes`).
pub fn node_annotations(
    name: &str,
    annotations: &BTreeMap<String, String>,
    problems: &mut Vec<Invalid>,
) -> Option<CniNode> {
    let mut node = CniNode {
        name: cleaned(name),
        ..Default::default()
    };
    let mut bad = reporter(problems, "nodes", name);
    for (prefix, source) in cilium::NODE_ANNOTATION_PREFIXES {
        for (suffix, role, v6) in cilium::NODE_ANNOTATIONS {
            if let Some(ip) = address(annotations, &format!("{prefix}{suffix}"), v6, &mut bad) {
                node.add(ip, role, source);
            }
        }
    }
    for (key, v6) in calico::NODE_ANNOTATIONS {
        if let Some(ip) = address(annotations, key, v6, &mut bad) {
            node.add(ip, Role::Tunnel, Source::CalicoNodeAnnotation);
        }
    }
    ovn_kubernetes::add_node_subnets(annotations, &mut node, &mut bad);
    ovn_kubernetes::add_router_ports(annotations, &mut node, &mut bad);
    (!node.addresses.is_empty() || !node.ovn_internal.is_empty()).then_some(node)
}

/// The address of the family `v6` says in annotation `key`, if there; a bad
/// one named through `bad`.
fn address(
    annotations: &BTreeMap<String, String>,
    key: &str,
    v6: bool,
    bad: &mut dyn FnMut(String),
) -> Option<IpAddr> {
    let value = Value::from(annotations.get(key)?.as_str());
    ip_field(Some(&value), &format!("annotation {key}"), Some(v6), bad)
}
