//! ovn-kubernetes' addresses on a Node: `.1` (the node switch's gateway) and
//! `.2` (the management port, `ovn-k8s-mp0`) of each subnet of the default
//! network in `k8s.ovn.org/node-subnets` (ovn-kubernetes'
//! go-controller/pkg/util/net.go, `GetNodeGatewayIfAddr` and
//! `GetNodeManagementIfAddr`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cni::read::quote;
use crate::inventory::{CniNode, Role, Source, ip_text::parse_cidr, nth};

use super::NODE_SUBNETS;

/// Most subnets read: one per family in practice.
const SUBNETS_MAX: usize = 8;

/// Adds the gateway and management port addresses `annotations` give `node`;
/// a malformed value is named through `bad`.
pub(crate) fn add_node_subnets(
    annotations: &BTreeMap<String, String>,
    node: &mut CniNode,
    bad: &mut dyn FnMut(String),
) {
    let Some(raw) = annotations.get(NODE_SUBNETS) else {
        return;
    };
    let parsed: Option<Value> = serde_json::from_str(raw).ok();
    let default = parsed.as_ref().and_then(|v| v.get("default"));
    let subnets: Vec<&str> = match default {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => {
            bad(format!(
                "annotation {NODE_SUBNETS} {} has no \"default\" subnet (a string or a list of \
                 CIDRs); ignored",
                quote(raw)
            ));
            return;
        }
    };
    for s in subnets.into_iter().take(SUBNETS_MAX) {
        let Some(net) = parse_cidr(s).map(|c| c.net) else {
            bad(format!(
                "annotation {NODE_SUBNETS} entry {} is not a CIDR; ignored",
                quote(s)
            ));
            continue;
        };
        if !node.ovn_subnets.contains(&net) {
            node.ovn_subnets.push(net);
        }
        for (n, role) in [(1, Role::Gateway), (2, Role::ManagementPort)] {
            if let Some(ip) = nth(&net, n) {
                node.add(ip, role, Source::OvnNodeAnnotation);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipnet::IpNet;

    fn read(value: &str) -> (Vec<(String, Role)>, Vec<String>) {
        let annotations = BTreeMap::from([(NODE_SUBNETS.to_owned(), value.to_owned())]);
        let mut node = CniNode::default();
        let mut problems = Vec::new();
        add_node_subnets(&annotations, &mut node, &mut |p| problems.push(p));
        let mut got: Vec<_> = node
            .addresses
            .iter()
            .map(|a| (a.ip.to_string(), a.role))
            .collect();
        got.sort();
        (got, problems)
    }

    #[test]
    fn both_forms_of_the_annotation_give_the_gateway_and_the_management_port() {
        // Real values (tests/corpus/realworld/ovn-kubernetes): the string form
        // of OpenShift before 4.13, the list form since, dual-stack.
        let old = read(r#"{"default":"10.128.0.0/23"}"#);
        let new = read(r#"{"default":["10.128.0.0/23"]}"#);
        assert_eq!(old, new);
        assert_eq!(
            old.0,
            [
                ("10.128.0.1".to_owned(), Role::Gateway),
                ("10.128.0.2".to_owned(), Role::ManagementPort)
            ]
        );
        let (dual, problems) = read(r#"{"default":["10.128.0.0/23","fd01:0:0:1::/64"]}"#);
        assert!(problems.is_empty());
        assert!(dual.contains(&("fd01:0:0:1::2".to_owned(), Role::ManagementPort)));
        // A user-defined network's subnet is not the host's.
        let (udn, _) =
            read(r#"{"default":["10.192.2.0/24"],"udn_udn-primary-layer3":["10.2.0.0/17"]}"#);
        assert_eq!(udn.len(), 2);
        assert!(udn.iter().all(|(ip, _)| ip.starts_with("10.192.2.")));
    }

    #[test]
    fn the_default_networks_subnets_are_kept_as_the_nodes_pod_ranges() {
        let annotations = BTreeMap::from([(
            NODE_SUBNETS.to_owned(),
            r#"{"default":["10.128.0.0/23","fd01:0:0:1::/64"],"udn_x":["10.2.0.0/17"]}"#.to_owned(),
        )]);
        let mut node = CniNode::default();
        add_node_subnets(&annotations, &mut node, &mut |p| panic!("{p}"));
        let want: Vec<IpNet> = vec![
            "10.128.0.0/23".parse().expect("net"),
            "fd01:0:0:1::/64".parse().expect("net"),
        ];
        assert_eq!(node.ovn_subnets, want);
        // Not Cilium's: no range detection allocates against.
        assert_eq!(node.ranges().count(), 0);
    }

    #[test]
    fn malformed_values_are_named_and_add_nothing() {
        for value in [
            "10.128.0.0/23",
            r#"{"default":42}"#,
            r#"{"default":["nope"]}"#,
            "{",
        ] {
            let (got, problems) = read(value);
            assert!(got.is_empty(), "{value}: {got:?}");
            assert_eq!(problems.len(), 1, "{value}: {problems:?}");
        }
        // A /32 has no .1 or .2.
        assert!(read(r#"{"default":["10.0.0.7/32"]}"#).0.is_empty());
    }
}
