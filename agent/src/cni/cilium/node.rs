//! Cilium's CiliumNodes, read from their lean structs (no generated types:
//! every field is checked by hand and named when it is wrong).

use std::collections::BTreeMap;

use ipnet::IpNet;
use serde_json::Value;

use super::lean::{LeanCiliumNode, Used};
use crate::cni::read::{bounded, capped, caps, ip_field, quote, reporter, shape::Shape, unnamed};
use crate::inventory::{
    CniNode, Invalid, Role, Source,
    ip_text::{parse_cidr, parse_ip},
    text::cleaned,
};

/// Cilium's own addresses and ranges in a `cilium.io/v2` CiliumNode: every
/// `CiliumInternalIP` of `spec.addresses`, `spec.ingress`, `spec.health`, the
/// `router`/`health`/`ingress` owners of `status.ipam.used` (the CRD-style
/// allocators), `spec.ipam.podCIDRs` (not in CRD-style modes, where it means
/// nothing) and `spec.ipam.pools.allocated[].cidrs` (multi-pool). `Err` when
/// the object is unusable (no name); field problems go to `problems`.
pub(crate) fn cilium_node(
    o: &LeanCiliumNode,
    problems: &mut Vec<Invalid>,
) -> Result<CniNode, Invalid> {
    let Some(name) = o.metadata.name.as_deref() else {
        return Err(unnamed("ciliumnodes"));
    };
    let mut bad = reporter(problems, "ciliumnodes", name);
    let mut node = CniNode {
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
    node: &mut CniNode,
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
    let pools = list(v, "spec.ipam.pools.allocated", caps::CIDRS, bad);
    let mut out = Vec::new();
    for (i, p) in pools.iter().enumerate() {
        let field = format!("spec.ipam.pools.allocated[{i}].cidrs");
        out.extend(cidr_list(p.get("cidrs"), &field, bad));
    }
    out
}

/// The entries of a list field, at most `max` (the cut named); none where it
/// is absent, null or no list (named).
fn list<'a>(
    v: Option<&'a Value>,
    field: &str,
    max: usize,
    bad: &mut dyn FnMut(String),
) -> &'a [Value] {
    match v {
        None | Some(Value::Null) => &[],
        Some(Value::Array(items)) => capped(items, max, field, bad),
        Some(_) => {
            bad(format!("{field} is not a list"));
            &[]
        }
    }
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
fn spec_addresses(v: Option<&Value>, node: &mut CniNode, bad: &mut dyn FnMut(String)) {
    let addrs = list(v, "spec.addresses", caps::ADDRESSES, bad);
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

/// The infrastructure owners of `status.ipam.used`; whether it lists any address
/// at all (the mark of a CRD-style allocator).
fn status_ipam_used(
    used: &Shape<BTreeMap<String, Shape<Used>>>,
    node: &mut CniNode,
    bad: &mut dyn FnMut(String),
) -> bool {
    match used {
        Shape::Absent => false,
        Shape::Map(used) => {
            // Counted and cut on the map itself: a Vec of its entries would
            // cost an allocation per CiliumNode event.
            if used.len() > caps::IPAM_USED {
                bad(format!(
                    "status.ipam.used has {} entries; only the first {} are read",
                    used.len(),
                    caps::IPAM_USED
                ));
            }
            for (key, entry) in used.iter().take(caps::IPAM_USED) {
                let Some(role) = entry.as_map().and_then(Used::role) else {
                    continue;
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
    for (i, c) in list(v, field, caps::CIDRS, bad).iter().enumerate() {
        match c.as_str().and_then(parse_cidr) {
            Some(c) => out.push(c.net),
            _ => bad(format!(
                "{field}[{i}] {} is not a CIDR; ignored",
                quote(&c.to_string())
            )),
        }
    }
    out
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
