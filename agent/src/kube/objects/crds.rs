//! Cilium's CiliumNodes and kube-ovn's Subnets, read from their JSON (no
//! generated types: every field is checked by hand and named when it is wrong).

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;

use super::quote;
use crate::inventory::{CiliumNode, Invalid, IpRange, Subnet};

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
        });
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
