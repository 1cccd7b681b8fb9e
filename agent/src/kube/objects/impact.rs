//! EndpointSlices, admission webhook configurations and APIServices as
//! [`Routes`]: only which Service holds which pod, and who calls which Service.

use std::{net::IpAddr, path::Path};

use serde_json::Value;

use crate::{
    inventory::text::cleaned,
    inventory::{Caller, EndpointSlice, Routes, ServiceRef},
    kube::files,
};

/// Endpoints read of one slice at most (the API allows 1,000).
pub(crate) const ENDPOINTS_MAX: usize = 1_000;
/// Addresses read of one endpoint: the first, the one kube-proxy programs
/// (`pkg/proxy/endpointslicecache.go` `addEndpoints` uses `Addresses[0]`; the
/// API allows 100 and says "clients may choose to only use the first
/// element"). An address listed after it receives no Service traffic.
const ADDRESSES_MAX: usize = 1;
/// Webhooks read of one configuration at most.
pub(crate) const WEBHOOKS_MAX: usize = 256;

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// [`text`], made safe to show (names go into notes and tables).
fn owned(v: &Value, pointer: &str) -> Option<String> {
    text(v, pointer).map(cleaned)
}

fn service(v: Option<&Value>) -> Option<ServiceRef> {
    let v = v?;
    Some(ServiceRef {
        namespace: owned(v, "/namespace")?,
        name: owned(v, "/name")?,
    })
}

/// A `discovery.k8s.io/v1` EndpointSlice.
#[must_use]
pub fn endpoint_slice(v: &Value) -> EndpointSlice {
    let service = match (
        text(v, "/metadata/namespace"),
        text(v, "/metadata/labels/kubernetes.io~1service-name"),
    ) {
        (Some(namespace), Some(name)) => Some(ServiceRef {
            namespace: cleaned(namespace),
            name: cleaned(name),
        }),
        _ => None,
    };
    let endpoints = v
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(ENDPOINTS_MAX)
        .map(|e| {
            let pod = (text(e, "/targetRef/kind") == Some("Pod"))
                .then(|| owned(e, "/targetRef/name"))
                .flatten();
            let addresses: Vec<IpAddr> = e
                .get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .take(ADDRESSES_MAX)
                .filter_map(|a| crate::inventory::ip_text::parse_ip(a.as_str()?))
                .collect();
            (pod, addresses)
        })
        .collect();
    EndpointSlice { service, endpoints }
}

/// The Services a Validating- or MutatingWebhookConfiguration, or an
/// APIService, sends the kube-apiserver's calls to.
#[must_use]
pub fn callers(v: &Value) -> Vec<(Caller, ServiceRef)> {
    let name = owned(v, "/metadata/name").unwrap_or_default();
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind == "APIService" {
        return service(v.pointer("/spec/service"))
            .map(|s| (Caller::ApiService(name), s))
            .into_iter()
            .collect();
    }
    let make: fn(String, String) -> Caller = match kind {
        "ValidatingWebhookConfiguration" => Caller::ValidatingWebhook,
        "MutatingWebhookConfiguration" => Caller::MutatingWebhook,
        _ => return Vec::new(),
    };
    v.get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(WEBHOOKS_MAX)
        .filter_map(|w| {
            let s = service(w.pointer("/clientConfig/service"))?;
            Some((make(name.clone(), owned(w, "/name")?), s))
        })
        .collect()
}

/// [`Routes`] from `kubectl get endpointslices -A -o json`, a List of both
/// webhook configuration kinds, and `kubectl get apiservices -o json` files.
pub fn from_files(
    slices: Option<&Path>,
    webhooks: Option<&Path>,
    apiservices: Option<&Path>,
) -> files::Result<Routes> {
    let mut routes = Routes::default();
    if let Some(p) = slices {
        files::for_each_item(p, "endpointslices", |_, v| {
            routes.slices.push(endpoint_slice(&v));
        })?;
    }
    for (p, what) in [
        (webhooks, "webhookconfigurations"),
        (apiservices, "apiservices"),
    ] {
        if let Some(p) = p {
            files::for_each_item(p, what, |_, v| routes.callers.extend(callers(&v)))?;
        }
    }
    Ok(routes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn slices_and_callers_are_read_from_their_real_shapes() {
        let s = endpoint_slice(&json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "virt-api-x7", "namespace": "kubevirt",
                         "labels": {"kubernetes.io/service-name": "virt-api"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.4.251"], "conditions": {"ready": true},
                           "targetRef": {"kind": "Pod", "namespace": "kubevirt", "name": "virt-api-0"}}]
        }));
        assert_eq!(s.service.map(|s| s.name), Some("virt-api".into()));
        assert_eq!(s.endpoints[0].0.as_deref(), Some("virt-api-0"));
        let c = callers(&json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "virt-api-validator"},
            "webhooks": [{"name": "virtualmachine-validator.kubevirt.io",
                          "clientConfig": {"service": {"namespace": "kubevirt", "name": "virt-api", "path": "/v"}}},
                         {"name": "by-url.example.com", "clientConfig": {"url": "https://example.com"}}]
        }));
        assert_eq!(c.len(), 1);
        let a = callers(
            &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}}}),
        );
        assert_eq!(a[0].0, Caller::ApiService("v1beta1.metrics.k8s.io".into()));
        // kube-proxy programs an endpoint's first address alone: a second one
        // receives nothing through the Service.
        let s = endpoint_slice(&json!({
            "metadata": {"namespace": "t", "labels": {"kubernetes.io/service-name": "web"}},
            "endpoints": [{"addresses": ["10.244.4.12", "10.244.4.251"]}]
        }));
        assert_eq!(
            s.endpoints[0].1,
            ["10.244.4.12".parse::<IpAddr>().expect("ip")]
        );
        // A local APIService has no service.
        assert!(
            callers(&json!({"kind": "APIService", "metadata": {"name": "v1."}, "spec": {}}))
                .is_empty()
        );
    }
}
