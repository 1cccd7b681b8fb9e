//! Optional TLS and Kubernetes authentication of scrapes on the metrics
//! listener (`--metrics-auth kubernetes`): a bearer token reviewed by the API
//! server and the user's `get` on the path, as kube-rbac-proxy does, so only
//! the Prometheus you granted reads the node's findings. Off by default.
//!
//! The certificate comes from files (a mounted Secret): they are read again
//! when they change, as cert-manager rotates them, for the next connections.

use std::{
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use axum::{
    extract::{Request, State},
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use prometheus_client::metrics::{counter::Counter, family::Family};
use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use tokio_rustls::TlsAcceptor;

use super::http::Peer;
use crate::{
    kube::review::{Reviewer, Verdict},
    report::{
        chain::Chain,
        metrics::{AuthLabels, Names},
    },
};

/// Who may read the metrics listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsAuth {
    /// Anyone who reaches it (the manifest binds the node's own address).
    Off,
    /// A bearer token the API server authenticates, whose user may `get` the path
    /// (TokenReview + SubjectAccessReview). Needs TLS (--tls-cert-file).
    Kubernetes,
}

/// Which scrapes of --listen read the names tenants chose (a pod's namespace
/// and name): the port is on the host network, which every pod reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsNames {
    /// Only scrapes that passed --metrics-auth kubernetes; with --metrics-auth off, none.
    Authenticated,
    /// Every scrape: whoever reaches --listen reads every pod's name (single-tenant clusters).
    Always,
    /// None: series name a finding's address, kind and owner, never its pod.
    Never,
}

impl MetricsNames {
    /// What a scrape shows, `reviewed` when [`authorize`] let it through.
    pub(crate) fn for_scrape(self, reviewed: Option<Reviewed>) -> Names {
        match (self, reviewed) {
            (Self::Always, _) | (Self::Authenticated, Some(Reviewed)) => Names::Shown,
            (Self::Authenticated, None) | (Self::Never, _) => Names::Omitted,
        }
    }
}

/// Set on a request [`authorize`] let through (a token the API server
/// authenticated, a user allowed the path); no client can set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reviewed;

/// The longest bearer token read; longer ones are refused unread.
const MAX_TOKEN: usize = 16 * 1024;
/// How often the certificate files are looked at for a change, at most.
const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM.
    #[error("reading {what} {path}: {reason}; give a PEM file with {flag}")]
    File {
        /// Certificate or key.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
        /// The flag that names it.
        flag: &'static str,
    },
    /// The certificate and key do not make a server configuration.
    #[error("the certificate {cert} and key {key} do not go together: {}", Chain(.cause))]
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        cause: rustls::Error,
    },
    /// Authentication without TLS would send every scraper's token in clear text.
    #[error(
        "--metrics-auth kubernetes needs TLS: give --tls-cert-file and --tls-key-file \
         (a Secret mounted as in deploy/metrics-auth), or --metrics-auth off"
    )]
    AuthWithoutTls,
    /// File mode has no API server to review tokens with.
    #[error(
        "--metrics-auth kubernetes reviews tokens with the API server, but the agent reads \
         files (--pods); run it against the cluster or use --metrics-auth off"
    )]
    AuthWithoutCluster,
    /// Audiences without review would look like a restriction and be none.
    #[error(
        "--metrics-auth-audiences checks the tokens of --metrics-auth kubernetes, which is off; \
         set --metrics-auth kubernetes or drop the audiences"
    )]
    AudiencesWithoutAuth,
}

/// The serving certificate, read again when its files change.
pub(crate) struct Tls {
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<Loaded>,
}

struct Loaded {
    acceptor: TlsAcceptor,
    stamp: Stamp,
    checked: Instant,
}

/// What says a file changed: its modification time and length.
type Stamp = [(Option<SystemTime>, u64); 2];

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let one = |p: &Path| std::fs::metadata(p).map_or((None, 0), |m| (m.modified().ok(), m.len()));
    [one(cert), one(key)]
}

impl Tls {
    /// Reads `cert` and `key` (PEM); an error names the file that is wrong.
    pub(crate) fn new(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let acceptor = load(cert, key)?;
        Ok(Self {
            state: Mutex::new(Loaded {
                acceptor,
                stamp: stamp(cert, key),
                checked: Instant::now(),
            }),
            cert: cert.to_owned(),
            key: key.to_owned(),
        })
    }

    /// The acceptor for a new connection: the files' current pair, or the last
    /// good one while the new files do not load (a rotation half written).
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        let mut s = crate::inventory::lock(&self.state);
        // A stat of two small files of a mounted Secret, at most once a second.
        if s.checked.elapsed() >= RELOAD_CHECK {
            s.checked = Instant::now();
            let now = stamp(&self.cert, &self.key);
            if now != s.stamp {
                s.stamp = now;
                match load(&self.cert, &self.key) {
                    Ok(a) => {
                        s.acceptor = a;
                        tracing::info!(cert = %self.cert.display(), "the serving certificate changed: read again");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the serving certificate changed but does not load; keeping the previous one");
                    }
                }
            }
        }
        s.acceptor.clone()
    }
}

fn load(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let file_error = |what, path: &Path, flag, reason: String| TlsError::File {
        what,
        path: path.to_owned(),
        reason,
        flag,
    };
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| file_error("certificate", cert, "--tls-cert-file", e.to_string()))?;
    if certs.is_empty() {
        let reason = "no CERTIFICATE block in it".to_owned();
        return Err(file_error("certificate", cert, "--tls-cert-file", reason));
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| file_error("key", key, "--tls-key-file", e.to_string()))?;
    let config_error = |source| TlsError::Config {
        cert: cert.to_owned(),
        key: key.to_owned(),
        cause: source,
    };
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_no_client_auth()
            .with_single_cert(certs, private)
            .map_err(config_error)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// What the auth layer needs.
pub(crate) struct Auth {
    pub(crate) reviewer: Reviewer,
    pub(crate) results: Family<AuthLabels, Counter>,
}

/// The bearer token of `Authorization: Bearer …`, if any.
fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.len() <= MAX_TOKEN)
        .then_some(token)
}

/// The auth layer: serves `req` only for a user the API server allows, and
/// marks it [`Reviewed`].
pub(crate) async fn authorize(
    State(auth): State<Arc<Auth>>,
    mut req: Request,
    next: Next,
) -> Response {
    let verb = match *req.method() {
        Method::GET | Method::HEAD => "get",
        _ => return StatusCode::METHOD_NOT_ALLOWED.into_response(),
    };
    let path = req.uri().path().to_owned();
    // Every connection's requests carry it (http.rs); "unknown" shares one budget.
    let peer = req
        .extensions()
        .get::<Peer>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0);
    let token = bearer(req.headers());
    let verdict = match token {
        None => Verdict::Unauthenticated("no bearer token".to_owned()),
        Some(token) => auth.reviewer.check(token, &path, verb, peer).await,
    };
    auth.results
        .get_or_create(&AuthLabels {
            result: verdict.result(),
        })
        .inc();
    // Debug only: whoever reaches the port could otherwise fill the log.
    tracing::debug!(path, %peer, result = verdict.result(), ?verdict, "scrape reviewed");
    match verdict {
        Verdict::Allowed { .. } => {
            req.extensions_mut().insert(Reviewed);
            next.run(req).await
        }
        refused => refusal(refused, token.is_some(), &path, peer),
    }
}

/// The answer to a scrape `verdict` refused. Who is not authenticated reads
/// our words only, never the API server's: those go to the log (an
/// unavailable API server is rare and its reviews rate-limited, so a warning each).
fn refusal(verdict: Verdict, had_token: bool, path: &str, peer: IpAddr) -> Response {
    match verdict {
        // Never asked for (allowed scrapes are served): fail closed all the same.
        Verdict::Allowed { .. } => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        Verdict::Unauthenticated(_) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer realm=\"ipshadow\"")],
            if had_token {
                "Unauthorized: the token was not accepted\n"
            } else {
                "Unauthorized: no bearer token\n"
            },
        )
            .into_response(),
        Verdict::Forbidden { user } => (
            StatusCode::FORBIDDEN,
            format!(
                "Forbidden: user {user:?} may not get {path}; bind it to a ClusterRole with \
                 nonResourceURLs [\"{path}\"] verbs [\"get\"] (ipshadow-metrics-reader in \
                 deploy/metrics-auth)\n"
            ),
        )
            .into_response(),
        Verdict::Unavailable(why) => {
            tracing::warn!(error = %why, path, %peer, "cannot review a scrape's token: answered 503");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "authentication unavailable\n",
            )
                .into_response()
        }
        Verdict::Throttled(_) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            "too many token reviews just now; retry\n".to_owned(),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests;
