//! Who may scrape: a bearer token checked by the API server (TokenReview), then
//! the user's right to `get` the path (SubjectAccessReview on a non-resource
//! URL), as kubelet and kube-rbac-proxy check theirs.
//!
//! Every node's agent is scraped by every Prometheus replica every 30 s or so:
//! one review per scrape would be thousands a second at 5,000 nodes. Answers are
//! cached with kubelet's default webhook TTLs (authentication 2 min; allowed
//! 5 min, denied 30 s), keyed by the token's SHA-256 (no token is kept), and
//! reviews of what the cache does not know are rate-limited per peer and per
//! agent ([`limits`]), so whoever reaches the port with made-up tokens can
//! neither turn the agents against the API server nor spend the reviews of
//! another client.
//!
//! An answer that let a scrape through is not dropped when its TTL ends: it is
//! served for up to as long again while one re-review runs in the background,
//! on a budget of its own, and replaced by what that review says (a revoked
//! token is refused from then on). So a Prometheus scraping all along never
//! waits for a review once it has had one, and never meets a spent budget.

use std::{net::IpAddr, sync::Arc, sync::Mutex, time::Duration};

use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec, UserInfo},
    authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
};
use kube::{Api, api::PostParams};

pub mod limits;

use super::ttl::Cache;
use crate::inventory::lock;
pub use limits::Limit;
use limits::Limits;
// Tokio's clock, so that tests can pause it and cross a TTL in no time.
use tokio::time::Instant;

/// How long an authenticated token is trusted without asking again.
pub const AUTHENTICATED_TTL: Duration = Duration::from_mins(2);
/// How long a rejected token is rejected without asking again.
pub const UNAUTHENTICATED_TTL: Duration = Duration::from_secs(30);
/// How long an allowed (user, path) stays allowed.
pub const ALLOWED_TTL: Duration = Duration::from_mins(5);
/// How long a denied (user, path) stays denied.
pub const DENIED_TTL: Duration = Duration::from_secs(30);
/// Answers kept per cache; beyond, the one nearest expiry goes.
pub const CACHE_ENTRIES: usize = 256;
/// How long one review may take before the scrape is answered "unavailable".
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);

/// What a request gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Served.
    Allowed {
        /// Who asked.
        user: String,
    },
    /// No token, or one the API server does not know.
    Unauthenticated(String),
    /// A known user without `get` on the path.
    Forbidden {
        /// Who asked.
        user: String,
    },
    /// The API server could not be asked.
    Unavailable(String),
    /// Too many reviews just now, by the peer's budget or the agent's.
    Throttled(Limit),
}

impl Verdict {
    /// The metric label and log word.
    #[must_use]
    pub fn result(&self) -> &'static str {
        match self {
            Self::Allowed { .. } => "allowed",
            Self::Unauthenticated(_) => "unauthenticated",
            Self::Forbidden { .. } => "forbidden",
            Self::Unavailable(_) => "unavailable",
            Self::Throttled(_) => "throttled",
        }
    }
}

/// The user a token belongs to, as the SubjectAccessReview needs it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct User {
    name: String,
    uid: Option<String>,
    groups: Vec<String>,
    extra: Vec<(String, Vec<String>)>,
}

/// A token's SHA-256: the cache's key, so that no token is kept.
type TokenKey = [u8; 32];
/// (user, path, verb): what a SubjectAccessReview answers.
type Access = (User, String, &'static str);

/// Checks scrapes with the API server; cheap to share.
pub struct Reviewer {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    /// What TokenReviews ask for; none: the API server's own.
    audiences: Vec<String>,
    /// Token hash → the user, or why not.
    authn: Mutex<Cache<TokenKey, Result<User, String>>>,
    /// (user, path, verb) → allowed.
    authz: Mutex<Cache<Access, bool>>,
    limits: Limits,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer").finish_non_exhaustive()
    }
}

impl Reviewer {
    /// Reviews through `client` (which needs `create` on tokenreviews and
    /// subjectaccessreviews: `system:auth-delegator`'s two rules), accepting
    /// tokens issued for one of `audiences` (none: the API server's own).
    #[must_use]
    pub fn new(client: kube::Client, audiences: Vec<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                audiences,
                authn: Mutex::new(Cache::new(CACHE_ENTRIES)),
                authz: Mutex::new(Cache::new(CACHE_ENTRIES)),
                limits: Limits::new(),
            }),
        }
    }

    /// May the bearer of `token`, connected from `peer`, `verb` `path`? A
    /// review the caches cannot spare is charged to `peer`'s budget.
    pub async fn check(
        &self,
        token: &str,
        path: &str,
        verb: &'static str,
        peer: IpAddr,
    ) -> Verdict {
        let inner = &self.inner;
        let key: TokenKey = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        let token = token.to_owned();
        let ask = move |me: Arc<Inner>| async move { me.authenticate(&token).await };
        let user = match AUTHN.answer(inner, peer, key, ask).await {
            Ok(Ok(u)) => u,
            Ok(Err(why)) => return Verdict::Unauthenticated(why),
            Err(verdict) => return verdict,
        };
        let access = (user, path.to_owned(), verb);
        let user = access.0.name.clone();
        let asked = access.clone();
        let ask = move |me: Arc<Inner>| async move { me.authorize(&asked).await };
        match AUTHZ.answer(inner, peer, access, ask).await {
            Ok(true) => Verdict::Allowed { user },
            Ok(false) => Verdict::Forbidden { user },
            Err(verdict) => verdict,
        }
    }
}

/// How the answers of one kind of review are kept.
struct Kind<K, V> {
    /// What a served answer is called in the log.
    what: &'static str,
    cache: fn(&Inner) -> &Mutex<Cache<K, V>>,
    /// How long an answer is kept, and whether it lets the scrape through.
    ttl: fn(&V) -> (Duration, bool),
    /// Logs an answer if a re-review took back what was served.
    taken_back: fn(&K, &V),
}

static AUTHN: Kind<TokenKey, Result<User, String>> = Kind {
    what: "token",
    cache: |inner| &inner.authn,
    ttl: |answer| match answer {
        Ok(_) => (AUTHENTICATED_TTL, true),
        Err(_) => (UNAUTHENTICATED_TTL, false),
    },
    taken_back: |_, answer| {
        if let Err(why) = answer {
            tracing::info!(%why, "a token served from the cache is no longer valid");
        }
    },
};

static AUTHZ: Kind<Access, bool> = Kind {
    what: "grant",
    cache: |inner| &inner.authz,
    ttl: |&allowed| (if allowed { ALLOWED_TTL } else { DENIED_TTL }, allowed),
    taken_back: |(user, path, _), &allowed| {
        if !allowed {
            tracing::info!(user = %user.name, path = %path, "a grant served from the cache was withdrawn");
        }
    },
};

impl<K: std::hash::Hash + Eq + Clone + Send + 'static, V: Clone + Send + 'static> Kind<K, V> {
    /// `k`'s answer: the cached one (re-reviewed by `ask` in the background
    /// when due), else `ask`'s now, on `peer`'s budget; `Err` the verdict
    /// when there is none.
    async fn answer<F>(
        &'static self,
        inner: &Arc<Inner>,
        peer: IpAddr,
        k: K,
        ask: impl FnOnce(Arc<Inner>) -> F + Send + 'static,
    ) -> Result<V, Verdict>
    where
        F: Future<Output = Result<V, String>> + Send + 'static,
    {
        let now = Instant::now();
        let cached = lock((self.cache)(inner)).get(&k, now, || inner.limits.revalidate());
        if let Some((known, revalidate)) = cached {
            if revalidate {
                tokio::spawn(self.rereview(Arc::clone(inner), k, ask));
            }
            return Ok(known);
        }
        inner.limits.admit(peer).map_err(Verdict::Throttled)?;
        let answer = ask(Arc::clone(inner)).await.map_err(Verdict::Unavailable)?;
        self.remember(inner, k, answer.clone());
        Ok(answer)
    }

    fn remember(&self, inner: &Inner, k: K, answer: V) {
        let (ttl, valid) = (self.ttl)(&answer);
        lock((self.cache)(inner)).put(k, answer, ttl, valid, Instant::now());
    }

    /// Reviews a served answer again in the background (holding a token only
    /// for that review); what the API server says replaces the answer.
    async fn rereview<F>(&self, inner: Arc<Inner>, k: K, ask: impl FnOnce(Arc<Inner>) -> F)
    where
        F: Future<Output = Result<V, String>>,
    {
        match ask(Arc::clone(&inner)).await {
            Ok(answer) => {
                (self.taken_back)(&k, &answer);
                self.remember(&inner, k, answer);
            }
            Err(e) => {
                let what = self.what;
                tracing::warn!(error = %e, "could not review a cached {what} again; still serving it");
                lock((self.cache)(&inner)).retry(&k);
            }
        }
    }
}

impl Inner {
    /// The token's user, `Err(why)` when the API server does not know it (or
    /// not for our audiences); the outer error when it could not be asked.
    async fn authenticate(&self, token: &str) -> Result<Result<User, String>, String> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: (!self.audiences.is_empty()).then(|| self.audiences.clone()),
            },
            ..TokenReview::default()
        };
        let status = self.create("TokenReview", &review).await?.status;
        let status = status.unwrap_or_default();
        let Some(u) = status.user.filter(|_| status.authenticated == Some(true)) else {
            return Ok(Err(status.error.filter(|e| !e.is_empty()).unwrap_or_else(
                || "the API server does not know this token".to_owned(),
            )));
        };
        // As the TokenReview API asks of a client that sets spec.audiences: the
        // answer must name one. An API server that names none ignored them and
        // vouches only for its own audience (kube-rbac-proxy assumes the asked
        // ones then; we refuse: that is the token we were told not to take).
        let got = status.audiences.unwrap_or_default();
        if !self.audiences.is_empty() && !got.iter().any(|a| self.audiences.contains(a)) {
            return Ok(Err(format!(
                "the token is for audiences {got:?}, not one of {:?}",
                self.audiences
            )));
        }
        Ok(Ok(user(u)))
    }

    async fn authorize(&self, (user, path, verb): &Access) -> Result<bool, String> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.iter().cloned().collect()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.clone()),
                    verb: Some((*verb).to_owned()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let status = self.create("SubjectAccessReview", &review).await?.status;
        Ok(status.is_some_and(|s| s.allowed && s.denied != Some(true)))
    }

    /// Creates `review`, a `kind`, within [`REVIEW_TIMEOUT`]: the API
    /// server's answer, or why there is none.
    async fn create<R>(&self, kind: &str, review: &R) -> Result<R, String>
    where
        R: kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>,
        R: Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
    {
        let api: Api<R> = Api::all(self.client.clone());
        tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), review))
            .await
            .map_err(|_| format!("{kind} took over {}s", REVIEW_TIMEOUT.as_secs()))?
            .map_err(|e| format!("{kind} failed: {e}"))
    }
}

fn user(u: UserInfo) -> User {
    let mut extra: Vec<(String, Vec<String>)> = u.extra.unwrap_or_default().into_iter().collect();
    extra.sort();
    User {
        name: u.username.unwrap_or_default(),
        uid: u.uid,
        groups: u.groups.unwrap_or_default(),
        extra,
    }
}

#[cfg(test)]
#[path = "fake_tests.rs"]
pub(crate) mod fake;
#[cfg(test)]
mod tests;
