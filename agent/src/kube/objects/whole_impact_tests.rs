//! The impact readers as they read whole objects as JSON, before the lean
//! structs: the reference the lean readers are checked against.

use serde_json::Value;

use crate::inventory::{Caller, EndpointSlice, ServiceRef, text::cleaned};
use std::net::IpAddr;

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
pub(crate) fn endpoint_slice(v: &Value) -> EndpointSlice {
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
        .take(crate::kube::objects::impact::ENDPOINTS_MAX)
        .map(|e| {
            let pod = (text(e, "/targetRef/kind") == Some("Pod"))
                .then(|| owned(e, "/targetRef/name"))
                .flatten();
            let addresses: Vec<IpAddr> = e
                .get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .take(1)
                .filter_map(|a| crate::inventory::ip_text::parse_ip(a.as_str()?))
                .collect();
            (pod, addresses)
        })
        .collect();
    EndpointSlice { service, endpoints }
}

/// The Services a Validating- or MutatingWebhookConfiguration, or an
/// APIService, sends the kube-apiserver's calls to.
pub(crate) fn callers(v: &Value) -> Vec<(Caller, ServiceRef)> {
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
        .take(crate::kube::objects::impact::WEBHOOKS_MAX)
        .filter_map(|w| {
            let s = service(w.pointer("/clientConfig/service"))?;
            Some((make(name.clone(), owned(w, "/name")?), s))
        })
        .collect()
}
