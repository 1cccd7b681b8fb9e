//! The HTTP endpoints: `/metrics`, `/healthz` (the loop answers), `/readyz`
//! (the first full reconcile is done).

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
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::report::metrics::{Metrics, OPENMETRICS, PROMETHEUS_TEXT};

/// How long `/healthz` waits for the reconcile loop to answer.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(2);

/// How long open connections may finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Where the agent listens by default: a port none of Cilium (4240, 4244, 9234,
/// 9876-9879, 9890-9893, 9962-9965), kube-ovn (8080, 10660-10665), the kubelet and
/// kube-proxy (10248-10256) or node-exporter (9100) use on the host network.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9785";

/// The HTTP endpoints' flags.
#[derive(Debug, clap::Args)]
#[group(id = "http")]
pub struct Args {
    /// Address of the metrics and health endpoints (127.0.0.1:PORT for localhost only).
    #[arg(long, env = "IPSHADOW_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
}

/// What the handlers read.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) ready: Arc<AtomicBool>,
    /// Pings to the reconcile loop; it answers between two steps.
    pub(crate) ping: mpsc::Sender<oneshot::Sender<()>>,
}

/// The bound listener, made in `new` so a taken port stops the start.
pub(crate) struct Http {
    listener: tokio::net::TcpListener,
    state: AppState,
}

impl Http {
    /// Binds `args.listen`.
    pub(crate) async fn new(args: &Args, state: AppState) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(args.listen).await?;
        Ok(Self { listener, state })
    }

    /// Serves until `token` is cancelled.
    pub(crate) async fn run(self, token: CancellationToken) {
        let serve = axum::serve(self.listener, router(self.state))
            .with_graceful_shutdown(token.clone().cancelled_owned());
        // Graceful shutdown waits for open connections; a scraper's keep-alive
        // connection must not hold the agent's exit.
        let grace = async {
            token.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            served = serve => if let Err(e) = served {
                tracing::error!(error = %e, "HTTP server failed");
            },
            () = grace => tracing::debug!("closed HTTP connections still open at shutdown"),
        }
    }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
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
    let (tx, rx) = oneshot::channel();
    if s.ping.send(tx).await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "reconcile loop is gone\n");
    }
    match tokio::time::timeout(LIVENESS_TIMEOUT, rx).await {
        Ok(Ok(())) => (StatusCode::OK, "ok\n"),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "reconcile loop does not answer\n",
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
