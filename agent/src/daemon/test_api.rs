//! Tests only: a `kube::Client` whose every request this records (when, in
//! tokio's clock, which a paused test controls) and answers with the object it
//! was sent, so the daemon's tasks run against it with time paused.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::time::Instant;

/// One request: when, method, path, body.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) at: Instant,
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) body: Value,
}

/// The requests so far; clones share them.
#[derive(Clone, Default)]
pub(crate) struct TestApi(Arc<Mutex<Vec<Request>>>);

impl TestApi {
    /// The requests whose method is `method` and path ends with `suffix`.
    pub(crate) fn requests(&self, method: &str, suffix: &str) -> Vec<Request> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|r| r.method == method && r.path.ends_with(suffix))
            .cloned()
            .collect()
    }

    pub(crate) fn client(&self) -> kube::Client {
        let log = self.0.clone();
        let service = tower::service_fn(move |req: axum::http::Request<kube::client::Body>| {
            let log = log.clone();
            async move {
                let method = req.method().to_string();
                let path = req.uri().path().to_owned();
                let bytes = req.into_body().collect_bytes().await?;
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                log.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Request {
                        at: Instant::now(),
                        method,
                        path: path.clone(),
                        body: body.clone(),
                    });
                // The object as sent, with the metadata a reader of the answer wants.
                let mut out = if body.is_object() { body } else { json!({}) };
                if path.contains("/nodes/") {
                    out["apiVersion"] = json!("v1");
                    out["kind"] = json!("Node");
                }
                out["metadata"]["name"] = json!("answered");
                out["metadata"]["namespace"] = json!("default");
                out["metadata"]["resourceVersion"] = json!("1");
                let response = axum::http::Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(out.to_string().into_bytes()))?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        kube::Client::new(service, "default")
    }
}
