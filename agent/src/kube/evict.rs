//! Evicts a pod through the Eviction API (which keeps PodDisruptionBudgets),
//! only the pod with the uid the finding named, and records what was done as
//! an Event on the pod.

use k8s_openapi::{api::core::v1::ObjectReference, apimachinery::pkg::apis::meta::v1::Status};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::detect::PodRef;

/// What the Eviction API answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// The pod is being deleted; its controller makes a new one.
    Evicted,
    /// A PodDisruptionBudget allows no disruption now (429).
    Blocked(String),
    /// The pod, or that uid of it, is gone already (404, 409).
    Gone,
    /// Anything else.
    Failed(String),
}

impl Eviction {
    /// The metric label.
    #[must_use]
    pub fn result(&self) -> &'static str {
        match self {
            Self::Evicted => "evicted",
            Self::Blocked(_) => "blocked",
            Self::Gone => "gone",
            Self::Failed(_) => "failed",
        }
    }
}

/// Asks the Eviction API to evict `pod` (precondition: its uid). `client`
/// should not retry 429 itself: a PodDisruptionBudget's refusal waits for
/// the remediation interval, not for a client backoff.
pub async fn evict(client: &kube::Client, pod: &PodRef) -> Eviction {
    let body = serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
        "deleteOptions": {"preconditions": {"uid": pod.uid}},
    });
    let request = axum::http::Request::post(format!(
        "/api/v1/namespaces/{}/pods/{}/eviction",
        pod.namespace, pod.name
    ))
    .header(axum::http::header::CONTENT_TYPE, "application/json")
    .body(body.to_string().into_bytes());
    let request = match request {
        Ok(r) => r,
        Err(e) => return Eviction::Failed(e.to_string()),
    };
    match client.request::<Status>(request).await {
        Ok(_) => Eviction::Evicted,
        Err(kube::Error::Api(s)) if s.code == 429 => Eviction::Blocked(s.message),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Eviction::Gone,
        Err(e) => Eviction::Failed(e.to_string()),
    }
}

/// Records an action on `pod` as an Event (`Normal`: remediation is an
/// operator's choice, not a new problem).
pub async fn record(
    client: &kube::Client,
    node: &str,
    pod: &PodRef,
    (reason, text): (&str, String),
) -> Result<(), kube::Error> {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: crate::report::events::REPORTING_CONTROLLER.into(),
            instance: Some(node.to_owned()),
        },
    );
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(text),
        action: "Remediate".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await
}
