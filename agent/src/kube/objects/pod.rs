//! Pods: their IPs from status, or from a CNI's annotation before they have one.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod as K8sPod;

use super::quote;
use crate::inventory::{Invalid, IpSource, Pod, PodIp};

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
        });
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
        created: p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
    }
}
