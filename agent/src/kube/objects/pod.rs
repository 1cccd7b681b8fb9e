//! Pods: their IPs from status, or from a CNI's annotation before they have one.

use k8s_openapi::{
    api::core::v1::{Pod as K8sPod, PodStatus},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use crate::cni::read::{bounded, capped, caps, quote, reporter};
use crate::cni::{kube_ovn, multus};
use crate::inventory::{Invalid, IpSource, Pod, PodIp, ip_text::parse_ip, text::cleaned};

/// The longest object name Kubernetes allows.
const NAME_MAX: usize = 253;

/// Adds `raw` as one of the pod's IPs, naming a bad or repeated one.
fn push_ip(
    ips: &mut Vec<PodIp>,
    raw: &str,
    source: IpSource,
    field: &str,
    bad: &mut dyn FnMut(String),
) {
    match parse_ip(raw) {
        Some(ip) if !ips.iter().any(|x| x.ip == ip) => ips.push(PodIp { ip, source }),
        // The API server rejects duplicates: whoever wrote this object is broken.
        Some(_) => bad(format!(
            "{field} {} is listed twice; counted once",
            quote(raw)
        )),
        None => bad(format!("{field} {} is not an IP address", quote(raw))),
    }
}

/// The IPs of the first of `keys` present in `annotations`: one address per
/// family, of the first few parts (anyone who may edit the pod writes this, and
/// it can be as long as the API server allows). Returns the Subnet kube-ovn's
/// annotation names, if any.
fn annotated_ips(
    annotations: &std::collections::BTreeMap<String, String>,
    keys: &[String],
    ips: &mut Vec<PodIp>,
    bad: &mut dyn FnMut(String),
) -> Option<String> {
    let (key, value) = keys
        .iter()
        .find_map(|k| annotations.get(k).map(|v| (k, v)))?;
    let field = format!("annotation {key}");
    let mut parts = value.split(',').filter(|s| !s.trim().is_empty());
    for part in parts.by_ref().take(caps::ANNOTATION_PARTS) {
        let family = parse_ip(part.trim()).map(|ip| ip.is_ipv6());
        if family.is_some_and(|v6| ips.iter().any(|i| i.ip.is_ipv6() == v6)) {
            bad(format!(
                "annotation {key} lists a second address of one family ({}); ignored",
                quote(part)
            ));
            continue;
        }
        push_ip(ips, part.trim(), IpSource::Annotation, &field, bad);
    }
    if parts.next().is_some() {
        bad(format!(
            "annotation {key} lists more than {} parts; the rest ignored",
            caps::ANNOTATION_PARTS
        ));
    }
    annotations
        .get(kube_ovn::LOGICAL_SWITCH)
        .filter(|s| !s.is_empty() && s.len() <= NAME_MAX)
        .map(|s| cleaned(s))
}

/// The inventory view of a pod. Its IPs come from `status.podIPs` (or
/// `status.podIP`), and only when it has none from the first of
/// `annotation_keys` present (kube-ovn's `ovn.kubernetes.io/ip_address`,
/// comma-separated for dual stack).
pub fn pod(p: &K8sPod, annotation_keys: &[String], problems: &mut Vec<Invalid>) -> Pod {
    let (meta, spec, status) = (&p.metadata, p.spec.as_ref(), p.status.as_ref());
    // Every name is made safe to show here, at the edge: they reach tables and notes.
    let namespace = cleaned(meta.namespace.as_deref().unwrap_or_default());
    let name = cleaned(meta.name.as_deref().unwrap_or_default());
    let object = format!("{namespace}/{name}");
    let mut bad = reporter(problems, "pods", &object);
    let mut ips = status.map(|s| status_ips(s, &mut bad)).unwrap_or_default();
    let annotations = meta.annotations.as_ref();
    let logical_switch = annotations
        .filter(|_| ips.is_empty())
        .and_then(|a| annotated_ips(a, annotation_keys, &mut ips, &mut bad));
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let phase = status.and_then(|s| s.phase.clone());
    if ips.is_empty() && !host_network && phase.as_deref() == Some("Running") {
        bad(
            "is Running but has no IP in status.podIPs, status.podIP or an IP annotation"
                .to_owned(),
        );
    }
    let secondary = annotations
        .map(|a| multus::secondary(a, &namespace, &mut bad))
        .unwrap_or_default();
    Pod {
        namespace,
        name,
        uid: cleaned(meta.uid.as_deref().unwrap_or_default()),
        node: spec
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
            .map(cleaned),
        ips,
        host_network,
        phase,
        created: meta.creation_timestamp.as_ref().map(|t| t.0.as_second()),
        logical_switch,
        terminating: meta.deletion_timestamp.is_some(),
        controller: controller(meta),
        default_network_elsewhere: annotations
            .is_some_and(|a| a.contains_key(multus::DEFAULT_NETWORK)),
        secondary,
    }
}

/// The IPs of `status.podIPs`, else of `status.podIP`.
fn status_ips(status: &PodStatus, bad: &mut dyn FnMut(String)) -> Vec<PodIp> {
    let mut ips: Vec<PodIp> = Vec::new();
    let listed = status.pod_ips.as_deref().unwrap_or_default();
    let listed = capped(listed, caps::POD_IPS, "status.podIPs", bad);
    for (i, pip) in listed.iter().enumerate() {
        let field = format!("status.podIPs[{i}].ip");
        push_ip(&mut ips, &pip.ip, IpSource::Status, &field, bad);
    }
    if listed.is_empty()
        && let Some(single) = status.pod_ip.as_deref().filter(|s| !s.is_empty())
    {
        push_ip(&mut ips, single, IpSource::Status, "status.podIP", bad);
    }
    // A pod has at most one IP per family; more means a broken object (all are
    // still checked: a false alarm costs less than a missed collision).
    let v6 = ips.iter().filter(|i| i.ip.is_ipv6()).count();
    let v4 = ips.len() - v6;
    if v4 > 1 || v6 > 1 {
        bad(format!(
            "status.podIPs lists {} addresses ({v4} IPv4, {v6} IPv6); a pod has at most one per family",
            ips.len()
        ));
    }
    ips
}

/// The pod's controller, `Kind/name`.
fn controller(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| bounded(&cleaned(&format!("{}/{}", o.kind, o.name)), 256))
}
