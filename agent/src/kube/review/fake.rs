//! Tests only: the API server's two review endpoints answered in memory behind
//! a real `kube::Client`, so reviews cost no I/O and tokio's paused clock can
//! cross the caches' TTLs in no time. It answers as the registry does (the
//! integration tests' stand-in, `tests/src/reviews.rs`, has the same rules)
//! and counts what it is asked.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard},
};

use serde_json::{Value, json};

/// The API server's own audience, what a TokenReview without one asks for.
pub(crate) const API_SERVER: &str = "https://kubernetes.default.svc";

/// What the fake API server knows and what it was asked.
#[derive(Debug, Default)]
pub(crate) struct Api {
    /// token → (username, the audiences it was issued for).
    tokens: BTreeMap<String, (String, Vec<String>)>,
    /// Users who may `get` every path.
    granted: BTreeSet<String>,
    /// The tokens of the TokenReviews asked, in order (failed ones too).
    pub(crate) token_reviews: Vec<String>,
    /// SubjectAccessReviews asked (failed ones too).
    pub(crate) access_reviews: usize,
    /// While set, every request is answered 500.
    pub(crate) failing: bool,
    /// While set, spec.audiences is ignored and status.audiences left out (an
    /// authenticator that is not audience-aware).
    pub(crate) audience_blind: bool,
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
        let audiences = audiences.iter().map(|a| (*a).to_owned()).collect();
        api.tokens
            .insert(token.to_owned(), (user.to_owned(), audiences));
        if granted {
            api.granted.insert(user.to_owned());
        }
    }

    /// `token` no longer authenticates (its ServiceAccount was deleted).
    pub(crate) fn revoke(&self, token: &str) {
        self.lock().tokens.remove(token);
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
            api.asked_audiences = Some(obj["spec"]["audiences"].clone());
            let want: Vec<String> = match obj["spec"]["audiences"].as_array() {
                Some(a) => a
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect(),
                None => vec![API_SERVER.to_owned()],
            };
            match api.tokens.get(&token) {
                Some((user, _)) if api.audience_blind => json!({
                    "authenticated": true,
                    "user": {"username": user, "groups": ["system:authenticated"]},
                }),
                Some((user, issued)) => {
                    let both: Vec<&String> = issued.iter().filter(|a| want.contains(a)).collect();
                    if both.is_empty() {
                        let why = format!(
                            "token audiences {issued:?} is invalid for the target audiences {want:?}"
                        );
                        json!({"user": {}, "error": why})
                    } else {
                        json!({
                            "authenticated": true,
                            "user": {"username": user, "groups": ["system:authenticated"]},
                            "audiences": both,
                        })
                    }
                }
                None => json!({"user": {}, "error": "invalid bearer token"}),
            }
        } else {
            let user = obj["spec"]["user"].as_str().unwrap_or_default();
            json!({"allowed": api.granted.contains(user)})
        };
        (201, obj)
    }
}
