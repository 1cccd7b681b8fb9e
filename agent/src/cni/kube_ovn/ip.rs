//! kube-ovn's record of one pod's allocation (an `ips.kubeovn.io` object).

use std::net::IpAddr;

use super::lean::LeanIp;
use crate::{cni::read::caps, inventory::ip_text::parse_ip};

/// A string field's text; empty when absent or not a string.
fn text(v: Option<&serde_json::Value>) -> &str {
    v.and_then(serde_json::Value::as_str).unwrap_or_default()
}

/// The addresses kube-ovn's record of an allocation (an `ips.kubeovn.io`
/// object, named `<pod>.<namespace>`) holds for the pod `namespace/name`:
/// `spec.v4IpAddress`, `spec.v6IpAddress`, `spec.ipAddress` (comma-separated
/// for dual stack). Empty when the record is about another pod.
pub(crate) fn kube_ovn_ip(record: &LeanIp, namespace: &str, name: &str) -> Vec<IpAddr> {
    let Ok(spec) = &record.spec else {
        return Vec::new();
    };
    if text(spec.pod_name.as_ref()) != name || text(spec.namespace.as_ref()) != namespace {
        return Vec::new();
    }
    let mut out: Vec<IpAddr> = Vec::new();
    for part in [
        text(spec.v4_ip_address.as_ref()),
        text(spec.v6_ip_address.as_ref()),
        text(spec.ip_address.as_ref()),
    ]
    .into_iter()
    .flat_map(|t| t.split(',').take(caps::ANNOTATION_PARTS))
    {
        if let Some(ip) = parse_ip(part.trim())
            && !out.contains(&ip)
        {
            out.push(ip);
        }
    }
    out
}
