//! Cilium's CiliumNodes and kube-ovn's Subnets, read from their JSON (no
//! generated types: every field is checked by hand and named when it is wrong).

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;

use super::{bounded, capped, caps, quote};
use crate::inventory::{CiliumNode, Invalid, IpRange, Role, Source, Subnet, text::cleaned};

/// Cilium's own addresses and ranges in a `cilium.io/v2` CiliumNode, read from
/// JSON: every `CiliumInternalIP` of `spec.addresses`, `spec.ingress`,
/// `spec.health`, the `router`/`health`/`ingress` owners of `status.ipam.used`
/// (the CRD-style allocators), `spec.ipam.podCIDRs` (not in CRD-style modes,
/// where it means nothing) and `spec.ipam.pools.allocated[].cidrs` (multi-pool).
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
        });
    };
    let mut node = CiliumNode {
        name: cleaned(name),
        ..Default::default()
    };
    spec_addresses(v, &mut node, &mut bad);
    for (section, role, source) in [
        ("ingress", Role::Ingress, Source::SpecIngress),
        ("health", Role::Health, Source::SpecHealth),
    ] {
        match v.pointer(&format!("/spec/{section}")) {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) => {
                for (family, v6) in [("ipv4", false), ("ipv6", true)] {
                    let field = format!("spec.{section}.{family}");
                    if let Some(ip) = ip_field(o.get(family), &field, Some(v6), &mut bad) {
                        node.add(ip, role, source);
                    }
                }
            }
            Some(_) => bad(format!("spec.{section} is not an object")),
        }
    }
    let crd_style = status_ipam_used(v, &mut node, &mut bad)
        || v.pointer("/spec/ipam/pool")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
    node.pod_cidrs = cidr_list(
        v.pointer("/spec/ipam/podCIDRs"),
        "spec.ipam.podCIDRs",
        &mut bad,
    );
    if crd_style {
        // ENI, Azure, CRD: addresses come from the cloud's interfaces, not this range.
        node.pod_cidrs.clear();
    }
    match v.pointer("/spec/ipam/pools/allocated") {
        None | Some(Value::Null) => {}
        Some(Value::Array(pools)) => {
            let pools = capped(pools, caps::CIDRS, "spec.ipam.pools.allocated", &mut bad);
            for (i, p) in pools.iter().enumerate() {
                let field = format!("spec.ipam.pools.allocated[{i}].cidrs");
                let cidrs = cidr_list(p.get("cidrs"), &field, &mut bad);
                node.pool_cidrs.extend(cidrs);
            }
        }
        Some(_) => bad("spec.ipam.pools.allocated is not a list".to_owned()),
    }
    // `error: ""` is the healthy case; `resourceIPAMError` beside it belongs to
    // the network-driver IPAM, not pod addresses.
    match v.pointer("/status/ipam/operator-status/error") {
        None | Some(Value::Null) => {}
        Some(Value::String(e)) if e.trim().is_empty() => {}
        Some(Value::String(e)) => {
            node.operator_error = Some(bounded(&cleaned(e.trim()), ERROR_MAX));
        }
        Some(_) => bad("status.ipam.operator-status.error is not a string".to_owned()),
    }
    Ok(node)
}

/// Every `CiliumInternalIP` of `spec.addresses` (two of one family happen: cilium#16307).
fn spec_addresses(v: &Value, node: &mut CiliumNode, bad: &mut dyn FnMut(String)) {
    match v.pointer("/spec/addresses") {
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
fn status_ipam_used(v: &Value, node: &mut CiliumNode, bad: &mut dyn FnMut(String)) -> bool {
    match v.pointer("/status/ipam/used") {
        None | Some(Value::Null) => false,
        Some(Value::Object(used)) => {
            if used.len() > caps::IPAM_USED {
                bad(format!(
                    "status.ipam.used has {} entries; only the first {} are read",
                    used.len(),
                    caps::IPAM_USED
                ));
            }
            for (key, entry) in used.iter().take(caps::IPAM_USED) {
                let role = match entry.get("owner").and_then(Value::as_str) {
                    Some("router") => Role::Router,
                    Some("health") => Role::Health,
                    Some("ingress") => Role::Ingress,
                    // Pods (`namespace/name`) and anything else: not Cilium's own.
                    _ => continue,
                };
                match key.trim().parse::<IpAddr>() {
                    Ok(ip) => node.add(ip, role, Source::StatusIpamUsed),
                    Err(_) => bad(format!(
                        "status.ipam.used key {} (owner {role}) is not an IP address; ignored",
                        quote(key)
                    )),
                }
            }
            !used.is_empty()
        }
        Some(_) => {
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
                match c.as_str().map(|t| t.trim().parse::<IpNet>()) {
                    Some(Ok(net)) => out.push(net.trunc()),
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

/// Cilium's addresses as a Node's annotations publish them; `None` when it has
/// none. Bad values are named in `problems` (resource `nodes`).
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
    for (prefix, source) in [
        ("network.cilium.io/", Source::NodeAnnotation),
        ("io.cilium.network.", Source::LegacyNodeAnnotation),
    ] {
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
    (!node.addresses.is_empty()).then_some(node)
}

/// Longest operator error kept: the reason fits; a runaway string does not travel on.
const ERROR_MAX: usize = 512;

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
            let mut cut = |problem: String| problems.push(invalid(problem));
            let items = capped(items, caps::EXCLUDE_IPS, "spec.excludeIps", &mut cut);
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
    // Unset or `ovn`: pods' primary addresses. `<nad>.<ns>` (IPAM only) and
    // `<nad>.<ns>.ovn` (kube-ovn attachments) are secondary networks.
    let primary = match v.pointer("/spec/provider") {
        None | Some(Value::Null) => true,
        Some(p) => p.as_str().is_some_and(|p| p.is_empty() || p == "ovn"),
    };
    // kube-ovn's `ovn40subnets`: overlay Subnets of the default VPC.
    let text = |field: &str| v.pointer(field).and_then(Value::as_str).unwrap_or_default();
    let masqueraded =
        primary && matches!(text("/spec/vpc"), "" | "ovn-cluster") && text("/spec/vlan").is_empty();
    let is_default =
        name == "ovn-default" || v.pointer("/spec/default").and_then(Value::as_bool) == Some(true);
    Ok(Subnet {
        name: cleaned(name),
        primary,
        cidrs,
        exclude,
        masqueraded,
        is_default,
    })
}

/// `10.0.0.1` or `10.0.0.10..10.0.0.20` (same family, first ≤ last).
pub fn parse_range(s: &str) -> Option<IpRange> {
    let s = s.trim();
    let (first, last) = if let Some((a, b)) = s.split_once("..") {
        (
            a.trim().parse::<IpAddr>().ok()?,
            b.trim().parse::<IpAddr>().ok()?,
        )
    } else {
        let ip = s.parse::<IpAddr>().ok()?;
        (ip, ip)
    };
    let ordered = match (first, last) {
        (IpAddr::V4(a), IpAddr::V4(b)) => a <= b,
        (IpAddr::V6(a), IpAddr::V6(b)) => a <= b,
        _ => false,
    };
    ordered.then_some(IpRange { first, last })
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
