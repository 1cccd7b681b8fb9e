//! kube-vip's cloud provider (kube-vip/kube-vip-cloud-provider, read at
//! d3522c6f): the load-balancer IPs of the ConfigMap `kube-system/kubevip`,
//! one pool per Service namespace (`cidr-<ns>`, `range-<ns>`) and the
//! fallback `cidr-global` / `range-global`. Each value is a comma-separated
//! list split with no trimming; a CIDR's host bits are ignored and every
//! address of it handed out, network and broadcast too, unless
//! `skip-end-ips-in-cidr` is `true`. It checks its pools against nothing.

use serde_json::Value;

use super::plan::{Records, config_map, invalid, parse_entry};
use crate::inventory::{Invalid, IpRange, Planned, Purpose};

/// The cloud provider's pools: only its one ConfigMap, never the cluster's
/// others.
pub const CONFIG: Records = Records {
    allocator: "kube-vip",
    group: "",
    versions: &["v1"],
    kind: "ConfigMap",
    plural: "configmaps",
    read,
    only: Some(("kube-system", "kubevip")),
};

/// The field the pools are written in; the key goes with the range's text
/// (`cidr-finance 192.168.0.220/29`), as keys name namespaces.
const FIELD: &str = "data";

/// `0.0.0.0/32` asks for an address by DHCP: no range of the plan.
const DHCP: &str = "0.0.0.0/32";

fn read(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    let Some((object, data)) = config_map(&CONFIG, json, bad) else {
        return Vec::new();
    };
    let not_text: Vec<&str> = data
        .iter()
        .filter(|(_, v)| !v.is_string())
        .map(|(k, _)| k.as_str())
        .collect();
    if !not_text.is_empty() {
        let problem = format!(
            "data {} not strings (a ConfigMap's data holds strings only; quote them): skipped",
            not_text.join(", ")
        );
        bad.push(invalid(&CONFIG, object.clone(), problem));
    }
    let skip_ends = data.get("skip-end-ips-in-cidr").and_then(Value::as_str) == Some("true");
    let mut out = Vec::new();
    for (key, value) in &data {
        let Some(value) = value.as_str() else {
            continue;
        };
        let cidr = match key.split_once('-') {
            Some(("cidr", _)) => true,
            Some(("range", _)) => false,
            _ => continue,
        };
        for text in value.split(',').filter(|t| *t != DHCP) {
            let Some(range) = entry(text, cidr) else {
                let problem = format!(
                    "{FIELD} {key} {text:?} is no {}: it is not checked",
                    if cidr { "CIDR" } else { "first-last range" }
                );
                bad.push(invalid(&CONFIG, object.clone(), problem));
                continue;
            };
            out.push(pool(&object, key, text, range, cidr && skip_ends));
        }
    }
    out
}

/// One entry of a `cidr-` (a CIDR) or `range-` key (`first-last`), as
/// kube-vip parses it: spaces are part of the address, so none is read.
fn entry(text: &str, cidr: bool) -> Option<IpRange> {
    let shape = if cidr { '/' } else { '-' };
    if !text.contains(shape) || text.chars().any(char::is_whitespace) {
        return None;
    }
    parse_entry(text)
}

fn pool(object: &str, key: &str, text: &str, range: IpRange, skip_ends: bool) -> Planned {
    let owner = CONFIG.owner(object, FIELD);
    let mut p = Planned::new(owner, Purpose::LoadBalancer, range, format!("{key} {text}"));
    // kube-vip skips an IPv4 CIDR's ends only when told to.
    if skip_ends && range.first.is_ipv4() && range.first != range.last {
        p.exclude = [range.first, range.last]
            .map(|ip| IpRange::of(&ip.into()))
            .into();
    }
    p
}

#[cfg(test)]
#[path = "kube_vip_tests.rs"]
mod tests;
