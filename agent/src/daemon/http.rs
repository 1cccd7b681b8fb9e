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

use crate::metrics::{Metrics, OPENMETRICS, PROMETHEUS_TEXT};

/// How long `/healthz` waits for the reconcile loop to answer.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct AppState {
    pub metrics: Arc<Metrics>,
    pub ready: Arc<AtomicBool>,
    /// Pings to the reconcile loop; it answers between two steps.
    pub ping: mpsc::Sender<oneshot::Sender<()>>,
}

pub fn router(state: AppState) -> Router {
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

/// Binds `addr` (failing fast with the address in the error) and serves until `shutdown` fires.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
