use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::{
    fake::FakeApi,
    limits::{
        Limits, PEER_REVIEW_BURST, PEER_REVIEWS_PER_MINUTE, PEERS, REVIEW_BURST, REVIEWS_PER_SECOND,
    },
    *,
};

const PROMETHEUS: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const FLOODER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 66));

fn peer(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a01_0000 + n))
}

fn count(n: u32) -> usize {
    usize::try_from(n).expect("small")
}

/// Polls `done` on the paused clock until it holds (a background re-review).
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{what} did not happen");
}

#[test]
fn cached_answers_expire_and_the_cache_stays_bounded() {
    let t0 = Instant::now();
    let yes = || true;
    let mut c = Cache::<u32, bool>::new(CACHE_ENTRIES);
    c.put(1, true, Duration::from_secs(10), false, t0);
    assert_eq!(
        c.get(&1, t0 + Duration::from_secs(9), yes),
        Some((true, false))
    );
    assert_eq!(c.get(&1, t0 + Duration::from_secs(10), yes), None);
    for k in 0..1000 {
        c.put(k, true, Duration::from_secs(u64::from(k) + 1), false, t0);
    }
    assert_eq!(c.len(), CACHE_ENTRIES);
    // The ones nearest expiry went; the newest stay.
    assert_eq!(c.get(&999, t0, yes), Some((true, false)));
    assert_eq!(c.get(&0, t0, yes), None);
}

#[test]
fn a_valid_answer_is_served_stale_for_as_long_again_with_one_re_review_at_a_time() {
    let t0 = Instant::now();
    let ttl = Duration::from_secs(10);
    let mut c = Cache::<u32, bool>::new(CACHE_ENTRIES);
    c.put(1, true, ttl, true, t0);
    let stale = t0 + ttl;
    assert_eq!(c.get(&1, stale, || false), Some((true, false)), "no budget");
    assert_eq!(c.get(&1, stale, || true), Some((true, true)), "re-review");
    assert_eq!(
        c.get(&1, stale, || true),
        Some((true, false)),
        "one at a time"
    );
    c.retry(&1);
    assert_eq!(
        c.get(&1, stale, || true),
        Some((true, true)),
        "failed: again"
    );
    assert_eq!(c.get(&1, t0 + 2 * ttl, || true), None, "bounded");
    // Full of valid answers nearer their end, a refusal still goes first.
    let mut c = Cache::<u32, bool>::new(CACHE_ENTRIES);
    c.put(0, false, ttl, false, t0);
    for k in 1..u32::try_from(CACHE_ENTRIES).expect("small") {
        c.put(k, true, Duration::from_secs(1), true, t0);
    }
    c.put(9999, true, ttl, true, t0);
    assert_eq!(c.get(&0, t0, || true), None);
    assert_eq!(c.get(&1, t0, || true), Some((true, false)));
}

#[tokio::test(start_paused = true)]
async fn the_agents_ceiling_holds_however_many_peers_ask() {
    let limits = Limits::new();
    let admitted = |from: u32| {
        (from..from + 100)
            .filter(|n| limits.admit(peer(*n)).is_ok())
            .count()
    };
    assert_eq!(admitted(0), count(REVIEW_BURST));
    tokio::time::advance(Duration::from_secs(3)).await;
    assert_eq!(admitted(1000), 3 * count(REVIEWS_PER_SECOND));
}

#[tokio::test(start_paused = true)]
async fn one_peer_gets_its_burst_then_its_rate_and_leaves_the_rest_to_others() {
    let limits = Limits::new();
    // 10 requests a second for a minute.
    let mut admitted = 0;
    for _ in 0..=600 {
        if limits.admit(FLOODER).is_ok() {
            admitted += 1;
        }
        tokio::time::advance(Duration::from_millis(100)).await;
    }
    assert_eq!(
        admitted,
        count(PEER_REVIEW_BURST) + count(PEER_REVIEWS_PER_MINUTE)
    );
    // The agent's budget was drawn on only as far as the flood's was: another
    // peer still gets its whole burst.
    let other = (0..100)
        .filter(|_| limits.admit(PROMETHEUS).is_ok())
        .count();
    assert_eq!(other, count(PEER_REVIEW_BURST));
}

#[tokio::test(start_paused = true)]
async fn the_peer_table_is_bounded_and_forgets_peers_whose_budget_refilled() {
    let limits = Limits::new();
    let admitted = (0..u32::try_from(PEERS).expect("small"))
        .filter(|n| limits.admit(peer(*n)).is_ok())
        .count();
    // Past the agent's ceiling each peer's own budget is spent all the same.
    assert_eq!(admitted, count(REVIEW_BURST));
    // Full of peers seen within their refill time: a new one waits.
    assert_eq!(limits.admit(PROMETHEUS), Err(Limit::Peer));
    tokio::time::advance(Duration::from_mins(1)).await;
    assert_eq!(limits.admit(PROMETHEUS), Ok(()));
    assert_eq!(limits.admit(FLOODER), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn a_scraper_is_reviewed_once_then_served_from_the_cache() {
    let api = FakeApi::default();
    api.user("prom", "prometheus", true);
    api.user("nosy", "tenant", false);
    let reviewer = Reviewer::new(api.client(), vec![]);
    let check = |token: &'static str| reviewer.check(token, "/metrics", "get", PROMETHEUS);

    let prometheus = Verdict::Allowed {
        user: "prometheus".to_owned(),
    };
    assert_eq!(check("prom").await, prometheus);
    assert_eq!(check("prom").await, prometheus);
    assert_eq!((api.reviews_of("prom"), api.lock().access_reviews), (1, 1));
    let forbidden = Verdict::Forbidden {
        user: "tenant".to_owned(),
    };
    assert_eq!(check("nosy").await, forbidden);
    assert!(matches!(
        check("made-up").await,
        Verdict::Unauthenticated(_)
    ));
    assert!(matches!(
        check("made-up").await,
        Verdict::Unauthenticated(_)
    ));
    assert_eq!(api.reviews_of("made-up"), 1);
    // A refusal is not served stale: asked again once expired.
    tokio::time::advance(DENIED_TTL).await;
    assert_eq!(check("nosy").await, forbidden);
    assert_eq!(api.lock().access_reviews, 3);
}

#[tokio::test(start_paused = true)]
async fn an_expired_token_is_served_while_reviewed_again_and_refused_once_revoked() {
    let api = FakeApi::default();
    api.user("prom", "prometheus", true);
    let reviewer = Reviewer::new(api.client(), vec![]);
    let check = || reviewer.check("prom", "/metrics", "get", PROMETHEUS);
    assert!(matches!(check().await, Verdict::Allowed { .. }));

    tokio::time::advance(AUTHENTICATED_TTL).await;
    for _ in 0..5 {
        assert!(
            matches!(check().await, Verdict::Allowed { .. }),
            "served while re-reviewed"
        );
    }
    until("the re-review", || api.reviews_of("prom") == 2).await;
    assert_eq!(api.reviews_of("prom"), 2, "one re-review for five scrapes");

    tokio::time::advance(AUTHENTICATED_TTL).await;
    api.revoke("prom");
    assert!(
        matches!(check().await, Verdict::Allowed { .. }),
        "not known yet"
    );
    until("the re-review", || api.reviews_of("prom") == 3).await;
    // Its answer is stored once its task runs on.
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(matches!(check().await, Verdict::Unauthenticated(_)));
}

#[tokio::test(start_paused = true)]
async fn a_stale_answer_outlives_an_api_outage_by_one_ttl_at_most() {
    let api = FakeApi::default();
    api.user("prom", "prometheus", true);
    let reviewer = Reviewer::new(api.client(), vec![]);
    let check = || reviewer.check("prom", "/metrics", "get", PROMETHEUS);
    assert!(matches!(check().await, Verdict::Allowed { .. }));
    api.lock().failing = true;
    tokio::time::advance(AUTHENTICATED_TTL).await;
    for _ in 0..20 {
        assert!(
            matches!(check().await, Verdict::Allowed { .. }),
            "served while the API fails"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    assert!(api.reviews_of("prom") > 2, "re-reviews retried");
    tokio::time::advance(AUTHENTICATED_TTL).await;
    assert!(matches!(check().await, Verdict::Unavailable(_)));
}

#[tokio::test(start_paused = true)]
async fn with_audiences_only_a_token_issued_for_one_of_them_is_accepted() {
    let api = FakeApi::default();
    api.user_for("for-us", "prometheus", true, &["ipshadow"]);
    api.user("for-the-api-server", "prometheus", true);
    let ours = vec!["ipshadow".to_owned(), "https://ipshadow.example".to_owned()];
    let reviewer = Reviewer::new(api.client(), ours.clone());
    let check = |token: &'static str| reviewer.check(token, "/metrics", "get", PROMETHEUS);
    assert!(matches!(check("for-us").await, Verdict::Allowed { .. }));
    assert_eq!(api.lock().asked_audiences, Some(json!(ours)));
    assert!(matches!(
        check("for-the-api-server").await,
        Verdict::Unauthenticated(_)
    ));
    // An authenticator that ignores the audiences vouches for the API
    // server's own: refused.
    api.lock().rules.audience_blind = true;
    api.user_for("blind", "prometheus", true, &["ipshadow"]);
    assert!(matches!(check("blind").await, Verdict::Unauthenticated(_)));

    // Without audiences nothing is asked for: the API server's own.
    api.lock().rules.audience_blind = false;
    let plain = Reviewer::new(api.client(), vec![]);
    let check = |token: &'static str| plain.check(token, "/metrics", "get", PROMETHEUS);
    assert!(matches!(
        check("for-the-api-server").await,
        Verdict::Allowed { .. }
    ));
    assert_eq!(api.lock().asked_audiences, Some(Value::Null));
    assert!(matches!(check("for-us").await, Verdict::Unauthenticated(_)));
}
