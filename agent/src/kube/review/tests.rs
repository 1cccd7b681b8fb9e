use std::net::Ipv4Addr;

use super::{cache::Cache, fake::FakeApi, limits::Bucket, *};

const PROMETHEUS: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));

#[test]
fn cached_answers_expire_and_the_cache_stays_bounded() {
    let t0 = Instant::now();
    let mut c = Cache::<u32, bool>::new();
    c.put(1, true, Duration::from_secs(10), t0);
    assert_eq!(c.get(&1, t0 + Duration::from_secs(9)), Some(true));
    assert_eq!(c.get(&1, t0 + Duration::from_secs(10)), None);
    for k in 0..1000 {
        c.put(k, true, Duration::from_secs(u64::from(k) + 1), t0);
    }
    assert_eq!(c.entries.len(), CACHE_ENTRIES);
    // The ones nearest expiry went; the newest stay.
    assert_eq!(c.get(&999, t0), Some(true));
    assert_eq!(c.get(&0, t0), None);
}

#[test]
fn reviews_are_limited_to_a_burst_then_a_rate() {
    let t0 = Instant::now();
    let mut b = Bucket::new(t0);
    let burst = (0..100).filter(|_| b.take(t0)).count();
    assert_eq!(burst, usize::try_from(REVIEW_BURST).expect("small"));
    let later = (0..100)
        .filter(|_| b.take(t0 + Duration::from_secs(3)))
        .count();
    assert_eq!(
        later,
        3 * usize::try_from(REVIEWS_PER_SECOND).expect("small")
    );
}

#[tokio::test(start_paused = true)]
async fn a_scraper_is_reviewed_once_then_served_from_the_cache_until_it_expires() {
    let api = FakeApi::default();
    api.user("prom", "prometheus", true);
    api.user("nosy", "tenant", false);
    let reviewer = Reviewer::new(api.client());
    let check = |token: &'static str| reviewer.check(token, "/metrics", "get", PROMETHEUS);

    let prometheus = Verdict::Allowed {
        user: "prometheus".to_owned(),
    };
    assert_eq!(check("prom").await, prometheus);
    assert_eq!(check("prom").await, prometheus);
    assert_eq!((api.reviews_of("prom"), api.lock().access_reviews), (1, 1));
    assert_eq!(
        check("nosy").await,
        Verdict::Forbidden {
            user: "tenant".to_owned()
        }
    );
    assert!(matches!(
        check("made-up").await,
        Verdict::Unauthenticated(_)
    ));
    assert!(matches!(
        check("made-up").await,
        Verdict::Unauthenticated(_)
    ));
    assert_eq!(api.reviews_of("made-up"), 1);

    tokio::time::advance(AUTHENTICATED_TTL).await;
    assert_eq!(check("prom").await, prometheus);
    assert_eq!(api.reviews_of("prom"), 2, "asked again once expired");

    api.lock().failing = true;
    assert!(matches!(check("new").await, Verdict::Unavailable(_)));
}
