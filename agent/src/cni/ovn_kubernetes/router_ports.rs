//! ovn-kubernetes' router ports of a node, which hold addresses no pod may
//! have: the gateway router's port on the join switch and the cluster
//! router's port on the transit switch (interconnect). From ovn-kubernetes'
//! source (go-controller/pkg/util/node_annotations.go):
//! - `k8s.ovn.org/node-gateway-router-lrp-ifaddr` `{"ipv4":"100.64.0.2/16"}`:
//!   the join address, one network (deprecated 2024, commit 258c5cd16);
//! - `k8s.ovn.org/node-gateway-router-lrp-ifaddrs` keyed by network
//!   (`{"default":{"ipv4":"100.64.0.4/16"}}`), "deprecated, only used for
//!   cleanup" since PR#6772, which stopped reading either;
//! - `k8s.ovn.org/node-transit-switch-port-ifaddr` `{"ipv4":"100.88.0.3/16"}`,
//!   still written by cluster-manager;
//! - `k8s.ovn.org/node-id`: the join address is now derived from it
//!   (go-controller/pkg/generator/udn/join_ips.go `GetGWRouterIPs` →
//!   `GenerateIP(nodeID)` = the join subnet's base + node-id,
//!   go-controller/pkg/generator/ip/ip_generator.go), the join subnet
//!   defaulting to 100.64.0.0/16 and fd98::/64 (go-controller/pkg/config/config.go
//!   `V4JoinSubnet`, `V6JoinSubnet`).

use std::collections::BTreeMap;

use ipnet::IpNet;
use serde_json::{Map, Value};

use crate::cni::read::quote;
use crate::inventory::{
    CniNode, Role, Source,
    ip_text::{Cidr, parse_cidr},
};

use super::{DEFAULT_JOIN, LRP_IFADDR, LRP_IFADDRS, MASQUERADE_SUBNET, NODE_ID, TRANSIT_IFADDR};

/// The annotations read here: the metadata watch keeps them.
pub(crate) const KEYS: [&str; 5] = [
    LRP_IFADDR,
    LRP_IFADDRS,
    TRANSIT_IFADDR,
    NODE_ID,
    MASQUERADE_SUBNET,
];

/// Adds the join and transit addresses `annotations` give `node` (after its
/// node subnets are read); a malformed value is named through `bad`.
pub(crate) fn add_router_ports(
    annotations: &BTreeMap<String, String>,
    node: &mut CniNode,
    bad: &mut dyn FnMut(String),
) {
    let before = node.addresses.len();
    if let Some(raw) = annotations.get(LRP_IFADDRS) {
        match serde_json::from_str::<Value>(raw) {
            Ok(Value::Object(nets)) => match nets.get("default") {
                Some(Value::Object(ips)) => {
                    add_ifaddr(ips, LRP_IFADDRS, Some(Source::OvnJoinAnnotation), node, bad);
                }
                // Other networks' join addresses are not the default network's.
                None => {}
                Some(_) => bad(not_ifaddr(LRP_IFADDRS, raw)),
            },
            _ => bad(not_ifaddr(LRP_IFADDRS, raw)),
        }
    }
    if let Some(raw) = annotations.get(LRP_IFADDR) {
        read_ifaddr(raw, LRP_IFADDR, Some(Source::OvnJoinAnnotation), node, bad);
    }
    let published = node.addresses.len() > before;
    if let Some(raw) = annotations.get(TRANSIT_IFADDR) {
        read_ifaddr(
            raw,
            TRANSIT_IFADDR,
            Some(Source::OvnTransitAnnotation),
            node,
            bad,
        );
    }
    if !published {
        derive_join(annotations, node, bad);
    }
    if let Some(raw) = annotations.get(MASQUERADE_SUBNET) {
        read_ifaddr(raw, MASQUERADE_SUBNET, None, node, bad);
    }
}

/// The join address of each family from `k8s.ovn.org/node-id` and the
/// default join subnet, unless one of the node's subnets overlaps it
/// (ovn-kubernetes refuses that at startup: the join subnet was moved).
fn derive_join(
    annotations: &BTreeMap<String, String>,
    node: &mut CniNode,
    bad: &mut dyn FnMut(String),
) {
    let Some(raw) = annotations.get(NODE_ID) else {
        return;
    };
    let Ok(id) = raw.trim().parse::<u32>() else {
        bad(format!(
            "annotation {NODE_ID} {} is not a node id; ignored",
            quote(raw)
        ));
        return;
    };
    // cluster-manager's ids start at 1; 0 is never a node's.
    if id == 0 {
        return;
    }
    for join in DEFAULT_JOIN
        .iter()
        .filter_map(|j| parse_cidr(j))
        .map(|c| c.net)
    {
        // The families the node's subnets show (IPv4 when none are known).
        let v6 = matches!(join, IpNet::V6(_));
        let family = node
            .ovn_subnets
            .iter()
            .any(|s| matches!(s, IpNet::V6(_)) == v6)
            || (node.ovn_subnets.is_empty() && !v6);
        let moved = node
            .ovn_subnets
            .iter()
            .any(|s| s.contains(&join.network()) || join.contains(&s.network()));
        if let Some(ip) = crate::inventory::nth(&join, id).filter(|_| family && !moved) {
            node.add(ip, Role::OvnRouterPort, Source::OvnNodeId);
            node.ovn_internal.push((NODE_ID, join));
        }
    }
}

/// One `{"ipv4":"…/16","ipv6":"…/64"}` value.
fn read_ifaddr(
    raw: &str,
    key: &'static str,
    source: Option<Source>,
    node: &mut CniNode,
    bad: &mut dyn FnMut(String),
) {
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(ips)) => add_ifaddr(&ips, key, source, node, bad),
        _ => bad(not_ifaddr(key, raw)),
    }
}

/// The subnet of each family and, given its `source`, the router port's
/// address in it (the masquerade subnet, without: no address of the node's).
fn add_ifaddr(
    ips: &Map<String, Value>,
    key: &'static str,
    source: Option<Source>,
    node: &mut CniNode,
    bad: &mut dyn FnMut(String),
) {
    for c in cidrs(ips, key, bad) {
        if let Some(source) = source {
            node.add(c.ip, Role::OvnRouterPort, source);
        }
        if !node.ovn_internal.contains(&(key, c.net)) {
            node.ovn_internal.push((key, c.net));
        }
    }
}

/// The `ipv4` and `ipv6` CIDRs of one value, each of its family.
fn cidrs(ips: &Map<String, Value>, key: &str, bad: &mut dyn FnMut(String)) -> Vec<Cidr> {
    let mut out = Vec::new();
    for (family, v6) in [("ipv4", false), ("ipv6", true)] {
        let Some(v) = ips.get(family) else {
            continue;
        };
        match v.as_str().and_then(parse_cidr) {
            Some(c) if c.ip.is_ipv6() == v6 => out.push(c),
            _ => bad(format!(
                "annotation {key} {family} {} is not an {family} CIDR; ignored",
                quote(&v.to_string())
            )),
        }
    }
    out
}

fn not_ifaddr(key: &str, raw: &str) -> String {
    format!(
        "annotation {key} {} is not an object of ipv4/ipv6 CIDRs; ignored",
        quote(raw)
    )
}

#[cfg(test)]
#[path = "router_ports_tests.rs"]
mod tests;
