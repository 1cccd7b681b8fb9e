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
//! kubernetes` its requests are reviewed ([`super::scrape_auth`]), and
//! `--metrics-names` says which scrapes read the pods' names.

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
    scrape_auth::{Auth, MetricsAuth, MetricsNames, Tls, TlsError},
};
use crate::{
    kube::review::Reviewer,
    report::{
        chain::Chain,
        metrics::{AuthLabels, ListenerLabels, Registry},
    },
};
pub use args::{Args, Audiences, DEFAULT_HEALTH_LISTEN, DEFAULT_LISTEN};

mod args;
mod peers;

use peers::Peers;

/// The listeners' own metrics. Registered before the registry is sealed into
/// the [`Exposition`](crate::report::metrics::Exposition) they serve.
#[derive(Clone, Debug, Default)]
pub(crate) struct HttpMetrics {
    /// `ipshadow_http_connections_rejected_total`.
    rejected: Family<ListenerLabels, Counter>,
    /// `ipshadow_http_auth_total`.
    auth: Family<AuthLabels, Counter>,
}

impl HttpMetrics {
    /// Both registered in `registry`, every listener's rejections at zero.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "ipshadow_http_connections_rejected",
            "HTTP connections closed at accept because the listener, or the client's address, \
             held its maximum at once",
            m.rejected.clone(),
        );
        for (listener, limit) in [
            ("metrics", "listener"),
            ("metrics", "peer"),
            ("health", "listener"),
        ] {
            let _ = m
                .rejected
                .get_or_create(&ListenerLabels { listener, limit });
        }
        registry.register(
            "ipshadow_http_auth",
            "Requests to the metrics listener reviewed with --metrics-auth kubernetes, by result",
            m.auth.clone(),
        );
        m
    }
}

/// How long open connections may finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The longest a connection lives, whatever the client does (a scrape takes
/// milliseconds; a client that stops reading the response holds no more).
pub const CONNECTION_LIFETIME: Duration = Duration::from_mins(1);

/// Who is at the other end of a connection, as the per-peer limits count it:
/// its address, an IPv4 one also when it comes mapped into IPv6. Every request
/// carries it as an extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Peer(pub(crate) IpAddr);

/// Why a listener could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("listening on {addr} failed: {}; pick another address with {flag}", Chain(.cause))]
pub struct ListenError {
    /// The address.
    pub addr: SocketAddr,
    /// The flag that sets it.
    pub flag: &'static str,
    /// What the kernel said.
    pub cause: std::io::Error,
}

/// The bound listeners, made in `new` so a taken port stops the start.
pub(crate) struct Http {
    listeners: Vec<Listener>,
    limits: Limits,
    rejected: Family<ListenerLabels, Counter>,
}

struct Listener {
    /// `metrics` or `health`.
    name: &'static str,
    socket: tokio::net::TcpListener,
    app: Router,
    tls: Option<Arc<Tls>>,
    /// Whether each peer is held to `--http-max-connections-per-peer`: not on
    /// the loopback probes' listener, where every client is the same peer.
    per_peer: bool,
}

/// What bounds the connections.
#[derive(Clone, Copy, Debug)]
struct Limits {
    max_connections: usize,
    max_per_peer: usize,
    header_timeout: Duration,
}

impl Http {
    /// Binds `args.listen` and, unless the same, `args.health_listen`; with
    /// `--metrics-auth kubernetes`, scrapes are reviewed through `client`.
    pub(crate) async fn new(
        args: &Args,
        state: AppState,
        client: Option<&kube::Client>,
        metrics: HttpMetrics,
    ) -> super::Result<Self> {
        let bind = |addr: SocketAddr, flag: &'static str| async move {
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|cause| ListenError { addr, flag, cause })
        };
        let tls = match (&args.tls_cert_file, &args.tls_key_file) {
            (Some(cert), Some(key)) => Some(Arc::new(Tls::new(cert, key)?)),
            _ => None,
        };
        let mut app = endpoints::router(state.clone(), args.metrics_names);
        let auth = scrape_auth(args, tls.is_some(), client, metrics.auth)?;
        log_names(args.metrics_names, auth.is_some());
        if let Some(auth) = auth {
            app = app.route_layer(axum::middleware::from_fn_with_state(
                auth,
                super::scrape_auth::authorize,
            ));
        }
        let mut listeners = vec![Listener {
            name: "metrics",
            socket: bind(args.listen, "--listen or IPSHADOW_LISTEN").await?,
            app,
            tls,
            per_peer: true,
        }];
        if args.health_listen != args.listen {
            let flag = "--health-listen or IPSHADOW_HEALTH_LISTEN";
            listeners.push(Listener {
                name: "health",
                socket: bind(args.health_listen, flag).await?,
                app: endpoints::health_router(state),
                tls: None,
                per_peer: false,
            });
        }
        let count = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
        Ok(Self {
            listeners,
            limits: Limits {
                max_connections: count(args.http_max_connections),
                max_per_peer: count(args.http_max_connections_per_peer),
                header_timeout: Duration::from_secs(args.http_header_timeout_seconds),
            },
            rejected: metrics.rejected,
        })
    }

    /// Serves until `token` is cancelled.
    pub(crate) async fn run(self, token: CancellationToken) {
        let limits = self.limits;
        let served = self.listeners.into_iter().map(|l| {
            let rejected = |limit| {
                self.rejected
                    .get_or_create(&ListenerLabels {
                        listener: l.name,
                        limit,
                    })
                    .clone()
            };
            let rejected = [rejected("listener"), rejected("peer")];
            serve(l, limits, rejected, token.clone())
        });
        futures::future::join_all(served).await;
    }
}

/// Says at start whether scrapes read the pods' names, and how to change it.
fn log_names(names: MetricsNames, auth: bool) {
    match (names, auth) {
        (MetricsNames::Authenticated, false) => tracing::info!(
            ?names,
            "/metrics shows no pod's namespace or name: its scrapes are not authenticated; \
             with --metrics-auth kubernetes the scrapers you grant read them"
        ),
        (MetricsNames::Always, false) => tracing::info!(
            ?names,
            "/metrics shows every pod's namespace and name to whoever reaches --listen, \
             every pod included (--metrics-auth off)"
        ),
        _ => {}
    }
}

/// The review of scrapes `--metrics-auth` asks for (`None`: off), or why the
/// flags do not go together.
fn scrape_auth(
    args: &Args,
    tls: bool,
    client: Option<&kube::Client>,
    results: Family<AuthLabels, Counter>,
) -> Result<Option<Arc<Auth>>, TlsError> {
    let audiences = args.metrics_auth_audiences.clone().unwrap_or_default().0;
    match args.metrics_auth {
        MetricsAuth::Off if !audiences.is_empty() => Err(TlsError::AudiencesWithoutAuth),
        MetricsAuth::Off => Ok(None),
        MetricsAuth::Kubernetes => {
            if !tls {
                return Err(TlsError::AuthWithoutTls);
            }
            let client = client.ok_or(TlsError::AuthWithoutCluster)?;
            Ok(Some(Arc::new(Auth {
                reviewer: Reviewer::new(client.clone(), audiences),
                results,
            })))
        }
    }
}

/// Accepts until `token` is cancelled; each connection bounded by `limits`.
/// `rejected`: the connections closed at accept over the listener's limit,
/// and over a peer's.
async fn serve(
    listener: Listener,
    limits: Limits,
    rejected: [Counter; 2],
    token: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Peers::new(if listener.per_peer {
        limits.max_per_peer
    } else {
        limits.max_connections
    });
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = token.cancelled() => break,
            a = listener.socket.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok((stream, addr)) => (stream, Peer(addr.ip().to_canonical())),
            Err(e) => {
                // Out of file descriptors or a connection reset before accept: not fatal.
                tracing::debug!(error = %e, "accepting an HTTP connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(held) = admit(&permits, &peers, peer.0, &rejected) else {
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(listener.app.clone().layer(axum::Extension(peer)));
        let token = token.clone();
        let acceptor = listener.tls.as_ref().map(|t| t.acceptor());
        connections.spawn(async move {
            let _held = held;
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

/// A connection's place within the limits (a permit of all, a slot of its
/// peer's), or `None`, counted in `rejected` (all, per peer), when full.
fn admit(
    permits: &Arc<Semaphore>,
    peers: &Arc<Peers>,
    peer: IpAddr,
    rejected: &[Counter; 2],
) -> Option<(tokio::sync::OwnedSemaphorePermit, peers::Slot)> {
    let Ok(permit) = Arc::clone(permits).try_acquire_owned() else {
        rejected[0].inc();
        return None;
    };
    let Some(slot) = peers.admit(peer) else {
        rejected[1].inc();
        return None;
    };
    Some((permit, slot))
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
