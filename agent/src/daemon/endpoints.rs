//! What the HTTP listeners serve: `/metrics`, `/healthz` (the reconcile loop
//! answers and no long-lived task stopped), `/readyz` (the first full reconcile
//! is done). The transport, limits and TLS are [`super::http`]'s; whether a
//! scrape reads the pods' names, [`MetricsNames`]'.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    Extension, Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};
use tokio::sync::{mpsc, oneshot};

use super::scrape_auth::{MetricsNames, Reviewed};
use crate::report::metrics::{Exposition, OPENMETRICS, PROMETHEUS_TEXT};

/// How long `/healthz` waits for the reconcile loop to answer.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(2);

/// What the handlers read.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) metrics: Arc<Exposition>,
    pub(crate) ready: Arc<AtomicBool>,
    /// Pings to the reconcile loop; it answers between two steps.
    pub(crate) ping: mpsc::Sender<oneshot::Sender<()>>,
    /// The long-lived tasks: one that stopped fails `/healthz`.
    pub(crate) tasks: super::supervise::Supervisor,
}

/// All three; `/metrics` with the pods' names for the scrapes `names` lets read them.
pub(crate) fn router(state: AppState, names: MetricsNames) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .layer(Extension(names))
        .with_state(state)
}

pub(crate) fn health_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// `reviewed`: set by the auth layer on a scrape it let through, never otherwise.
async fn metrics(
    State(s): State<AppState>,
    Extension(names): Extension<MetricsNames>,
    reviewed: Option<Extension<Reviewed>>,
    headers: axum::http::HeaderMap,
) -> impl IntoResponse {
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
    let names = names.for_scrape(reviewed.map(|Extension(r)| r));
    match s.metrics.encode(openmetrics, names) {
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
