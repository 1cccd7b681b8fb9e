//! Tests only: the API server's two review endpoints answered in memory behind
//! a real `kube::Client`, so reviews cost no I/O and tokio's paused clock can
//! cross the caches' TTLs in no time. It answers as the registry does (the
//! integration tests' stand-in, `tests/src/reviews.rs`, has the same rules)
//! and counts what it is asked.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use serde_json::{Value, json};

/// What the fake API server knows and what it was asked.
#[derive(Debug, Default)]
pub(crate) struct Api {
    /// token → username.
    tokens: BTreeMap<String, String>,
    /// Users who may `get` every path.
    granted: BTreeSet<String>,
    /// The tokens of the TokenReviews asked, in order (failed ones too).
    pub(crate) token_reviews: Vec<String>,
    /// SubjectAccessReviews asked (failed ones too).
    pub(crate) access_reviews: usize,
    /// While set, every request is answered 500.
    pub(crate) failing: bool,
}

/// A shared [`Api`] and a client that talks to it.
#[derive(Clone, Debug, Default)]
pub(crate) struct FakeApi(Arc<Mutex<Api>>);

impl FakeApi {
    /// `token` belongs to `user`, who may `get` anything if `granted`.
    pub(crate) fn user(&self, token: &str, user: &str, granted: bool) {
        let mut api = self.lock();
        api.tokens.insert(token.to_owned(), user.to_owned());
        if granted {
            api.granted.insert(user.to_owned());
        }
    }

    /// `token` no longer authenticates (its ServiceAccount was deleted).
    pub(crate) fn revoke(&self, token: &str) {
        self.lock().tokens.remove(token);
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Api> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
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
        let Ok(mut obj) = serde_json::from_slice::<Value>(body) else {
            return (400, json!({"kind": "Status", "code": 400}));
        };
        let token_review = path.ends_with("/tokenreviews");
        let token = obj["spec"]["token"].as_str().unwrap_or_default().to_owned();
        if token_review {
            api.token_reviews.push(token.clone());
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
        obj["status"] = if token_review {
            match api.tokens.get(&token) {
                Some(user) => json!({
                    "authenticated": true,
                    "user": {"username": user, "groups": ["system:authenticated"]},
                    "audiences": ["https://kubernetes.default.svc"],
                }),
                None => json!({"user": {}, "error": "invalid bearer token"}),
            }
        } else {
            let user = obj["spec"]["user"].as_str().unwrap_or_default();
            json!({"allowed": api.granted.contains(user)})
        };
        (201, obj)
    }
}
