use axum::{Router, body::Body, routing::get};
use tower::ServiceExt as _;

use super::*;
use crate::kube::review::{
    fake::FakeApi,
    limits::{PEER_REVIEW_BURST, PEER_REVIEWS_PER_MINUTE},
};

#[test]
fn only_a_bearer_token_of_bounded_length_is_read() {
    let with = |v: &str| {
        let mut h = axum::http::HeaderMap::new();
        h.insert(header::AUTHORIZATION, v.parse().expect("header"));
        bearer(&h).map(str::to_owned)
    };
    assert_eq!(with("Bearer abc").as_deref(), Some("abc"));
    assert_eq!(with("bearer  abc ").as_deref(), Some("abc"));
    assert_eq!(with("Basic abc"), None);
    assert_eq!(with("Bearer "), None);
    assert_eq!(with(&format!("Bearer {}", "x".repeat(MAX_TOKEN + 1))), None);
    assert_eq!(bearer(&axum::http::HeaderMap::new()), None);
}

const PROMETHEUS: [u8; 4] = [10, 0, 0, 1];
const FLOODER: [u8; 4] = [10, 0, 0, 66];
const STRANGER: [u8; 4] = [10, 0, 0, 99];

/// `/metrics` behind the auth layer, reviewed through `api`.
fn app(api: &FakeApi) -> Router {
    let auth = Arc::new(Auth {
        reviewer: Reviewer::new(api.client(), vec![]),
        results: Family::default(),
    });
    Router::new()
        .route("/metrics", get(|| async { "ipshadow_up 1\n" }))
        .route_layer(axum::middleware::from_fn_with_state(auth, authorize))
}

/// GET /metrics from `peer` with `token`, as http.rs hands it over: the status and body.
async fn scrape(app: &Router, peer: [u8; 4], token: Option<&str>) -> (StatusCode, String) {
    let mut req = Request::get("/metrics");
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let mut req = req.body(Body::empty()).expect("request");
    req.extensions_mut().insert(Peer(IpAddr::from(peer)));
    let response = app.clone().oneshot(req).await.expect("infallible");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(start_paused = true)]
async fn a_valid_scraper_keeps_its_200s_across_its_review_expiry_while_another_peer_floods() {
    let api = FakeApi::default();
    api.user(
        "prom",
        "system:serviceaccount:monitoring:prometheus-k8s",
        true,
    );
    let app = app(&api);
    assert_eq!(
        scrape(&app, PROMETHEUS, Some("prom")).await.0,
        StatusCode::OK
    );
    // 10 made-up tokens a second from another peer for 12 minutes: past the
    // token's (2 minutes) and the grant's (5 minutes) cached answers, twice;
    // Prometheus scrapes every second all along.
    let mut flood = std::collections::BTreeMap::<StatusCode, usize>::new();
    for tick in 1..=12 * 60 * 10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (code, _) = scrape(&app, FLOODER, Some(&format!("forged-{tick}"))).await;
        *flood.entry(code).or_default() += 1;
        if tick % 10 == 0 {
            let (code, body) = scrape(&app, PROMETHEUS, Some("prom")).await;
            assert_eq!(code, StatusCode::OK, "after {} s: {body}", tick / 10);
        }
    }
    assert!(
        api.reviews_of("prom") >= 3,
        "the token was reviewed again while it was served"
    );
    assert_eq!(
        flood.keys().copied().collect::<Vec<_>>(),
        [StatusCode::UNAUTHORIZED, StatusCode::TOO_MANY_REQUESTS]
    );
    // The flood cost the API server its peer's budget, no more.
    let forged = api
        .lock()
        .token_reviews
        .iter()
        .filter(|t| t.starts_with("forged"))
        .count();
    let budget = PEER_REVIEW_BURST + 12 * PEER_REVIEWS_PER_MINUTE;
    let budget = usize::try_from(budget).expect("small");
    assert!(forged <= budget, "{forged} reviews of forged tokens");
}

#[tokio::test(start_paused = true)]
async fn a_client_not_authenticated_never_reads_what_the_api_server_said_in_a_review() {
    let api = FakeApi::default();
    api.user(
        "prom",
        "system:serviceaccount:monitoring:prometheus-k8s",
        true,
    );
    let app = app(&api);
    let (code, body) = scrape(&app, STRANGER, None).await;
    assert_eq!(
        (code, body.as_str()),
        (StatusCode::UNAUTHORIZED, "Unauthorized: no bearer token\n")
    );
    // The API server's reason for refusing a token stays in the agent's log.
    let (code, body) = scrape(&app, STRANGER, Some("made-up")).await;
    assert_eq!(
        (code, body.as_str()),
        (
            StatusCode::UNAUTHORIZED,
            "Unauthorized: the token was not accepted\n"
        )
    );
    // So does its error when it fails (here with an etcd detail).
    api.lock().failing = true;
    let (code, body) = scrape(&app, STRANGER, Some("new")).await;
    assert_eq!(
        (code, body.as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "authentication unavailable\n"
        )
    );
    // An authenticated user may read who it is and what to grant.
    api.lock().failing = false;
    api.user("nosy", "system:serviceaccount:tenant:default", false);
    let (code, body) = scrape(&app, STRANGER, Some("nosy")).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert!(
        body.contains("tenant:default") && body.contains("nonResourceURLs"),
        "{body}"
    );
}

#[test]
fn names_reach_the_scrapes_the_policy_names_and_no_other() {
    use crate::report::metrics::Names::{Omitted, Shown};
    for (policy, unreviewed, reviewed) in [
        (MetricsNames::Authenticated, Omitted, Shown),
        (MetricsNames::Always, Shown, Shown),
        (MetricsNames::Never, Omitted, Omitted),
    ] {
        assert_eq!(policy.for_scrape(None), unreviewed, "{policy:?}");
        assert_eq!(policy.for_scrape(Some(Reviewed)), reviewed, "{policy:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_scrape_is_marked_reviewed_only_once_the_api_server_allowed_it() {
    let api = FakeApi::default();
    api.user(
        "prom",
        "system:serviceaccount:monitoring:prometheus-k8s",
        true,
    );
    let auth = Arc::new(Auth {
        reviewer: Reviewer::new(api.client(), vec![]),
        results: Family::default(),
    });
    let seen = |r: Option<axum::Extension<Reviewed>>| async move {
        if r.is_some() {
            "reviewed"
        } else {
            "not reviewed"
        }
    };
    let open = Router::new().route("/metrics", get(seen));
    let guarded = open
        .clone()
        .route_layer(axum::middleware::from_fn_with_state(auth, authorize));
    assert_eq!(
        scrape(&open, PROMETHEUS, Some("prom")).await,
        (StatusCode::OK, "not reviewed".to_owned())
    );
    assert_eq!(
        scrape(&guarded, PROMETHEUS, Some("prom")).await,
        (StatusCode::OK, "reviewed".to_owned())
    );
}
