//! Services, as the addresses they claim: the ones kube-proxy (IPVS) or
//! kube-vip bind on nodes, which a tenant can point at a pod's IP.

use std::net::IpAddr;

use serde_json::Value;

use crate::inventory::{ServiceAddress, ServiceField, ServiceRef, text::cleaned};

/// Addresses read per field at most: a Service has a few.
const PER_FIELD: usize = 16;

/// The addresses a Service (core/v1, as JSON) claims, each with its field:
/// `spec.clusterIPs` (or `spec.clusterIP`), `spec.externalIPs`,
/// `spec.loadBalancerIP`, `status.loadBalancer.ingress[].ip`. Values that are
/// not addresses (`None` for headless Services) are skipped.
pub fn service_addresses(v: &Value) -> Vec<(IpAddr, ServiceAddress)> {
    let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let service = ServiceRef {
        namespace: cleaned(text("/metadata/namespace")),
        name: cleaned(text("/metadata/name")),
    };
    let list = |p: &str| -> Vec<&str> {
        v.pointer(p)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(PER_FIELD)
            .filter_map(Value::as_str)
            .collect()
    };
    let mut cluster = list("/spec/clusterIPs");
    if cluster.is_empty() {
        cluster.push(text("/spec/clusterIP"));
    }
    let ingress: Vec<&str> = v
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(PER_FIELD)
        .filter_map(|i| i.get("ip").and_then(Value::as_str))
        .collect();
    let fields = [
        (ServiceField::ExternalIps, list("/spec/externalIPs")),
        (
            ServiceField::LoadBalancerIp,
            vec![text("/spec/loadBalancerIP")],
        ),
        (ServiceField::LoadBalancerIngress, ingress),
        (ServiceField::ClusterIps, cluster),
    ];
    let mut out = Vec::new();
    for (field, values) in fields {
        for ip in values
            .iter()
            .filter_map(|s| s.trim().parse::<IpAddr>().ok())
        {
            out.push((
                ip,
                ServiceAddress {
                    service: service.clone(),
                    field,
                },
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_that_binds_an_address_is_read() {
        let svc = serde_json::json!({
            "metadata": {"namespace": "tenant-b", "name": "mitm"},
            "spec": {"clusterIP": "10.96.7.7", "clusterIPs": ["10.96.7.7", "fd00:96::7"],
                     "externalIPs": ["10.244.4.12", "not-an-ip"], "loadBalancerIP": "10.244.4.13"},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.244.4.14"}, {"hostname": "lb.example"}]}}
        });
        let got: Vec<(String, ServiceField)> = service_addresses(&svc)
            .into_iter()
            .map(|(ip, a)| (ip.to_string(), a.field))
            .collect();
        assert_eq!(
            got,
            [
                ("10.244.4.12".into(), ServiceField::ExternalIps),
                ("10.244.4.13".into(), ServiceField::LoadBalancerIp),
                ("10.244.4.14".into(), ServiceField::LoadBalancerIngress),
                ("10.96.7.7".into(), ServiceField::ClusterIps),
                ("fd00:96::7".into(), ServiceField::ClusterIps),
            ]
        );
        let headless = serde_json::json!({"metadata": {"namespace": "a", "name": "h"},
                                          "spec": {"clusterIP": "None"}});
        assert!(service_addresses(&headless).is_empty());
    }
}
