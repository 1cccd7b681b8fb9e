//! What routes to a pod, for the impact of a finding: the Services whose
//! EndpointSlices hold it, and the admission webhooks and aggregated APIs the
//! kube-apiserver calls through those Services.

use std::net::IpAddr;

/// A Service by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceRef {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

/// One EndpointSlice as impact needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointSlice {
    /// Its Service (label `kubernetes.io/service-name`); slices without one are skipped.
    pub service: Option<ServiceRef>,
    /// Its endpoints: the pod's name (`targetRef`) and addresses.
    pub endpoints: Vec<(Option<String>, Vec<IpAddr>)>,
}

/// Who the kube-apiserver calls through a Service.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Caller {
    /// A webhook of a ValidatingWebhookConfiguration: (configuration, webhook).
    ValidatingWebhook(String, String),
    /// A webhook of a MutatingWebhookConfiguration: (configuration, webhook).
    MutatingWebhook(String, String),
    /// An APIService (an aggregated API).
    ApiService(String),
}

/// Everything impact reads: EndpointSlices and the kube-apiserver's callers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    /// EndpointSlices of the namespaces concerned.
    pub slices: Vec<EndpointSlice>,
    /// Webhooks and APIServices with the Service each calls.
    pub callers: Vec<(Caller, ServiceRef)>,
}
