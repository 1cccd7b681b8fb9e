//! EndpointSlices, admission webhook configurations and APIServices as
//! [`Routes`]: only which Service holds which pod, and who calls which Service.

use std::{net::IpAddr, path::PathBuf};

use crate::{
    inventory::text::cleaned,
    inventory::{Caller, EndpointSlice, Routes, ServiceRef},
    kube::{
        cluster::lean::{LeanCaller, LeanSlice, Service, Shape, Text},
        files,
    },
};

/// Endpoints read of one slice at most (the API allows 1,000).
pub(crate) const ENDPOINTS_MAX: usize = 1_000;
/// Webhooks read of one configuration at most.
pub(crate) const WEBHOOKS_MAX: usize = 256;

/// A string field's text, if it is a non-empty string.
fn text<const N: usize>(t: Option<&Text<N>>) -> Option<&str> {
    t.and_then(Text::as_str).filter(|s| !s.is_empty())
}

/// [`text`], made safe to show (names go into notes and tables).
fn owned<const N: usize>(t: Option<&Text<N>>) -> Option<String> {
    text(t).map(cleaned)
}

fn service(s: &Shape<Service>) -> Option<ServiceRef> {
    let s = s.as_map()?;
    Some(ServiceRef {
        namespace: owned(s.namespace.as_ref())?,
        name: owned(s.name.as_ref())?,
    })
}

/// A `discovery.k8s.io/v1` EndpointSlice.
#[must_use]
pub(in crate::kube) fn endpoint_slice(v: &LeanSlice) -> EndpointSlice {
    let service = v.metadata.as_map().and_then(|m| {
        Some(ServiceRef {
            namespace: owned(m.namespace.as_ref())?,
            name: owned(m.labels.as_map()?.service_name.as_ref())?,
        })
    });
    let endpoints = (v.endpoints.items().iter())
        .map(|e| {
            let Some(e) = e.as_map() else {
                return (None, Vec::new());
            };
            let pod = (e.target_ref.as_map())
                .filter(|t| text(t.kind.as_ref()) == Some("Pod"))
                .and_then(|t| owned(t.name.as_ref()));
            let addresses: Vec<IpAddr> = (e.addresses.items().iter())
                .filter_map(|a| crate::inventory::ip_text::parse_ip(a.as_str()?))
                .collect();
            (pod, addresses)
        })
        .collect();
    EndpointSlice { service, endpoints }
}

/// The Services a Validating- or MutatingWebhookConfiguration, or an
/// APIService (`kind`), sends the kube-apiserver's calls to.
#[must_use]
pub(in crate::kube) fn callers(v: &LeanCaller, kind: &str) -> Vec<(Caller, ServiceRef)> {
    let name = v.metadata.as_map().and_then(|m| owned(m.name.as_ref()));
    let name = name.unwrap_or_default();
    if kind == "APIService" {
        let s = v.spec.as_map().and_then(|spec| service(&spec.service));
        return s
            .map(|s| (Caller::ApiService(name), s))
            .into_iter()
            .collect();
    }
    let make: fn(String, String) -> Caller = match kind {
        "ValidatingWebhookConfiguration" => Caller::ValidatingWebhook,
        "MutatingWebhookConfiguration" => Caller::MutatingWebhook,
        _ => return Vec::new(),
    };
    (v.webhooks.items().iter())
        .filter_map(|w| {
            let w = w.as_map()?;
            let s = service(&w.client_config.as_map()?.service)?;
            Some((make(name.clone(), owned(w.name.as_ref())?), s))
        })
        .collect()
}

/// [`Routes`] from `kubectl get endpointslices -A -o json`, a List of both
/// webhook configuration kinds, and `kubectl get apiservices -o json` files.
pub fn from_files([slices, webhooks, apiservices]: &[Option<PathBuf>; 3]) -> files::Result<Routes> {
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
            files::for_each_item(p, what, |_, v: LeanCaller| {
                let kind = v.kind.as_ref().and_then(Text::as_str);
                routes.callers.extend(callers(&v, kind.unwrap_or_default()));
            })?;
        }
    }
    Ok(routes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kube::objects::whole::lean;

    fn slice(v: &serde_json::Value) -> EndpointSlice {
        endpoint_slice(&lean(v))
    }

    /// The callers of an object whose `kind` is in it, as a file has it.
    fn called(v: &serde_json::Value) -> Vec<(Caller, ServiceRef)> {
        let c: LeanCaller = lean(v);
        callers(
            &c,
            c.kind.as_ref().and_then(Text::as_str).unwrap_or_default(),
        )
    }

    #[test]
    fn slices_and_callers_are_read_from_their_real_shapes() {
        let s = slice(&json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "virt-api-x7", "namespace": "kubevirt",
                         "labels": {"kubernetes.io/service-name": "virt-api"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.4.251"], "conditions": {"ready": true},
                           "targetRef": {"kind": "Pod", "namespace": "kubevirt", "name": "virt-api-0"}}]
        }));
        assert_eq!(s.service.map(|s| s.name), Some("virt-api".into()));
        assert_eq!(s.endpoints[0].0.as_deref(), Some("virt-api-0"));
        let c = called(&json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "virt-api-validator"},
            "webhooks": [{"name": "virtualmachine-validator.kubevirt.io",
                          "clientConfig": {"service": {"namespace": "kubevirt", "name": "virt-api", "path": "/v"}}},
                         {"name": "by-url.example.com", "clientConfig": {"url": "https://example.com"}}]
        }));
        assert_eq!(c.len(), 1);
        let a = called(
            &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}}}),
        );
        assert_eq!(a[0].0, Caller::ApiService("v1beta1.metrics.k8s.io".into()));
        // kube-proxy programs an endpoint's first address alone: a second one
        // receives nothing through the Service.
        let s = slice(&json!({
            "metadata": {"namespace": "t", "labels": {"kubernetes.io/service-name": "web"}},
            "endpoints": [{"addresses": ["10.244.4.12", "10.244.4.251"]}]
        }));
        assert_eq!(
            s.endpoints[0].1,
            ["10.244.4.12".parse::<IpAddr>().expect("ip")]
        );
        // A local APIService has no service.
        assert!(
            called(&json!({"kind": "APIService", "metadata": {"name": "v1."}, "spec": {}}))
                .is_empty()
        );
    }
}
