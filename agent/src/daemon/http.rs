//! The HTTP endpoints: `/metrics`, `/healthz` (the loop answers), `/readyz`
//! (the first full reconcile is done).
//!
//! Two listeners: `--listen` (the node's own address in the manifest) serves
//! all three for Prometheus; `--health-listen` (loopback) serves the probes
//! alone, so whatever reaches the metrics port cannot fail kubelet's probes.
//! Each listener serves at most `--http-max-connections` at once and closes
//! the rest at accept; a client gets `--http-header-timeout-seconds` to send a
//! request's headers, which also bounds how long a keep-alive connection idles,
//! and no connection lives longer than [`CONNECTION_LIFETIME`].

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use prometheus_client::metrics::{counter::Counter, family::Family};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::report::metrics::{ListenerLabels, Metrics, OPENMETRICS, PROMETHEUS_TEXT};

/// How long `/healthz` waits for the reconcile loop to answer.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(2);

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
}

/// What the handlers read.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) ready: Arc<AtomicBool>,
    /// Pings to the reconcile loop; it answers between two steps.
    pub(crate) ping: mpsc::Sender<oneshot::Sender<()>>,
    /// The long-lived tasks: one that stopped fails `/healthz`.
    pub(crate) tasks: super::supervise::Supervisor,
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
    listeners: Vec<(&'static str, tokio::net::TcpListener, Router)>,
    limits: Limits,
    rejected: Family<ListenerLabels, Counter>,
}

/// What bounds one connection.
#[derive(Clone, Copy, Debug)]
struct Limits {
    max_connections: usize,
    header_timeout: Duration,
}

impl Http {
    /// Binds `args.listen` and, unless the same, `args.health_listen`.
    pub(crate) async fn new(args: &Args, state: AppState) -> Result<Self, ListenError> {
        let bind = |addr: SocketAddr, flag: &'static str| async move {
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| ListenError { addr, flag, source })
        };
        let rejected = state.metrics.http_rejected.clone();
        let mut listeners = vec![(
            "metrics",
            bind(args.listen, "--listen or IPSHADOW_LISTEN").await?,
            router(state.clone()),
        )];
        if args.health_listen != args.listen {
            listeners.push((
                "health",
                bind(
                    args.health_listen,
                    "--health-listen or IPSHADOW_HEALTH_LISTEN",
                )
                .await?,
                health_router(state),
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
        let served = self.listeners.into_iter().map(|(name, listener, app)| {
            let rejected = self
                .rejected
                .get_or_create(&ListenerLabels { listener: name })
                .clone();
            serve(listener, app, limits, rejected, token.clone())
        });
        futures::future::join_all(served).await;
    }
}

/// Accepts until `token` is cancelled; each connection bounded by `limits`.
async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
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
        let stream = match accepted {
            Ok((stream, _)) => stream,
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
        let service = TowerToHyperService::new(app.clone());
        let token = token.clone();
        connections.spawn(async move {
            let _permit = permit;
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
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
        });
    }
    connections.close();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connections.wait()).await;
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

fn health_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics(State(s): State<AppState>, headers: axum::http::HeaderMap) -> impl IntoResponse {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let content_type = if openmetrics {
        OPENMETRICS
    } else {
        PROMETHEUS_TEXT
    };
    match s.metrics.encode(openmetrics) {
        Ok(body) => (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding metrics failed\n",
        )
            .into_response(),
    }
}

async fn healthz(State(s): State<AppState>) -> impl IntoResponse {
    if let Some(stopped) = s.tasks.failure() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("stopped: {stopped}\n"),
        );
    }
    let (tx, rx) = oneshot::channel();
    if s.ping.send(tx).await.is_err() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "reconcile loop is gone\n".to_owned(),
        );
    }
    match tokio::time::timeout(LIVENESS_TIMEOUT, rx).await {
        Ok(Ok(())) => (StatusCode::OK, "ok\n".to_owned()),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "reconcile loop does not answer\n".to_owned(),
        ),
    }
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    if s.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "first reconcile not done yet\n",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
