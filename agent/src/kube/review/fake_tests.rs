//! Tests only: the API server's two review endpoints answered in memory behind
//! a real `kube::Client`, so reviews cost no I/O and tokio's paused clock can
//! cross the caches' TTLs in no time. It answers by the integration tests' own
//! rules (`tests/src/reviews.rs`, included here: one set of rules, as the
//! registry answers) and counts what it is asked.

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

/// The test API server's review rules, shared with the integration tests.
#[path = "../../../../tests/src/reviews.rs"]
#[allow(
    unreachable_pub,
    reason = "public in the test API server's crate, whose file this is"
)]
mod rules;

/// The API server's own audience, what a TokenReview without one asks for.
pub(crate) use rules::API_SERVER_AUDIENCE as API_SERVER;

/// What the fake API server knows and what it was asked.
#[derive(Debug, Default)]
pub(crate) struct Api {
    /// Who authenticates, for which audiences, and what they may `get`.
    pub(crate) rules: rules::Reviews,
    /// The tokens of the TokenReviews asked, in order (failed ones too).
    pub(crate) token_reviews: Vec<String>,
    /// SubjectAccessReviews asked (failed ones too).
    pub(crate) access_reviews: usize,
    /// While set, every request is answered 500.
    pub(crate) failing: bool,
    /// The spec.audiences of the last TokenReview.
    pub(crate) asked_audiences: Option<Value>,
}

/// A shared [`Api`] and a client that talks to it.
#[derive(Clone, Debug, Default)]
pub(crate) struct FakeApi(Arc<Mutex<Api>>);

impl FakeApi {
    /// `token`, issued for the API server's audience, belongs to `user`, who
    /// may `get` anything if `granted`.
    pub(crate) fn user(&self, token: &str, user: &str, granted: bool) {
        self.user_for(token, user, granted, &[API_SERVER]);
    }

    /// `token`, issued for `audiences`, belongs to `user`.
    pub(crate) fn user_for(&self, token: &str, user: &str, granted: bool, audiences: &[&str]) {
        let mut api = self.lock();
        api.rules
            .token_for(token, user, &["system:authenticated"], audiences);
        if granted {
            api.rules.grant(user, "*", "get");
        }
    }

    /// `token` no longer authenticates (its ServiceAccount was deleted).
    pub(crate) fn revoke(&self, token: &str) {
        self.lock().rules.revoke(token);
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Api> {
        crate::inventory::lock(&self.0)
    }

    /// TokenReviews asked for `token`.
    pub(crate) fn reviews_of(&self, token: &str) -> usize {
        self.lock()
            .token_reviews
            .iter()
            .filter(|t| *t == token)
            .count()
    }

    /// A client whose every request this fake answers.
    pub(crate) fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |req: axum::http::Request<kube::client::Body>| {
            let api = api.clone();
            async move {
                let path = req.uri().path().to_owned();
                let body = req.into_body().collect_bytes().await?;
                let (code, out) = api.answer(&path, &body);
                let response = axum::http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(out.to_string().into_bytes()))?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(response)
            }
        });
        kube::Client::new(service, "default")
    }

    fn answer(&self, path: &str, body: &[u8]) -> (u16, Value) {
        let mut api = self.lock();
        let asked: Value = serde_json::from_slice(body).unwrap_or_default();
        if path.ends_with("/tokenreviews") {
            let token = asked["spec"]["token"].as_str().unwrap_or_default();
            api.token_reviews.push(token.to_owned());
        } else {
            api.access_reviews += 1;
        }
        if api.failing {
            let message = "etcdserver: request timed out (an internal detail)";
            return (
                500,
                json!({"kind": "Status", "code": 500, "message": message}),
            );
        }
        if path.ends_with("/tokenreviews") {
            api.asked_audiences = Some(asked["spec"]["audiences"].clone());
        }
        api.rules
            .answer(path, body)
            .unwrap_or_else(|| (404, json!({"kind": "Status", "code": 404})))
    }
}
