//! Property tests: objects of any shape never panic the converters.

use proptest::prelude::*;
use serde_json::{Value, json};

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::*;
use crate::cni::kube_ovn::parse_range;
use crate::inventory::Role;

/// Arbitrary JSON, a few levels deep.
pub(crate) fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
        "[0-9a-f:.]{0,20}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z0-9]{1,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn cilium_nodes_of_any_shape_never_panic(spec in any_json(), addrs in any_json(), ingress in any_json()) {
        let v = json!({"metadata": {"name": "n"}, "spec": spec});
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        // The lean struct converts as the whole object does, whatever its shape.
        let whole = format!("{:?}", whole::cilium_node(&v, &mut p1));
        prop_assert_eq!(whole, format!("{:?}", cilium_node(&whole::lean(&v), &mut p2)));
        prop_assert_eq!(p1, p2);
        let v = json!({"metadata": {"name": "n"}, "spec": {"addresses": addrs, "ingress": ingress, "health": ingress}});
        let mut problems = Vec::new();
        if let Ok(n) = cilium_node(&whole::lean(&v), &mut problems) {
            // ipv4 and ipv6 fields keep at most one address each, of their own family.
            prop_assert!(n.ips(Role::Ingress).filter(IpAddr::is_ipv4).count() <= 1);
            prop_assert!(n.ips(Role::Ingress).filter(IpAddr::is_ipv6).count() <= 1);
        }
    }

    #[test]
    fn subnets_of_any_shape_never_panic(spec in any_json()) {
        let v = json!({"metadata": {"name": "s"}, "spec": spec});
        let (mut p1, mut p2) = (Vec::new(), Vec::new());
        // The lean struct converts as the whole object does, whatever its shape.
        prop_assert_eq!(whole::subnet(&v, &mut p1), subnet(&whole::lean(&v), &mut p2));
        prop_assert_eq!(p1, p2);
    }

    #[test]
    fn ranges_parse_only_ordered_same_family_pairs(s in ".{0,60}", a in any::<u32>(), b in any::<u32>()) {
        let _ = parse_range(&s);
        let (x, y) = (std::net::Ipv4Addr::from(a), std::net::Ipv4Addr::from(b));
        let r = parse_range(&format!("{x}..{y}"));
        prop_assert_eq!(r.is_some(), x <= y);
        let mixed = format!("{x}..::1");
        prop_assert!(parse_range(&mixed).is_none());
    }

    #[test]
    fn pod_ip_annotations_of_any_text_never_panic(annotation in ".{0,200}", ip in ".{0,40}") {
        let p: K8sPod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "n",
                         "annotations": {"ovn.kubernetes.io/ip_address": annotation}},
            "status": {"podIPs": [{"ip": ip}]}
        })).expect("a pod");
        let keys = vec![crate::inventory::DEFAULT_POD_IP_ANNOTATION.to_owned()];
        let mut problems = Vec::new();
        let out = pod(&p, &keys, &mut problems);
        // Every IP kept is unique, and every rejected token became a named problem.
        let mut ips: Vec<IpAddr> = out.ips.iter().map(|i| i.ip).collect();
        ips.sort();
        ips.dedup();
        prop_assert_eq!(ips.len(), out.ips.len());
        prop_assert!(problems.iter().all(|p| p.object == "n/p"));
    }
}
