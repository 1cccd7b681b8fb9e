//! Cilium's CiliumNodes, read from their lean structs (no generated types:
//! every field is checked by hand and named when it is wrong), and its Node
//! annotations.

use std::{collections::BTreeMap, net::IpAddr};

use ipnet::IpNet;
use serde_json::Value;

use super::{bounded, capped, caps, quote, unnamed};
use crate::inventory::{
    CiliumNode, Invalid, Role, Source,
    ip_text::{parse_cidr, parse_ip},
    text::cleaned,
};
use crate::kube::cluster::lean::{LeanCiliumNode, Shape, Used};

/// Cilium's own addresses and ranges in a `cilium.io/v2` CiliumNode: every
/// `CiliumInternalIP` of `spec.addresses`, `spec.ingress`, `spec.health`, the
/// `router`/`health`/`ingress` owners of `status.ipam.used` (the CRD-style
/// allocators), `spec.ipam.podCIDRs` (not in CRD-style modes, where it means
/// nothing) and `spec.ipam.pools.allocated[].cidrs` (multi-pool). `Err` when
/// the object is unusable (no name); field problems go to `problems`.
pub(in crate::kube) fn cilium_node(
    o: &LeanCiliumNode,
    problems: &mut Vec<Invalid>,
) -> Result<CiliumNode, Invalid> {
    let Some(name) = o.metadata.name.as_deref() else {
        return Err(unnamed("ciliumnodes"));
    };
    let mut bad = |problem: String| {
        problems.push(Invalid {
            resource: "ciliumnodes",
            object: name.to_owned(),
            problem,
        });
    };
    let mut node = CiliumNode {
        name: cleaned(name),
        ..Default::default()
    };
    let (spec, ipam) = (&o.spec, &o.spec.ipam);
    spec_addresses(spec.addresses.as_ref(), &mut node, &mut bad);
    for (section, v, role, source) in [
        ("ingress", &spec.ingress, Role::Ingress, Source::SpecIngress),
        ("health", &spec.health, Role::Health, Source::SpecHealth),
    ] {
        spec_section(section, v.as_ref(), (role, source), &mut node, &mut bad);
    }
    let crd_style = status_ipam_used(&o.status.ipam.used, &mut node, &mut bad) || ipam.pool_any;
    node.pod_cidrs = cidr_list(ipam.pod_cidrs.as_ref(), "spec.ipam.podCIDRs", &mut bad);
    if crd_style {
        // ENI, Azure, CRD: addresses come from the cloud's interfaces, not this range.
        node.pod_cidrs.clear();
    }
    node.operator_pool = crd_style;
    node.pool_cidrs = pool_cidrs(ipam.pools.allocated.as_ref(), &mut bad);
    let error = o.status.ipam.operator_status.error.as_ref();
    node.operator_error = operator_error(error, &mut bad);
    Ok(node)
}

/// The addresses of `spec.ingress` or `spec.health`, one per family.
fn spec_section(
    section: &str,
    v: Option<&Value>,
    (role, source): (Role, Source),
    node: &mut CiliumNode,
    bad: &mut dyn FnMut(String),
) {
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(o)) => {
            for (family, v6) in [("ipv4", false), ("ipv6", true)] {
                let field = format!("spec.{section}.{family}");
                if let Some(ip) = ip_field(o.get(family), &field, Some(v6), bad) {
                    node.add(ip, role, source);
                }
            }
        }
        Some(_) => bad(format!("spec.{section} is not an object")),
    }
}

/// The CIDRs of every pool in `spec.ipam.pools.allocated` (multi-pool IPAM).
fn pool_cidrs(v: Option<&Value>, bad: &mut dyn FnMut(String)) -> Vec<IpNet> {
    let mut out = Vec::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Array(pools)) => {
            let pools = capped(pools, caps::CIDRS, "spec.ipam.pools.allocated", bad);
            for (i, p) in pools.iter().enumerate() {
                let field = format!("spec.ipam.pools.allocated[{i}].cidrs");
                out.extend(cidr_list(p.get("cidrs"), &field, bad));
            }
        }
        Some(_) => bad("spec.ipam.pools.allocated is not a list".to_owned()),
    }
    out
}

/// The operator's IPAM error for this node, if it reports one.
fn operator_error(v: Option<&Value>, bad: &mut dyn FnMut(String)) -> Option<String> {
    // `error: ""` is the healthy case; `resourceIPAMError` beside it belongs to
    // the network-driver IPAM, not pod addresses.
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(e)) if e.trim().is_empty() => None,
        Some(Value::String(e)) => Some(bounded(&cleaned(e.trim()), ERROR_MAX)),
        Some(_) => {
            bad("status.ipam.operator-status.error is not a string".to_owned());
            None
        }
    }
}

/// Every `CiliumInternalIP` of `spec.addresses` (two of one family happen: cilium#16307).
fn spec_addresses(v: Option<&Value>, node: &mut CiliumNode, bad: &mut dyn FnMut(String)) {
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Array(addrs)) => {
            let addrs = capped(addrs, caps::ADDRESSES, "spec.addresses", bad);
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
                if let Some(ip) = ip_field(a.get("ip"), &field, None, bad) {
                    if node.ips(Role::Router).any(|r| r == ip) {
                        bad(format!("{field} {ip} is listed twice; counted once"));
                    }
                    node.add(ip, Role::Router, Source::SpecAddresses);
                }
            }
        }
        Some(_) => bad("spec.addresses is not a list".to_owned()),
    }
}

/// The infrastructure owners of `status.ipam.used`; whether it lists any address
/// at all (the mark of a CRD-style allocator).
fn status_ipam_used(
    used: &Shape<BTreeMap<String, Shape<Used>>>,
    node: &mut CiliumNode,
    bad: &mut dyn FnMut(String),
) -> bool {
    match used {
        Shape::Absent => false,
        Shape::Map(used) => {
            if used.len() > caps::IPAM_USED {
                bad(format!(
                    "status.ipam.used has {} entries; only the first {} are read",
                    used.len(),
                    caps::IPAM_USED
                ));
            }
            for (key, entry) in used.iter().take(caps::IPAM_USED) {
                let owner = match entry {
                    Shape::Map(Used {
                        owner: Some(Value::String(o)),
                    }) => o.as_str(),
                    _ => continue,
                };
                let role = match owner {
                    "router" => Role::Router,
                    "health" => Role::Health,
                    "ingress" => Role::Ingress,
                    // Pods (`namespace/name`) and anything else: not Cilium's own.
                    _ => continue,
                };
                match parse_ip(key) {
                    Some(ip) => node.add(ip, role, Source::StatusIpamUsed),
                    None => bad(format!(
                        "status.ipam.used key {} (owner {role}) is not an IP address; ignored",
                        quote(key)
                    )),
                }
            }
            !used.is_empty()
        }
        Shape::Other => {
            bad("status.ipam.used is not an object".to_owned());
            false
        }
    }
}

/// A list of CIDR strings; bad entries named and skipped.
fn cidr_list(v: Option<&Value>, field: &str, bad: &mut dyn FnMut(String)) -> Vec<IpNet> {
    let mut out = Vec::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Array(cidrs)) => {
            let cidrs = capped(cidrs, caps::CIDRS, field, bad);
            for (i, c) in cidrs.iter().enumerate() {
                match c.as_str().and_then(parse_cidr) {
                    Some(c) => out.push(c.net),
                    _ => bad(format!(
                        "{field}[{i}] {} is not a CIDR; ignored",
                        quote(&c.to_string())
                    )),
                }
            }
        }
        Some(_) => bad(format!("{field} is not a list")),
    }
    out
}

/// The annotation suffixes Cilium writes on a Node with `--annotate-k8s-node`,
/// after `network.cilium.io/` (or the legacy `io.cilium.network.`).
const NODE_ANNOTATIONS: [(&str, Role, bool); 6] = [
    ("ipv4-cilium-host", Role::Router, false),
    ("ipv6-cilium-host", Role::Router, true),
    ("ipv4-health-ip", Role::Health, false),
    ("ipv6-health-ip", Role::Health, true),
    // The capital I is Cilium's spelling.
    ("ipv4-Ingress-ip", Role::Ingress, false),
    ("ipv6-Ingress-ip", Role::Ingress, true),
];

/// The annotations calico-node writes on its Node with the address of each
/// tunnel device (bare IPs; calico's felix/fv/infrastructure/infra_k8s.go sets
/// the same five), and whether each is IPv6.
const CALICO_ANNOTATIONS: [(&str, bool); 5] = [
    ("projectcalico.org/IPv4IPIPTunnelAddr", false),
    ("projectcalico.org/IPv4VXLANTunnelAddr", false),
    ("projectcalico.org/IPv6VXLANTunnelAddr", true),
    ("projectcalico.org/IPv4WireguardInterfaceAddr", false),
    ("projectcalico.org/IPv6WireguardInterfaceAddr", true),
];

/// Where Cilium's Node annotations start: today's and the legacy spelling.
const NODE_ANNOTATION_PREFIXES: [(&str, Source); 2] = [
    ("network.cilium.io/", Source::NodeAnnotation),
    ("io.cilium.network.", Source::LegacyNodeAnnotation),
];

/// Whether [`node_annotations`] reads the annotation `key`: the watch of every
/// Node keeps only these (a Node carries kilobytes of others).
pub fn node_annotation_read(key: &str) -> bool {
    let cilium = NODE_ANNOTATION_PREFIXES.iter().any(|(prefix, _)| {
        key.strip_prefix(prefix)
            .is_some_and(|suffix| NODE_ANNOTATIONS.iter().any(|(s, ..)| *s == suffix))
    });
    cilium
        || CALICO_ANNOTATIONS.iter().any(|(k, _)| *k == key)
        || key == super::ovn::NODE_SUBNETS
        || super::ovn_ports::KEYS.contains(&key)
}

/// The node-held addresses a Node's annotations publish (Cilium's, Calico's
/// tunnel addresses, ovn-kubernetes' gateway, management port and router ports); `None` when it has none. Bad values are named in
/// `problems` (resource `nodes`).
pub fn node_annotations(
    name: &str,
    annotations: &std::collections::BTreeMap<String, String>,
    problems: &mut Vec<Invalid>,
) -> Option<CiliumNode> {
    let mut node = CiliumNode {
        name: cleaned(name),
        ..Default::default()
    };
    let mut bad = |problem: String| {
        problems.push(Invalid {
            resource: "nodes",
            object: name.to_owned(),
            problem,
        });
    };
    for (prefix, source) in NODE_ANNOTATION_PREFIXES {
        for (suffix, role, v6) in NODE_ANNOTATIONS {
            let key = format!("{prefix}{suffix}");
            let Some(value) = annotations.get(&key) else {
                continue;
            };
            let field = format!("annotation {key}");
            if let Some(ip) = ip_field(
                Some(&Value::from(value.as_str())),
                &field,
                Some(v6),
                &mut bad,
            ) {
                node.add(ip, role, source);
            }
        }
    }
    for (key, v6) in CALICO_ANNOTATIONS {
        let Some(value) = annotations.get(key) else {
            continue;
        };
        let field = format!("annotation {key}");
        let value = Some(&Value::from(value.as_str()));
        if let Some(ip) = ip_field(value, &field, Some(v6), &mut bad) {
            node.add(ip, Role::Tunnel, Source::CalicoNodeAnnotation);
        }
    }
    super::ovn::add_node_subnets(annotations, &mut node, &mut bad);
    super::ovn_ports::add_router_ports(annotations, &mut node, &mut bad);
    (!node.addresses.is_empty() || !node.ovn_internal.is_empty()).then_some(node)
}

/// Longest operator error kept: the reason fits; a runaway string does not travel on.
const ERROR_MAX: usize = 512;

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
        Some(Value::String(s)) => match parse_ip(s) {
            Some(ip) if want_v6.is_some_and(|v6| v6 != ip.is_ipv6()) => {
                bad(format!(
                    "{field} {} is of the wrong address family; ignored",
                    quote(s)
                ));
                None
            }
            Some(ip) => Some(ip),
            None => {
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
