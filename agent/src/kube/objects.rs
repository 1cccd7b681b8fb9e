//! Conversions from Kubernetes objects to inventory types.
//!
//! Outside input is never trusted: a field that is not what it should be is
//! reported as an [`Invalid`] naming the object and field, and the rest of the
//! object is still used where it makes sense.

use std::{fmt, net::IpAddr};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use serde_json::Value;

use ipnet::IpNet;

use crate::inventory::{CiliumNode, IpRange, IpSource, Pod, PodIp, Subnet};

/// Longest value quoted back in a warning: annotations can be megabytes.
const QUOTE_MAX: usize = 64;

/// A problem with one object from outside, for a warning and a metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// `pods`, `ciliumnodes`, `subnets`.
    pub resource: &'static str,
    /// `namespace/name`, `name`, or `items[i]` when the object has no name.
    pub object: String,
    pub problem: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.resource, self.object, self.problem)
    }
}

/// A string quoted for a message, cut to a readable length.
pub fn quote(s: &str) -> String {
    if s.len() <= QUOTE_MAX {
        format!("{s:?}")
    } else {
        let mut end = QUOTE_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{:?}… ({} bytes)", &s[..end], s.len())
    }
}

/// The inventory view of a pod. Its IPs come from `status.podIPs` (or
/// `status.podIP`), and only when it has none from the first of
/// `annotation_keys` present (kube-ovn's `ovn.kubernetes.io/ip_address`,
/// comma-separated for dual stack).
pub fn pod(p: &K8sPod, annotation_keys: &[String], problems: &mut Vec<Invalid>) -> Pod {
    let namespace = p.metadata.namespace.clone().unwrap_or_default();
    let name = p.metadata.name.clone().unwrap_or_default();
    let object = format!("{namespace}/{name}");
    let mut bad = |problem: String| {
        problems.push(Invalid {
            resource: "pods",
            object: object.clone(),
            problem,
        })
    };
    let spec = p.spec.as_ref();
    let status = p.status.as_ref();
    let mut ips: Vec<PodIp> = Vec::new();
    let push = |ips: &mut Vec<PodIp>,
                raw: &str,
                source: IpSource,
                field: &str,
                bad: &mut dyn FnMut(String)| {
        match raw.trim().parse::<IpAddr>() {
            Ok(ip) if !ips.iter().any(|x| x.ip == ip) => ips.push(PodIp { ip, source }),
            // The API server rejects duplicates: whoever wrote this object is broken.
            Ok(_) => bad(format!(
                "{field} {} is listed twice; counted once",
                quote(raw)
            )),
            Err(_) => bad(format!("{field} {} is not an IP address", quote(raw))),
        }
    };
    if let Some(status) = status {
        let listed = status.pod_ips.as_deref().unwrap_or_default();
        for (i, pip) in listed.iter().enumerate() {
            push(
                &mut ips,
                &pip.ip,
                IpSource::Status,
                &format!("status.podIPs[{i}].ip"),
                &mut bad,
            );
        }
        if listed.is_empty()
            && let Some(single) = status.pod_ip.as_deref().filter(|s| !s.is_empty())
        {
            push(&mut ips, single, IpSource::Status, "status.podIP", &mut bad);
        }
    }
    let have_status_ips = !ips.is_empty();
    // A pod has at most one IP per family; more means a broken object (all are
    // still checked: a false alarm costs less than a missed collision).
    let families = |ips: &[PodIp]| {
        let v6 = ips.iter().filter(|i| i.ip.is_ipv6()).count();
        (ips.len() - v6, v6)
    };
    let (v4, v6) = families(&ips);
    if v4 > 1 || v6 > 1 {
        bad(format!(
            "status.podIPs lists {} addresses ({v4} IPv4, {v6} IPv6); a pod has at most one per family",
            ips.len()
        ));
    }
    if !have_status_ips
        && let Some(annotations) = p.metadata.annotations.as_ref()
        && let Some((key, value)) = annotation_keys
            .iter()
            .find_map(|k| annotations.get(k).map(|v| (k, v)))
    {
        for part in value.split(',').filter(|s| !s.trim().is_empty()) {
            push(
                &mut ips,
                part,
                IpSource::Annotation,
                &format!("annotation {key}"),
                &mut bad,
            );
        }
    }
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let phase = status.and_then(|s| s.phase.clone());
    if ips.is_empty() && !host_network && phase.as_deref() == Some("Running") {
        bad(
            "is Running but has no IP in status.podIPs, status.podIP or an IP annotation"
                .to_owned(),
        );
    }
    Pod {
        namespace,
        name,
        uid: p.metadata.uid.clone().unwrap_or_default(),
        node: spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        ips,
        host_network,
        phase,
    }
}

/// The infrastructure addresses of a `cilium.io/v2` CiliumNode, read from JSON.
/// `Err` when the object is unusable (no name); field problems go to `problems`.
pub fn cilium_node(v: &Value, problems: &mut Vec<Invalid>) -> Result<CiliumNode, Invalid> {
    let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) else {
        return Err(Invalid {
            resource: "ciliumnodes",
            object: "(unnamed)".to_owned(),
            problem: "metadata.name is missing or not a string; object skipped".to_owned(),
        });
    };
    let mut bad = |problem: String| {
        problems.push(Invalid {
            resource: "ciliumnodes",
            object: name.to_owned(),
            problem,
        })
    };
    let mut node = CiliumNode {
        name: name.to_owned(),
        ..Default::default()
    };
    match v.pointer("/spec/addresses") {
        None | Some(Value::Null) => {}
        Some(Value::Array(addrs)) => {
            for (i, a) in addrs.iter().enumerate() {
                match a.get("type").and_then(Value::as_str) {
                    Some("CiliumInternalIP") => {}
                    Some(t) if NODE_ADDRESS_TYPES.contains(&t) => continue,
                    other => {
                        let t = other.map_or_else(
                            || a.get("type").map_or("nothing".to_owned(), Value::to_string),
                            quote,
                        );
                        bad(format!(
                            "spec.addresses[{i}].type {t} is not a node address type; entry ignored"
                        ));
                        continue;
                    }
                }
                let field = format!("spec.addresses[{i}].ip");
                if let Some(ip) = ip_field(a.get("ip"), &field, None, &mut bad)
                    && !push_unique(&mut node.router, ip)
                {
                    bad(format!("{field} {ip} is listed twice; counted once"));
                }
            }
        }
        Some(_) => bad("spec.addresses is not a list".to_owned()),
    }
    match v.pointer("/spec/ipam/podCIDRs") {
        None | Some(Value::Null) => {}
        Some(Value::Array(cidrs)) => {
            for (i, c) in cidrs.iter().enumerate() {
                match c.as_str().map(|t| t.trim().parse::<IpNet>()) {
                    Some(Ok(net)) => node.pod_cidrs.push(net.trunc()),
                    _ => bad(format!(
                        "spec.ipam.podCIDRs[{i}] {} is not a CIDR; ignored",
                        quote(&c.to_string())
                    )),
                }
            }
        }
        Some(_) => bad("spec.ipam.podCIDRs is not a list".to_owned()),
    }
    for (section, target) in [("ingress", &mut node.ingress), ("health", &mut node.health)] {
        match v.pointer(&format!("/spec/{section}")) {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) => {
                for (family, v6) in [("ipv4", false), ("ipv6", true)] {
                    let field = format!("spec.{section}.{family}");
                    if let Some(ip) = ip_field(o.get(family), &field, Some(v6), &mut bad) {
                        target.push(ip);
                    }
                }
            }
            Some(_) => bad(format!("spec.{section} is not an object")),
        }
    }
    Ok(node)
}

/// A kube-ovn `Subnet` (kubeovn.io/v1) read from JSON. `Err` when the object is
/// unusable (no name, or no valid `spec.cidrBlock`).
pub fn subnet(v: &Value, problems: &mut Vec<Invalid>) -> Result<Subnet, Invalid> {
    let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) else {
        return Err(Invalid {
            resource: "subnets",
            object: "(unnamed)".to_owned(),
            problem: "metadata.name is missing or not a string; object skipped".to_owned(),
        });
    };
    let invalid = |problem: String| Invalid {
        resource: "subnets",
        object: name.to_owned(),
        problem,
    };
    let Some(block) = v.pointer("/spec/cidrBlock").and_then(Value::as_str) else {
        return Err(invalid(
            "spec.cidrBlock is missing or not a string; object skipped".to_owned(),
        ));
    };
    let mut cidrs = Vec::new();
    for part in block.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<IpNet>() {
            Ok(net) => cidrs.push(net.trunc()),
            Err(_) => problems.push(invalid(format!(
                "spec.cidrBlock part {} is not a CIDR; ignored",
                quote(part)
            ))),
        }
    }
    if cidrs.is_empty() {
        return Err(invalid(format!(
            "spec.cidrBlock {} has no valid CIDR; object skipped",
            quote(block)
        )));
    }
    let mut exclude = Vec::new();
    match v.pointer("/spec/excludeIps") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item.as_str().and_then(parse_range) {
                    Some(r) => exclude.push(r),
                    None => problems.push(invalid(format!(
                        "spec.excludeIps[{i}] {} is neither an IP nor first..last; ignored",
                        quote(&item.to_string())
                    ))),
                }
            }
        }
        Some(_) => problems.push(invalid("spec.excludeIps is not a list; ignored".to_owned())),
    }
    Ok(Subnet {
        name: name.to_owned(),
        cidrs,
        exclude,
    })
}

/// `10.0.0.1` or `10.0.0.10..10.0.0.20` (same family, first ≤ last).
pub fn parse_range(s: &str) -> Option<IpRange> {
    let s = s.trim();
    let (first, last) = match s.split_once("..") {
        Some((a, b)) => (
            a.trim().parse::<IpAddr>().ok()?,
            b.trim().parse::<IpAddr>().ok()?,
        ),
        None => {
            let ip = s.parse::<IpAddr>().ok()?;
            (ip, ip)
        }
    };
    let ordered = match (first, last) {
        (IpAddr::V4(a), IpAddr::V4(b)) => a <= b,
        (IpAddr::V6(a), IpAddr::V6(b)) => a <= b,
        _ => false,
    };
    ordered.then_some(IpRange { first, last })
}

/// Adds `ip` unless it is there already; whether it was added.
fn push_unique(list: &mut Vec<IpAddr>, ip: IpAddr) -> bool {
    let new = !list.contains(&ip);
    if new {
        list.push(ip);
    }
    new
}

/// `spec.addresses[].type` values Cilium writes besides CiliumInternalIP (the
/// Kubernetes NodeAddressType set); any other is named in a warning.
const NODE_ADDRESS_TYPES: &[&str] = &[
    "InternalIP",
    "ExternalIP",
    "Hostname",
    "InternalDNS",
    "ExternalDNS",
];

/// An optional IP field: absent or empty is fine, anything else must parse
/// (and be of the family the field names, if it names one).
fn ip_field(
    v: Option<&Value>,
    field: &str,
    want_v6: Option<bool>,
    bad: &mut dyn FnMut(String),
) -> Option<IpAddr> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => match s.parse::<IpAddr>() {
            Ok(ip) if want_v6.is_some_and(|v6| v6 != ip.is_ipv6()) => {
                bad(format!(
                    "{field} {} is of the wrong address family; ignored",
                    quote(s)
                ));
                None
            }
            Ok(ip) => Some(ip),
            Err(_) => {
                bad(format!(
                    "{field} {} is not an IP address; ignored",
                    quote(s)
                ));
                None
            }
        },
        Some(other) => {
            let json = other.to_string();
            bad(format!(
                "{field} is {}, not a string; ignored",
                quote(&json)
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn k8s_pod(v: Value) -> K8sPod {
        serde_json::from_value(v).expect("test pod")
    }

    fn keys() -> Vec<String> {
        vec![crate::inventory::DEFAULT_POD_IP_ANNOTATION.to_owned()]
    }

    #[test]
    fn pod_ips_come_from_status_and_the_annotation_only_without_them() {
        let mut problems = vec![];
        let running = k8s_pod(json!({
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1",
                         "annotations": {"ovn.kubernetes.io/ip_address": "10.244.9.9"}},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running", "podIP": "10.244.0.5",
                       "podIPs": [{"ip": "10.244.0.5"}, {"ip": "fd00::5"}]}
        }));
        let p = pod(&running, &keys(), &mut problems);
        assert_eq!(
            p.ips.iter().map(|i| i.ip.to_string()).collect::<Vec<_>>(),
            ["10.244.0.5", "fd00::5"]
        );
        assert!(p.ips.iter().all(|i| i.source == IpSource::Status));
        assert_eq!(p.node.as_deref(), Some("n1"));

        let pending = k8s_pod(json!({
            "metadata": {"name": "b", "namespace": "ns",
                         "annotations": {"ovn.kubernetes.io/ip_address": "10.244.1.12,fd00::c"}},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Pending"}
        }));
        let p = pod(&pending, &keys(), &mut problems);
        assert_eq!(p.ips.len(), 2);
        assert!(p.ips.iter().all(|i| i.source == IpSource::Annotation));
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn a_bad_annotation_is_reported_by_object_and_cut_short() {
        let mut problems = vec![];
        let huge = "x".repeat(1 << 20);
        let p = k8s_pod(json!({
            "metadata": {"name": "c", "namespace": "ns", "annotations": {"ovn.kubernetes.io/ip_address": huge}},
            "spec": {"containers": []}
        }));
        let p = pod(&p, &keys(), &mut problems);
        assert!(p.ips.is_empty());
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].object, "ns/c");
        assert!(problems[0].problem.contains("not an IP address"));
        assert!(
            problems[0].problem.len() < 200,
            "{}",
            problems[0].problem.len()
        );
    }

    #[test]
    fn cilium_node_infra_addresses_are_read_and_bad_fields_named() {
        let mut problems = vec![];
        let v = json!({
            "metadata": {"name": "node-a"},
            "spec": {
                "addresses": [
                    {"type": "InternalIP", "ip": "192.168.100.11"},
                    {"type": "CiliumInternalIP", "ip": "10.244.4.251"},
                    {"type": "CiliumInternalIP", "ip": "not-an-ip"}
                ],
                "ingress": {"ipv4": "10.244.4.12", "ipv6": "10.244.4.13"},
                "health": {"ipv4": 42}
            }
        });
        let n = cilium_node(&v, &mut problems).expect("named node");
        assert_eq!(
            n.router,
            vec!["10.244.4.251".parse::<IpAddr>().expect("ip")]
        );
        assert_eq!(
            n.ingress,
            vec!["10.244.4.12".parse::<IpAddr>().expect("ip")]
        );
        assert!(n.health.is_empty());
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 3, "{text:?}");
        assert!(
            text[0].contains("ciliumnodes node-a: spec.addresses[2].ip \"not-an-ip\""),
            "{text:?}"
        );
        assert!(
            text[1].contains("spec.ingress.ipv6 \"10.244.4.13\" is of the wrong address family"),
            "{text:?}"
        );
        assert!(
            text[2].contains("spec.health.ipv4 is \"42\", not a string"),
            "{text:?}"
        );
    }

    #[test]
    fn subnets_read_blocks_and_exclusions_and_name_bad_entries() {
        let mut problems = vec![];
        let v = json!({
            "metadata": {"name": "ovn-default"},
            "spec": {"cidrBlock": "10.244.0.0/16,fd00:10:244::/112",
                     "excludeIps": ["10.244.0.1", "10.244.248.0..10.244.255.255", "10.0.0.9..10.0.0.1", 7]}
        });
        let s = subnet(&v, &mut problems).expect("usable subnet");
        assert_eq!(s.cidrs.len(), 2);
        assert_eq!(s.exclude.len(), 2);
        assert!(!s.allocates("10.244.0.1".parse().expect("ip")));
        assert!(!s.allocates("10.244.250.3".parse().expect("ip")));
        assert!(s.allocates("10.244.4.251".parse().expect("ip")));
        assert!(!s.allocates("10.245.0.1".parse().expect("ip")));
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].problem.contains("excludeIps[2]"));
        let err = subnet(
            &json!({"metadata": {"name": "x"}, "spec": {"cidrBlock": "nope"}}),
            &mut problems,
        )
        .expect_err("no valid block");
        assert!(err.problem.contains("no valid CIDR"));
    }

    #[test]
    fn a_cilium_node_without_a_name_is_rejected() {
        let mut problems = vec![];
        let err = cilium_node(&json!({"spec": {}}), &mut problems).expect_err("no name");
        assert!(err.problem.contains("metadata.name"));
    }
}

#[cfg(test)]
pub(crate) mod props {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

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
            let _ = cilium_node(&v, &mut Vec::new());
            let v = json!({"metadata": {"name": "n"}, "spec": {"addresses": addrs, "ingress": ingress, "health": ingress}});
            let mut problems = Vec::new();
            if let Ok(n) = cilium_node(&v, &mut problems) {
                // ipv4 and ipv6 fields keep at most one address each, of their own family.
                prop_assert!(n.ingress.iter().filter(|i| i.is_ipv4()).count() <= 1);
                prop_assert!(n.ingress.iter().filter(|i| i.is_ipv6()).count() <= 1);
            }
        }

        #[test]
        fn subnets_of_any_shape_never_panic(spec in any_json()) {
            let _ = subnet(&json!({"metadata": {"name": "s"}, "spec": spec}), &mut Vec::new());
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
}
