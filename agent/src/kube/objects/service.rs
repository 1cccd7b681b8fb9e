//! Services, as the addresses they claim: the ones kube-proxy (IPVS) or
//! kube-vip bind on nodes, which a tenant can point at a pod's IP.
//!
//! Read as the cluster reads them: every address of every field (no cap: the
//! API server bounds an object's size, and the 17th external IP is bound as
//! the first is), each parsed as kube-proxy parses it
//! ([`crate::inventory::ip_text`]). A Service holding an address that cannot
//! be read is named, and the read that met it cannot tell that no Service
//! claims a given address ([`crate::inventory::ServiceAddresses::holders`]).

use std::net::IpAddr;

use serde::Deserialize;

use crate::cni::read::quote;
use crate::inventory::{
    Invalid, ServiceAddress, ServiceField, ServiceRef, ip_text::parse_ip, text::cleaned,
};

/// A Service (core/v1) cut to the fields that set its addresses. serde skips
/// every other field unparsed: annotations, managedFields, ports and
/// selectors are never allocated, however large a tenant makes them.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct LeanService {
    metadata: Option<Meta>,
    spec: Option<Spec>,
    status: Option<Status>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Meta {
    namespace: Option<String>,
    name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Spec {
    #[serde(rename = "clusterIP")]
    cluster_ip: Option<String>,
    #[serde(rename = "clusterIPs")]
    cluster_ips: Option<Vec<String>>,
    #[serde(rename = "externalIPs")]
    external_ips: Option<Vec<String>>,
    #[serde(rename = "loadBalancerIP")]
    load_balancer_ip: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Status {
    #[serde(rename = "loadBalancer")]
    load_balancer: Option<LoadBalancer>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct LoadBalancer {
    ingress: Option<Vec<Ingress>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Ingress {
    ip: Option<String>,
}

impl LeanService {
    /// The Service's `namespace/name`, made safe to show.
    pub fn service_ref(&self) -> ServiceRef {
        let meta = self.metadata.as_ref();
        let text = |field: Option<&String>| cleaned(field.map_or("", String::as_str));
        ServiceRef {
            namespace: text(meta.and_then(|m| m.namespace.as_ref())),
            name: text(meta.and_then(|m| m.name.as_ref())),
        }
    }

    /// Each field's values, as kubectl explain names the field: the cluster
    /// IPs from `spec.clusterIPs`, or `spec.clusterIP` where that is empty.
    fn fields(&self) -> [(ServiceField, &'static str, Vec<&str>); 4] {
        fn list(v: Option<&Vec<String>>) -> Vec<&str> {
            v.into_iter().flatten().map(String::as_str).collect()
        }
        let spec = self.spec.as_ref();
        let mut cluster = list(spec.and_then(|s| s.cluster_ips.as_ref()));
        if cluster.is_empty() {
            cluster.extend(spec.and_then(|s| s.cluster_ip.as_deref()));
        }
        let ingress = (self.status.as_ref())
            .and_then(|s| s.load_balancer.as_ref()?.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|i| i.ip.as_deref())
            .collect();
        let external = list(spec.and_then(|s| s.external_ips.as_ref()));
        let lb_ip: Vec<_> = spec
            .and_then(|s| s.load_balancer_ip.as_deref())
            .into_iter()
            .collect();
        [
            (ServiceField::ExternalIps, "spec.externalIPs", external),
            (ServiceField::LoadBalancerIp, "spec.loadBalancerIP", lb_ip),
            (
                ServiceField::LoadBalancerIngress,
                "status.loadBalancer.ingress[].ip",
                ingress,
            ),
            (ServiceField::ClusterIps, "spec.clusterIPs", cluster),
        ]
    }
}

/// The addresses a Service claims, each with its field: every entry of
/// `spec.clusterIPs` (or `spec.clusterIP`), `spec.externalIPs`,
/// `spec.loadBalancerIP`, `status.loadBalancer.ingress[].ip`. An empty value
/// is unset and `None` a headless Service's cluster IP; any other value that
/// is no address to kube-proxy makes the Service unreadable, named once in
/// `problems` (resource `services`) with the first such value.
pub fn service_addresses(
    s: &LeanService,
    problems: &mut Vec<Invalid>,
) -> Vec<(IpAddr, ServiceAddress)> {
    let service = s.service_ref();
    let mut out = Vec::new();
    let mut unreadable: Option<(&'static str, &str)> = None;
    let mut unreadable_count = 0usize;
    for (field, name, values) in s.fields() {
        for value in values {
            let headless = field == ServiceField::ClusterIps && value == "None";
            if value.is_empty() || headless {
                continue;
            }
            let Some(ip) = parse_ip(value) else {
                unreadable.get_or_insert((name, value));
                unreadable_count += 1;
                continue;
            };
            out.push((
                ip,
                ServiceAddress {
                    service: service.clone(),
                    field,
                },
            ));
        }
    }
    if let Some((field, value)) = unreadable {
        problems.push(unreadable_service(&service, field, value, unreadable_count));
    }
    out
}

/// The problem of a Service with `count` values that are no address, the
/// first `value` in `field`.
fn unreadable_service(service: &ServiceRef, field: &str, value: &str, count: usize) -> Invalid {
    let more = match count {
        0 | 1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Invalid {
        resource: "services",
        object: format!("{}/{}", service.namespace, service.name),
        problem: format!(
            "{field} holds {}{more}, not an IP address as Kubernetes reads one; no local \
             address of a node shadowing a pod counts as checked against the Services (its \
             collision stays unchecked, never remediated) until it is fixed",
            quote(value)
        ),
    }
}

/// [`service_addresses`] of a Service as JSON (an item of a file): one not
/// even shaped as a Service (a hand-made object) is unreadable as a whole.
pub fn service_json(
    v: &serde_json::Value,
    problems: &mut Vec<Invalid>,
) -> Vec<(IpAddr, ServiceAddress)> {
    match LeanService::deserialize(v) {
        Ok(s) => service_addresses(&s, problems),
        Err(e) => {
            let text = |p| v.pointer(p).and_then(serde_json::Value::as_str);
            let name = |p| cleaned(text(p).unwrap_or("(unnamed)"));
            problems.push(Invalid {
                resource: "services",
                object: format!("{}/{}", name("/metadata/namespace"), name("/metadata/name")),
                problem: format!(
                    "is not a valid Service ({e}); its addresses are unknown, so no local \
                     address of a node shadowing a pod counts as checked against the Services"
                ),
            });
            Vec::new()
        }
    }
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
