//! The converters as they read whole objects as JSON, before the lean
//! structs: the reference the lean readers are checked against (the same
//! objects, real and malformed, must convert the same either way).

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;

use crate::cni::kube_ovn::parse_range;
use crate::cni::read::{bounded, capped, caps, quote, unnamed};
use crate::inventory::{
    CniNode, Invalid, IpRange, Role, SandboxFailure, Source, Subnet,
    ip_text::{parse_cidr, parse_ip},
    text::cleaned,
};

pub(crate) fn cilium_node(v: &Value, problems: &mut Vec<Invalid>) -> Result<CniNode, Invalid> {
    let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) else {
        return Err(unnamed("ciliumnodes"));
    };
    let mut bad = |problem: String| {
        problems.push(Invalid {
            resource: "ciliumnodes",
            object: name.to_owned(),
            problem,
        });
    };
    let mut node = CniNode {
        name: cleaned(name),
        ..Default::default()
    };
    spec_addresses(v, &mut node, &mut bad);
    spec_ingress_and_health(v, &mut node, &mut bad);
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
    node.operator_pool = crd_style;
    node.pool_cidrs = pool_cidrs(v, &mut bad);
    node.operator_error = operator_error(v, &mut bad);
    Ok(node)
}

/// The addresses of `spec.ingress` and `spec.health`, one per family.
fn spec_ingress_and_health(v: &Value, node: &mut CniNode, bad: &mut dyn FnMut(String)) {
    for (section, role, source) in [
        ("ingress", Role::Ingress, Source::SpecIngress),
        ("health", Role::Health, Source::SpecHealth),
    ] {
        match v.pointer(&format!("/spec/{section}")) {
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
}

/// The CIDRs of every pool in `spec.ipam.pools.allocated` (multi-pool IPAM).
fn pool_cidrs(v: &Value, bad: &mut dyn FnMut(String)) -> Vec<IpNet> {
    let mut out = Vec::new();
    match v.pointer("/spec/ipam/pools/allocated") {
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
fn operator_error(v: &Value, bad: &mut dyn FnMut(String)) -> Option<String> {
    // `error: ""` is the healthy case; `resourceIPAMError` beside it belongs to
    // the network-driver IPAM, not pod addresses.
    match v.pointer("/status/ipam/operator-status/error") {
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
fn spec_addresses(v: &Value, node: &mut CniNode, bad: &mut dyn FnMut(String)) {
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
fn status_ipam_used(v: &Value, node: &mut CniNode, bad: &mut dyn FnMut(String)) -> bool {
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

pub(crate) fn subnet(v: &Value, problems: &mut Vec<Invalid>) -> Result<Subnet, Invalid> {
    let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) else {
        return Err(unnamed("subnets"));
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
    let mut bad = |problem: String| problems.push(invalid(problem));
    let cidrs = cidr_block(block, &mut bad);
    if cidrs.is_empty() {
        return Err(invalid(format!(
            "spec.cidrBlock {} has no valid CIDR; object skipped",
            quote(block)
        )));
    }
    let exclude = exclude_ips(v, &mut bad);
    let primary = primary(v);
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

/// The CIDRs of `spec.cidrBlock` (comma-separated for dual stack); bad parts
/// named and skipped.
fn cidr_block(block: &str, bad: &mut dyn FnMut(String)) -> Vec<IpNet> {
    let mut cidrs = Vec::new();
    for part in block.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match parse_cidr(part) {
            Some(c) => cidrs.push(c.net),
            None => bad(format!(
                "spec.cidrBlock part {} is not a CIDR; ignored",
                quote(part)
            )),
        }
    }
    cidrs
}

/// The addresses and ranges of `spec.excludeIps`; bad entries named and skipped.
fn exclude_ips(v: &Value, bad: &mut dyn FnMut(String)) -> Vec<IpRange> {
    let mut exclude = Vec::new();
    match v.pointer("/spec/excludeIps") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            let items = capped(items, caps::EXCLUDE_IPS, "spec.excludeIps", bad);
            for (i, item) in items.iter().enumerate() {
                match item.as_str().and_then(parse_range) {
                    Some(r) => exclude.push(r),
                    None => bad(format!(
                        "spec.excludeIps[{i}] {} is neither an IP nor first..last; ignored",
                        quote(&item.to_string())
                    )),
                }
            }
        }
        Some(_) => bad("spec.excludeIps is not a list; ignored".to_owned()),
    }
    exclude
}

/// Whether the Subnet holds pods' primary addresses.
fn primary(v: &Value) -> bool {
    // Unset or `ovn`: pods' primary addresses. `<nad>.<ns>` (IPAM only) and
    // `<nad>.<ns>.ovn` (kube-ovn attachments) are secondary networks.
    match v.pointer("/spec/provider") {
        None | Some(Value::Null) => true,
        Some(p) => p.as_str().is_some_and(|p| p.is_empty() || p == "ovn"),
    }
}

const REASON: &str = "FailedCreatePodSandBox";

/// A `FailedCreatePodSandBox` Event about a pod (core/v1 as `kubectl get events
/// -o json` prints it, or events.k8s.io/v1) as a [`SandboxFailure`]; `None` for
/// any other Event, or a refusal ipshadow does not diagnose.
pub(crate) fn sandbox_failure(event: &Value) -> Option<SandboxFailure> {
    if event.get("reason").and_then(Value::as_str) != Some(REASON) {
        return None;
    }
    let about = event
        .get("involvedObject")
        .or_else(|| event.get("regarding"))?;
    if about.get("kind").and_then(Value::as_str) != Some("Pod") {
        return None;
    }
    let text = |v: Option<&Value>| cleaned(v.and_then(Value::as_str).unwrap_or_default());
    // core/v1 lets an Event name a pod of another namespace than its own (when
    // eventTime is unset); kubelet writes a pod's Events in the pod's
    // namespace. One that differs was written by someone about a pod of
    // another tenant: never counted.
    let own = event.pointer("/metadata/namespace").and_then(Value::as_str);
    if own.is_some_and(|ns| Some(ns) != about.get("namespace").and_then(Value::as_str)) {
        return None;
    }
    let message = event.get("message").or_else(|| event.get("note"));
    let message = message.and_then(Value::as_str)?;
    let refusal = super::sandbox_refusal(message)?;
    let count = event
        .get("count")
        .or_else(|| event.pointer("/series/count"))
        .and_then(Value::as_u64)
        .unwrap_or(1);
    Some(SandboxFailure {
        namespace: text(about.get("namespace")),
        pod: text(about.get("name")),
        uid: text(about.get("uid")),
        refusal,
        count,
        message: bounded(
            &cleaned(&super::sandbox::normalize(message)),
            SandboxFailure::MESSAGE_MAX,
        ),
    })
}

/// `v` read as the lean struct `L`, from its bytes as a watch reads it.
pub(crate) fn lean<L: serde::de::DeserializeOwned>(v: &Value) -> L {
    let bytes = serde_json::to_vec(v).expect("bytes");
    serde_json::from_slice(&bytes).expect("a lean object never fails to parse")
}
