//! Who may scrape: a bearer token checked by the API server (TokenReview), then
//! the user's right to `get` the path (SubjectAccessReview on a non-resource
//! URL), as kubelet and kube-rbac-proxy check theirs.
//!
//! Every node's agent is scraped by every Prometheus replica every 30 s or so:
//! one review per scrape would be thousands a second at 5,000 nodes. Answers are
//! cached with kubelet's default webhook TTLs (authentication 2 min; allowed
//! 5 min, denied 30 s), keyed by the token's SHA-256 (no token is kept), and
//! reviews are rate-limited per agent, so whoever reaches the port with made-up
//! tokens cannot turn the agents against the API server.

use std::{net::IpAddr, sync::Mutex, time::Duration};

use k8s_openapi::api::{
    authentication::v1::{TokenReview, TokenReviewSpec, UserInfo},
    authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec},
};
use kube::{Api, api::PostParams};

mod cache;
mod limits;

use cache::Cache;
use limits::Bucket;
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
/// Reviews sent at once at most, then [`REVIEWS_PER_SECOND`].
pub const REVIEW_BURST: u32 = 10;
/// Reviews per second after the burst.
pub const REVIEWS_PER_SECOND: u32 = 1;
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
    /// Too many reviews just now.
    Throttled,
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
            Self::Throttled => "throttled",
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

#[derive(Debug)]
struct State {
    /// Token hash → the user, or why not.
    authn: Cache<[u8; 32], Result<User, String>>,
    /// (user, path, verb) → allowed.
    authz: Cache<(User, String, &'static str), bool>,
    bucket: Bucket,
}

/// Checks scrapes with the API server; cheap to share.
pub struct Reviewer {
    client: kube::Client,
    state: Mutex<State>,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer").finish_non_exhaustive()
    }
}

impl Reviewer {
    /// Reviews through `client` (which needs `create` on tokenreviews and
    /// subjectaccessreviews: `system:auth-delegator`'s two rules).
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            state: Mutex::new(State {
                authn: Cache::new(),
                authz: Cache::new(),
                bucket: Bucket::new(Instant::now()),
            }),
        }
    }

    /// May the bearer of `token`, connected from `_peer`, `verb` `path`?
    pub async fn check(
        &self,
        token: &str,
        path: &str,
        verb: &'static str,
        _peer: IpAddr,
    ) -> Verdict {
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        let cached = self.lock().authn.get(&key, Instant::now());
        let user = if let Some(known) = cached {
            known
        } else {
            if !self.lock().bucket.take(Instant::now()) {
                return Verdict::Throttled;
            }
            let answer = match self.authenticate(token).await {
                Ok(a) => a,
                Err(e) => return Verdict::Unavailable(e),
            };
            let ttl = if answer.is_ok() {
                AUTHENTICATED_TTL
            } else {
                UNAUTHENTICATED_TTL
            };
            self.lock()
                .authn
                .put(key, answer.clone(), ttl, Instant::now());
            answer
        };
        let user = match user {
            Ok(u) => u,
            Err(why) => return Verdict::Unauthenticated(why),
        };
        let akey = (user.clone(), path.to_owned(), verb);
        let cached = self.lock().authz.get(&akey, Instant::now());
        let allowed = if let Some(a) = cached {
            a
        } else {
            if !self.lock().bucket.take(Instant::now()) {
                return Verdict::Throttled;
            }
            let allowed = match self.authorize(&user, path, verb).await {
                Ok(a) => a,
                Err(e) => return Verdict::Unavailable(e),
            };
            let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
            self.lock().authz.put(akey, allowed, ttl, Instant::now());
            allowed
        };
        if allowed {
            Verdict::Allowed { user: user.name }
        } else {
            Verdict::Forbidden { user: user.name }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding it leaves only caches behind: still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The token's user, `Err(why)` when the API server does not know it;
    /// the outer error when it could not be asked.
    async fn authenticate(&self, token: &str) -> Result<Result<User, String>, String> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let done =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| format!("TokenReview took over {}s", REVIEW_TIMEOUT.as_secs()))?
                .map_err(|e| format!("TokenReview failed: {e}"))?;
        let status = done.status.unwrap_or_default();
        Ok(match (status.authenticated, status.user) {
            (Some(true), Some(u)) => Ok(user(u)),
            _ => Err(status
                .error
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "the API server does not know this token".to_owned())),
        })
    }

    async fn authorize(&self, user: &User, path: &str, verb: &str) -> Result<bool, String> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.iter().cloned().collect()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let done =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| {
                    format!(
                        "SubjectAccessReview took over {}s",
                        REVIEW_TIMEOUT.as_secs()
                    )
                })?
                .map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
        Ok(done
            .status
            .is_some_and(|s| s.allowed && !s.denied.unwrap_or(false)))
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
pub(crate) mod fake;
#[cfg(test)]
mod tests;
