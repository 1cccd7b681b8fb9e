//! EndpointSlices, webhook configurations and APIServices as the impact
//! lookups read them: what [`objects::impact`] reads, bounded per object.
//!
//! Anyone who may create EndpointSlices in a namespace sizes them (up to the
//! API's 1,000 endpoints of 100 addresses each); only a slice's Service label,
//! and each endpoint's pod and first address, are read: kube-proxy programs
//! an endpoint's first address alone (`pkg/proxy/endpointslicecache.go`
//! `addEndpoints`: `endpoint.Addresses[0]`; the API's own words: "clients may
//! choose to only use the first element"). Webhook configurations and
//! APIServices keep each webhook's name and Service, nothing else.
//!
//! [`objects::impact`]: crate::kube::objects::impact

use serde::Deserialize;

pub(in crate::kube) use super::event::Meta as Service;
use super::{
    bounded::{Capped, Text},
    event::NAME_MAX,
    shape::Shape,
};
use crate::kube::objects::impact::{ENDPOINTS_MAX, WEBHOOKS_MAX};

/// Longest address text kept (an IPv6 address with a zone is under 64).
const ADDRESS_MAX: usize = 64;

/// A `discovery.k8s.io/v1` EndpointSlice cut to what the converter reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(in crate::kube) struct LeanSlice {
    pub(in crate::kube) metadata: Shape<SliceMeta>,
    pub(in crate::kube) endpoints: Capped<Shape<Endpoint>, ENDPOINTS_MAX>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(in crate::kube) struct SliceMeta {
    pub(in crate::kube) namespace: Option<Text<NAME_MAX>>,
    pub(in crate::kube) labels: Shape<Labels>,
}

/// The one label read: which Service the slice is of.
#[derive(Debug, Default, Deserialize)]
pub(in crate::kube) struct Labels {
    #[serde(rename = "kubernetes.io/service-name")]
    pub(in crate::kube) service_name: Option<Text<NAME_MAX>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(in crate::kube) struct Endpoint {
    /// The first address alone: what kube-proxy programs
    /// (`pkg/proxy/endpointslicecache.go` `addEndpoints` uses `Addresses[0]`;
    /// the API allows 100 and says "clients may choose to only use the first
    /// element"). An address listed after it receives no Service traffic.
    pub(in crate::kube) addresses: Capped<Text<ADDRESS_MAX>, 1>,
    pub(in crate::kube) target_ref: Shape<TargetRef>,
}

#[derive(Debug, Default, Deserialize)]
pub(in crate::kube) struct TargetRef {
    pub(in crate::kube) kind: Option<Text<NAME_MAX>>,
    pub(in crate::kube) name: Option<Text<NAME_MAX>>,
}

/// A Validating- or MutatingWebhookConfiguration, or an APIService, cut to
/// its name and the Services it calls.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(in crate::kube) struct LeanCaller {
    /// In a file's items (a list's leave it out).
    pub(in crate::kube) kind: Option<Text<NAME_MAX>>,
    pub(in crate::kube) metadata: Shape<Named>,
    pub(in crate::kube) webhooks: Capped<Shape<Webhook>, WEBHOOKS_MAX>,
    pub(in crate::kube) spec: Shape<ApiServiceSpec>,
}

#[derive(Debug, Default, Deserialize)]
pub(in crate::kube) struct Named {
    pub(in crate::kube) name: Option<Text<NAME_MAX>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(in crate::kube) struct Webhook {
    pub(in crate::kube) name: Option<Text<NAME_MAX>>,
    pub(in crate::kube) client_config: Shape<Calls>,
}

/// A webhook's `clientConfig`, or an APIService's `spec`: the Service called.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(in crate::kube) struct Calls {
    pub(in crate::kube) service: Shape<Service>,
}

pub(in crate::kube) type ApiServiceSpec = Calls;

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::kube::objects::{
        impact::{callers, endpoint_slice},
        whole::lean,
        whole_impact as whole,
    };

    #[test]
    fn a_slice_converts_the_same_lean_as_whole_with_only_what_is_read_kept() {
        let whole = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "virt-api-x7", "namespace": "kubevirt",
                         "labels": {"kubernetes.io/service-name": "virt-api", "other": "x"},
                         "annotations": {"big": "y".repeat(10_000)}, "managedFields": [{}]},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.4.251", "10.244.4.99"], "conditions": {"ready": true},
                           "nodeName": "n1", "zone": "a",
                           "targetRef": {"kind": "Pod", "namespace": "kubevirt", "name": "virt-api-0", "uid": "u"}},
                          {"addresses": ["10.244.4.12"]}],
            "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}]
        });
        let l: LeanSlice = lean(&whole);
        assert!(!l.endpoints.cut());
        assert_eq!(endpoint_slice(&l), whole::endpoint_slice(&whole));
        // Annotations, ports and the other labels have no field to be kept in.
        let Shape::Map(e) = &l.endpoints.items()[0] else {
            panic!("an endpoint")
        };
        let kept: Vec<_> = e.addresses.items().iter().map(Text::as_str).collect();
        assert_eq!(kept, [Some("10.244.4.251")]);
    }

    #[test]
    fn a_slice_past_the_apis_limits_keeps_what_is_read() {
        let endpoints: Vec<Value> = (0..ENDPOINTS_MAX + 5)
            .map(|i| {
                json!({"addresses": [format!("10.1.{}.{}", i / 256, i % 256)],
                            "targetRef": {"kind": "Pod", "name": format!("p-{i}")}})
            })
            .collect();
        let whole = json!({"metadata": {"namespace": "t", "labels": {"kubernetes.io/service-name": "s"}},
                           "endpoints": endpoints});
        let l: LeanSlice = lean(&whole);
        assert!(l.endpoints.cut());
        assert_eq!(endpoint_slice(&l).endpoints.len(), ENDPOINTS_MAX);
        assert_eq!(endpoint_slice(&l), whole::endpoint_slice(&whole));
    }

    #[test]
    fn callers_convert_the_same_lean_as_whole() {
        let webhooks = json!({
            "metadata": {"name": "virt-api-validator", "labels": {"a": "b"}},
            "webhooks": [{"name": "vm.kubevirt.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "clientConfig": {"service": {"namespace": "kubevirt", "name": "virt-api", "path": "/v", "port": 443},
                                           "caBundle": "Q".repeat(4096)},
                          "rules": [{"operations": ["CREATE"], "apiGroups": ["*"]}]},
                         {"name": "by-url.example.com", "clientConfig": {"url": "https://example.com"}}]
        });
        let api_service = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}, "caBundle": "Q",
                     "group": "metrics.k8s.io", "groupPriorityMinimum": 100}});
        for (kind, v) in [
            ("ValidatingWebhookConfiguration", &webhooks),
            ("MutatingWebhookConfiguration", &webhooks),
            ("APIService", &api_service),
        ] {
            let l: LeanCaller = lean(v);
            let mut whole = v.clone();
            whole["kind"] = kind.into();
            let got = callers(&l, kind);
            assert!(!got.is_empty(), "{kind}");
            assert_eq!(got, whole::callers(&whole), "{kind}");
            // caBundle has no field to be kept in.
        }
    }

    #[test]
    fn wrong_types_read_as_nothing_there() {
        for junk in [
            json!({"metadata": "x", "endpoints": {"a": 1}}),
            json!({"metadata": {"labels": ["x"]}, "endpoints": [5, {"addresses": "x", "targetRef": 3}]}),
            json!({"metadata": {"name": 5}, "webhooks": [{"clientConfig": []}], "spec": 7}),
        ] {
            let s: LeanSlice = lean(&junk);
            assert_eq!(endpoint_slice(&s).service, None, "{junk}");
            let c: LeanCaller = lean(&junk);
            assert!(callers(&c, "APIService").is_empty(), "{junk}");
        }
    }
}
