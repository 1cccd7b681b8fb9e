//! The HTTP transport of the endpoints ([`super::endpoints`]).
//!
//! Two listeners: `--listen` (the node's own address in the manifest) serves
//! all three for Prometheus; `--health-listen` (loopback) serves the probes
//! alone, so whatever reaches the metrics port cannot fail kubelet's probes.
//! Each listener serves at most `--http-max-connections` at once and closes
//! the rest at accept; a client gets `--http-header-timeout-seconds` to send a
//! request's headers, which also bounds how long a keep-alive connection idles,
//! and no connection lives longer than [`CONNECTION_LIFETIME`]. With
//! `--tls-cert-file` the metrics listener speaks TLS; with `--metrics-auth
//! kubernetes` its requests are reviewed ([`super::scrape_auth`]).

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use prometheus_client::metrics::{counter::Counter, family::Family};
use tokio::sync::Semaphore;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

pub(crate) use super::endpoints::AppState;
use super::{
    endpoints,
    scrape_auth::{Auth, MetricsAuth, Tls, TlsError},
};
use crate::{kube::review::Reviewer, report::metrics::ListenerLabels};

/// How long open connections may finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The longest a connection lives, whatever the client does (a scrape takes
/// milliseconds; a client that stops reading the response holds no more).
pub const CONNECTION_LIFETIME: Duration = Duration::from_mins(1);

/// Where the agent listens by default: a port none of Cilium (4240, 4244, 9234,
/// 9876-9879, 9890-9893, 9962-9965), kube-ovn (8080, 10660-10665), the kubelet and
/// kube-proxy (10248-10256) or node-exporter (9100) use on the host network.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9785";
/// Where kubelet's probes reach the agent by default: loopback, which in the
/// host network only the node itself reaches.
pub const DEFAULT_HEALTH_LISTEN: &str = "127.0.0.1:9786";

/// The HTTP endpoints' flags.
#[derive(Debug, clap::Args)]
#[group(id = "http")]
pub struct Args {
    /// Address of /metrics (and /healthz, /readyz). The manifest binds the node's own
    /// address (status.hostIP), not every address of the host.
    #[arg(long, env = "IPSHADOW_LISTEN", default_value = DEFAULT_LISTEN, value_parser = listen_addr)]
    pub listen: SocketAddr,
    /// Address of /healthz and /readyz alone, for kubelet's probes (the same as --listen: none).
    #[arg(long, env = "IPSHADOW_HEALTH_LISTEN", default_value = DEFAULT_HEALTH_LISTEN,
          value_parser = listen_addr)]
    pub health_listen: SocketAddr,
    /// Connections served at once per listener; more are closed as they come.
    #[arg(long, env = "IPSHADOW_HTTP_MAX_CONNECTIONS", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub http_max_connections: u32,
    /// Seconds a client has to send a request's headers; also how long an idle
    /// keep-alive connection stays open.
    #[arg(long, env = "IPSHADOW_HTTP_HEADER_TIMEOUT_SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub http_header_timeout_seconds: u64,
    /// Who may read --listen: `off` (whoever reaches it), or `kubernetes` (a bearer
    /// token the API server authenticates, whose user may `get` the path, as
    /// kube-rbac-proxy checks; needs TLS). The health listener stays open: loopback.
    #[arg(long, env = "IPSHADOW_METRICS_AUTH", value_enum, default_value_t = MetricsAuth::Off)]
    pub metrics_auth: MetricsAuth,
    /// With `--metrics-auth kubernetes`, accept only tokens issued for one of these
    /// audiences (comma-separated, at most 16): the TokenReview asks for them and the
    /// API server must answer with one, as kube-rbac-proxy's --auth-token-audiences.
    /// None: tokens for the API server's own audience, valid against it too.
    #[arg(long, env = "IPSHADOW_METRICS_AUTH_AUDIENCES", value_parser = audiences)]
    pub metrics_auth_audiences: Option<Audiences>,
    /// Serve --listen over TLS with this PEM certificate (chain), read again when it
    /// changes (a mounted Secret rotated by cert-manager).
    #[arg(long, env = "IPSHADOW_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert-file.
    #[arg(long, env = "IPSHADOW_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<std::path::PathBuf>,
}

/// `host:port`, and an IPv6 address without brackets too: what the manifest's
/// `$(HOST_IP):9785` becomes on an IPv6 node.
fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    if let Some((ip, port)) = s.rsplit_once(':')
        && let (Ok(ip), Ok(port)) = (ip.parse::<std::net::Ipv6Addr>(), port.parse::<u16>())
    {
        return Ok(SocketAddr::new(ip.into(), port));
    }
    Err(format!(
        "{s:?} is not an address and port (e.g. 10.0.0.5:9785 or [fd00::5]:9785)"
    ))
}

/// Who is at the other end of a connection, as the per-peer limits count it:
/// its address, an IPv4 one also when it comes mapped into IPv6. Every request
/// carries it as an extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Peer(pub(crate) IpAddr);

impl Peer {
    fn of(addr: SocketAddr) -> Self {
        Self(addr.ip().to_canonical())
    }
}

/// Token audiences, as `--metrics-auth-audiences` lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audiences(pub Vec<String>);

/// At most this many audiences.
const MAX_AUDIENCES: usize = 16;

/// Up to [`MAX_AUDIENCES`] comma-separated audiences, each what a projected
/// ServiceAccount token's `audience` may be: a name or a URL, no spaces. Empty
/// (an env var set to ""): none.
fn audiences(s: &str) -> Result<Audiences, String> {
    if s.trim().is_empty() {
        return Ok(Audiences(Vec::new()));
    }
    let list: Vec<String> = s.split(',').map(|a| a.trim().to_owned()).collect();
    if let Some(bad) = list
        .iter()
        .find(|a| a.is_empty() || a.len() > 256 || a.chars().any(char::is_whitespace))
    {
        return Err(format!(
            "{bad:?} is not a token audience: 1 to 256 characters, no spaces (e.g. ipshadow)"
        ));
    }
    if list.len() > MAX_AUDIENCES {
        return Err(format!("{} audiences: {MAX_AUDIENCES} at most", list.len()));
    }
    Ok(Audiences(list))
}

/// Why a listener could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("listening on {addr} failed: {source}; pick another address with {flag}")]
pub struct ListenError {
    /// The address.
    pub addr: SocketAddr,
    /// The flag that sets it.
    pub flag: &'static str,
    /// What the kernel said.
    #[source]
    pub source: std::io::Error,
}

/// The bound listeners, made in `new` so a taken port stops the start.
pub(crate) struct Http {
    /// (name, listener, routes, TLS).
    listeners: Vec<Listener>,
    limits: Limits,
    rejected: Family<ListenerLabels, Counter>,
}

type Listener = (
    &'static str,
    tokio::net::TcpListener,
    Router,
    Option<Arc<Tls>>,
);

/// What bounds one connection.
#[derive(Clone, Copy, Debug)]
struct Limits {
    max_connections: usize,
    header_timeout: Duration,
}

impl Http {
    /// Binds `args.listen` and, unless the same, `args.health_listen`; with
    /// `--metrics-auth kubernetes`, scrapes are reviewed through `client`.
    pub(crate) async fn new(
        args: &Args,
        state: AppState,
        client: Option<&kube::Client>,
    ) -> super::Result<Self> {
        let bind = |addr: SocketAddr, flag: &'static str| async move {
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| ListenError { addr, flag, source })
        };
        let tls = match (&args.tls_cert_file, &args.tls_key_file) {
            (Some(cert), Some(key)) => Some(Arc::new(Tls::new(cert, key)?)),
            _ => None,
        };
        let mut app = endpoints::router(state.clone());
        let audiences = args
            .metrics_auth_audiences
            .clone()
            .map(|a| a.0)
            .unwrap_or_default();
        if args.metrics_auth == MetricsAuth::Off && !audiences.is_empty() {
            return Err(TlsError::AudiencesWithoutAuth.into());
        }
        if args.metrics_auth == MetricsAuth::Kubernetes {
            if tls.is_none() {
                return Err(TlsError::AuthWithoutTls.into());
            }
            let client = client.ok_or(TlsError::AuthWithoutCluster)?;
            let auth = Arc::new(Auth {
                reviewer: Reviewer::new(client.clone(), audiences),
                results: state.metrics.http_auth.clone(),
            });
            app = app.route_layer(axum::middleware::from_fn_with_state(
                auth,
                super::scrape_auth::authorize,
            ));
        }
        let rejected = state.metrics.http_rejected.clone();
        let mut listeners = vec![(
            "metrics",
            bind(args.listen, "--listen or IPSHADOW_LISTEN").await?,
            app,
            tls,
        )];
        if args.health_listen != args.listen {
            listeners.push((
                "health",
                bind(
                    args.health_listen,
                    "--health-listen or IPSHADOW_HEALTH_LISTEN",
                )
                .await?,
                endpoints::health_router(state),
                None,
            ));
        }
        Ok(Self {
            listeners,
            limits: Limits {
                max_connections: usize::try_from(args.http_max_connections).unwrap_or(64),
                header_timeout: Duration::from_secs(args.http_header_timeout_seconds),
            },
            rejected,
        })
    }

    /// Serves until `token` is cancelled.
    pub(crate) async fn run(self, token: CancellationToken) {
        let limits = self.limits;
        let served = self
            .listeners
            .into_iter()
            .map(|(name, listener, app, tls)| {
                let rejected = self
                    .rejected
                    .get_or_create(&ListenerLabels { listener: name })
                    .clone();
                serve(listener, (app, tls), limits, rejected, token.clone())
            });
        futures::future::join_all(served).await;
    }
}

/// Accepts until `token` is cancelled; each connection bounded by `limits`.
async fn serve(
    listener: tokio::net::TcpListener,
    (app, tls): (Router, Option<Arc<Tls>>),
    limits: Limits,
    rejected: Counter,
    token: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = token.cancelled() => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok((stream, addr)) => (stream, Peer::of(addr)),
            Err(e) => {
                // Out of file descriptors or a connection reset before accept: not fatal.
                tracing::debug!(error = %e, "accepting an HTTP connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            rejected.inc();
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(app.clone().layer(axum::Extension(peer)));
        let token = token.clone();
        let acceptor = tls.as_ref().map(|t| t.acceptor());
        connections.spawn(async move {
            let _permit = permit;
            let Some(acceptor) = acceptor else {
                return connection(TokioIo::new(stream), service, limits, token).await;
            };
            // The handshake gets the header timeout too: a half handshake holds no slot longer.
            match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => connection(TokioIo::new(tls), service, limits, token).await,
                Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!("TLS handshake timed out"),
            }
        });
    }
    connections.close();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connections.wait()).await;
}

/// Serves one connection, bounded by `limits`, until it ends or `token` is cancelled.
async fn connection<I>(
    io: TokioIo<I>,
    service: TowerToHyperService<Router>,
    limits: Limits,
    token: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let conn = builder.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = tokio::time::sleep(CONNECTION_LIFETIME) => {}
        () = token.cancelled() => {
            // A scraper's keep-alive connection must not hold the agent's exit.
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[command(flatten)]
        http: Args,
    }

    #[test]
    fn audiences_are_a_comma_list_of_at_most_16_names_without_spaces() {
        let parse = |list: &str| {
            Flags::try_parse_from(["t", "--metrics-auth-audiences", list])
                .map(|f| f.http.metrics_auth_audiences.map(|a| a.0))
        };
        assert_eq!(
            parse("ipshadow, https://ipshadow.example").expect("two"),
            Some(vec![
                "ipshadow".to_owned(),
                "https://ipshadow.example".to_owned()
            ])
        );
        let many = vec!["a"; 17].join(",");
        assert!(parse(&many).is_err());
        assert!(parse(&many[2..]).is_ok());
        for bad in ["a,,b", "two words", ","] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("").expect("none"), Some(vec![]), "an empty env var");
        let none = Flags::try_parse_from(["t"]).expect("defaults");
        assert_eq!(none.http.metrics_auth_audiences, None);
    }

    #[test]
    fn listen_addresses_take_the_hosts_ip_of_either_family() {
        for (given, want) in [
            ("10.0.0.5:9785", "10.0.0.5:9785"),
            ("[fd00::5]:9785", "[fd00::5]:9785"),
            ("fd00::5:9785", "[fd00::5]:9785"),
        ] {
            assert_eq!(
                listen_addr(given),
                Ok(want.parse().expect("addr")),
                "{given}"
            );
        }
        for bad in ["", "10.0.0.5", ":9785", "$(HOST_IP):9785", "10.0.0.5:99999"] {
            assert!(listen_addr(bad).is_err(), "{bad}");
        }
    }
}
