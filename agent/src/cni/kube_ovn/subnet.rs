//! kube-ovn's Subnets, read from their lean structs (no generated types: every
//! field is checked by hand and named when it is wrong).

use ipnet::IpNet;
use serde_json::Value;

use super::lean::LeanSubnet;
use crate::cni::read::{capped, caps, quote, unnamed};
use crate::inventory::{
    Invalid, IpRange, Subnet,
    ip_text::{parse_cidr, parse_ip},
    text::cleaned,
};

/// A kube-ovn `Subnet` (kubeovn.io/v1). `Err` when the object is unusable
/// (no name, or no valid `spec.cidrBlock`).
pub fn subnet(o: &LeanSubnet, problems: &mut Vec<Invalid>) -> Result<Subnet, Invalid> {
    let Some(name) = o.metadata.name.as_deref() else {
        return Err(unnamed("subnets"));
    };
    let invalid = |problem: String| Invalid {
        resource: "subnets",
        object: name.to_owned(),
        problem,
    };
    // A spec of the wrong type has no `cidrBlock` either.
    let spec = o.spec.as_ref().ok();
    let block = spec.and_then(|s| s.cidr_block.as_ref()?.as_str());
    let (Some(spec), Some(block)) = (spec, block) else {
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
    let exclude = exclude_ips(spec.exclude_ips.as_ref(), &mut bad);
    let primary = primary(spec.provider.as_ref());
    // kube-ovn's `ovn40subnets`: overlay Subnets of the default VPC.
    let text = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).map(str::to_owned);
    let vpc = text(&spec.vpc).unwrap_or_default();
    let masqueraded = primary
        && matches!(vpc.as_str(), "" | "ovn-cluster")
        && text(&spec.vlan).unwrap_or_default().is_empty();
    let is_default =
        name == "ovn-default" || spec.default.as_ref().and_then(Value::as_bool) == Some(true);
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
fn exclude_ips(v: Option<&Value>, bad: &mut dyn FnMut(String)) -> Vec<IpRange> {
    let mut exclude = Vec::new();
    match v {
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
fn primary(provider: Option<&Value>) -> bool {
    // Unset or `ovn`: pods' primary addresses. `<nad>.<ns>` (IPAM only) and
    // `<nad>.<ns>.ovn` (kube-ovn attachments) are secondary networks.
    match provider {
        None | Some(Value::Null) => true,
        Some(p) => p.as_str().is_some_and(|p| p.is_empty() || p == "ovn"),
    }
}

/// `10.0.0.1` or `10.0.0.10..10.0.0.20` (same family, first ≤ last).
pub fn parse_range(s: &str) -> Option<IpRange> {
    let s = s.trim();
    let (first, last) = if let Some((a, b)) = s.split_once("..") {
        (parse_ip(a.trim())?, parse_ip(b.trim())?)
    } else {
        let ip = parse_ip(s)?;
        (ip, ip)
    };
    (first.is_ipv4() == last.is_ipv4() && first <= last).then_some(IpRange { first, last })
}
