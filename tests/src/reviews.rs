//! The test API server's TokenReview and SubjectAccessReview, as
//! `pkg/registry/authentication/tokenreview` and
//! `pkg/registry/authorization/subjectaccessreview` answer them: 201 with the
//! object and its status; 400 for a TokenReview without a token; 422 for a
//! SubjectAccessReview without a user or group, or without exactly one of
//! resource and non-resource attributes. RBAC for non-resource URLs: exact
//! paths, or a prefix ending in `*`.
//!
//! Audiences as the real API server has them: a token is issued for some
//! (a projected ServiceAccount token's `audience`; by default the API server's
//! own, [`API_SERVER_AUDIENCE`]); a TokenReview asks for `spec.audiences`, or
//! for the API server's own when it names none, and authenticates the token
//! only when the two meet, answering the ones they share in
//! `status.audiences`.
//!
//! Shared: the agent's unit tests answer reviews by these same rules
//! (`agent/src/kube/review/fake_tests.rs` includes this file).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// The API server's own audience (`--api-audiences`, by default its issuer).
pub const API_SERVER_AUDIENCE: &str = "https://kubernetes.default.svc";

/// A token's user, groups and the audiences it was issued for.
type Holder = (String, Vec<String>, Vec<String>);

/// Who the server's authenticator and authorizer know.
#[derive(Clone, Debug, Default)]
pub struct Reviews {
    /// token → its holder.
    tokens: BTreeMap<String, Holder>,
    /// (user or group, nonResourceURL, verb).
    grants: BTreeSet<(String, String, String)>,
    /// An authenticator that is not audience-aware: `spec.audiences` is
    /// ignored, `status.audiences` left out.
    pub audience_blind: bool,
}

impl Reviews {
    /// `token` authenticates as `user` in `groups`, for the API server's audience.
    pub fn token(&mut self, token: &str, user: &str, groups: &[&str]) {
        self.token_for(token, user, groups, &[API_SERVER_AUDIENCE]);
    }

    /// `token` authenticates as `user` in `groups`, for `audiences` only.
    pub fn token_for(&mut self, token: &str, user: &str, groups: &[&str], audiences: &[&str]) {
        let owned = |l: &[&str]| l.iter().map(|g| (*g).to_owned()).collect();
        self.tokens.insert(
            token.to_owned(),
            (user.to_owned(), owned(groups), owned(audiences)),
        );
    }

    /// `token` no longer authenticates (its ServiceAccount was deleted).
    pub fn revoke(&mut self, token: &str) {
        self.tokens.remove(token);
    }

    /// `subject` (a user or a group) may `verb` the non-resource URL `url`.
    pub fn grant(&mut self, subject: &str, url: &str, verb: &str) {
        self.grants
            .insert((subject.to_owned(), url.to_owned(), verb.to_owned()));
    }

    /// The answer to `POST …/tokenreviews` or `…/subjectaccessreviews`, if `path` is one.
    pub fn answer(&self, path: &str, body: &[u8]) -> Option<(u16, Value)> {
        let review = match path.trim_end_matches('/') {
            "/apis/authentication.k8s.io/v1/tokenreviews" => Self::token_review,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews" => Self::access_review,
            _ => return None,
        };
        let Ok(obj) = serde_json::from_slice::<Value>(body) else {
            return Some((400, failure(400, "BadRequest", "the body is not JSON")));
        };
        Some(review(self, obj))
    }

    fn token_review(&self, mut obj: Value) -> (u16, Value) {
        let token = obj["spec"]["token"].as_str().unwrap_or("").to_owned();
        if token.is_empty() {
            return (
                400,
                failure(
                    400,
                    "BadRequest",
                    "token is required for TokenReview in authentication",
                ),
            );
        }
        let want: Vec<String> = match obj["spec"]["audiences"].as_array() {
            Some(list) if !list.is_empty() => list
                .iter()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect(),
            _ => vec![API_SERVER_AUDIENCE.to_owned()],
        };
        obj["status"] = match self.tokens.get(&token) {
            Some((user, groups, _)) if self.audience_blind => json!({
                "authenticated": true,
                "user": {"username": user, "uid": format!("uid-{user}"), "groups": groups},
            }),
            Some((user, groups, issued)) => {
                let shared: Vec<&String> = want.iter().filter(|a| issued.contains(a)).collect();
                if shared.is_empty() {
                    json!({"user": {}, "error": format!(
                        "[invalid bearer token, token audiences {issued:?} is invalid for the \
                         target audiences {want:?}]"
                    )})
                } else {
                    json!({
                        "authenticated": true,
                        "user": {"username": user, "uid": format!("uid-{user}"), "groups": groups},
                        "audiences": shared,
                    })
                }
            }
            None => json!({"user": {}, "error": "invalid bearer token"}),
        };
        (201, created(obj))
    }

    fn access_review(&self, mut obj: Value) -> (u16, Value) {
        let spec = &obj["spec"];
        let user = spec["user"].as_str().unwrap_or("");
        let groups: Vec<&str> = spec["groups"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if user.is_empty() && groups.is_empty() {
            return (
                422,
                invalid(
                    "spec.user",
                    "at least one of user or group must be specified",
                ),
            );
        }
        let non_resource = &spec["nonResourceAttributes"];
        if non_resource.is_null() == spec["resourceAttributes"].is_null() {
            return (
                422,
                invalid(
                    "spec.resourceAttributes",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                ),
            );
        }
        let (path, verb) = (
            non_resource["path"].as_str().unwrap_or(""),
            non_resource["verb"].as_str().unwrap_or(""),
        );
        let allowed = std::iter::once(user).chain(groups).any(|subject| {
            self.grants.iter().any(|(s, url, v)| {
                s == subject
                    && (v == verb || v == "*")
                    && url
                        .strip_suffix('*')
                        .map_or(url == path, |prefix| path.starts_with(prefix))
            })
        });
        obj["status"] = if allowed {
            json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding"})
        } else {
            json!({"allowed": false})
        };
        (201, created(obj))
    }
}

fn created(mut obj: Value) -> Value {
    obj["metadata"] = json!({"creationTimestamp": null});
    obj
}

fn failure(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn invalid(field: &str, message: &str) -> Value {
    let mut s = failure(
        422,
        "Invalid",
        &format!("{field}: Invalid value: {message}"),
    );
    s["details"] =
        json!({"causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]});
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_answer_as_the_real_registry_does() {
        let mut r = Reviews::default();
        r.token(
            "t1",
            "system:serviceaccount:monitoring:prometheus",
            &["system:serviceaccounts"],
        );
        r.grant("system:serviceaccounts", "/metrics", "get");
        r.token_for("scoped", "prometheus", &[], &["ipshadow", "other"]);
        let tr_for = |t: &str, audiences: Value| {
            r.answer(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"spec": {"token": t, "audiences": audiences}})
                    .to_string()
                    .as_bytes(),
            )
            .expect("tokenreviews")
        };
        let tr = |t: &str| tr_for(t, Value::Null);
        let (code, ok) = tr("t1");
        assert_eq!(code, 201);
        assert_eq!(ok["status"]["authenticated"], true);
        assert_eq!(ok["status"]["audiences"], json!([API_SERVER_AUDIENCE]));
        assert_eq!(tr("nope").1["status"]["error"], "invalid bearer token");
        assert_eq!(tr("").0, 400);
        // A token for other audiences than the API server's: only where asked for.
        let refused = tr("scoped").1;
        assert_ne!(refused["status"]["authenticated"], true);
        assert!(
            refused["status"]["error"]
                .as_str()
                .expect("an error message")
                .contains("audiences")
        );
        let ok = tr_for("scoped", json!(["ipshadow", "x"])).1;
        assert_eq!(ok["status"]["authenticated"], true);
        assert_eq!(ok["status"]["audiences"], json!(["ipshadow"]));
        assert_ne!(
            tr_for("t1", json!(["ipshadow"])).1["status"]["authenticated"],
            true
        );
        let sar = |spec: Value| {
            r.answer(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                json!({ "spec": spec }).to_string().as_bytes(),
            )
            .expect("subjectaccessreviews")
        };
        let attrs = |p: &str| json!({"path": p, "verb": "get"});
        let (code, yes) = sar(
            json!({"user": "u", "groups": ["system:serviceaccounts"], "nonResourceAttributes": attrs("/metrics")}),
        );
        assert_eq!((code, yes["status"]["allowed"].clone()), (201, json!(true)));
        let no = sar(json!({"user": "u", "nonResourceAttributes": attrs("/metrics")})).1;
        assert_eq!(no["status"]["allowed"], false);
        assert_eq!(
            sar(json!({"nonResourceAttributes": attrs("/metrics")})).0,
            422
        );
        assert_eq!(sar(json!({"user": "u"})).0, 422);
    }
}
