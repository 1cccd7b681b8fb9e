use super::*;

/// The sandbox Events' and kube-ovn records' pace.
const EACH: Pace = Pace::EachKey {
    first: Duration::from_mins(1),
    longest: Duration::from_mins(15),
    per_round: 3,
    tick: Duration::from_secs(10),
};

/// The bridge ranges' owners' pace (no spread).
const RANGES: Pace = Pace::AllKeys {
    refresh: Duration::from_mins(10),
    gap: Duration::from_mins(1),
    quiet_doublings: 7,
    failure_doublings: 5,
    spread: Duration::ZERO,
};

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("p{i}")).collect()
}

#[test]
fn each_key_is_asked_again_later_and_later_and_few_at_a_time() {
    let pods = keys(5);
    let t0 = Instant::now();
    let mut s = Pacer::new(EACH, t0);
    assert_eq!(s.due(&pods, t0).len(), 3);
    assert_eq!(s.due(&pods, t0).len(), 2, "the rest next tick");
    assert!(s.due(&pods, t0 + Duration::from_secs(30)).is_empty());
    assert_eq!(s.due(&pods, t0 + Duration::from_mins(1)).len(), 3);
    // After 1, 2, 4, 8 and 15 minutes the wait stays at 15.
    let one = keys(1);
    let mut s = Pacer::new(EACH, t0);
    let (mut at, mut waits) = (t0, Vec::new());
    for _ in 0..7 {
        let next = s.waits.next("p0").map_or(at, Instant::from_std);
        waits.push(next.saturating_duration_since(at).as_secs() / 60);
        at = next;
        assert_eq!(s.due(&one, at).len(), 1);
    }
    assert_eq!(waits, vec![0, 1, 2, 4, 8, 15, 15]);
    // A key no longer wanted is forgotten.
    assert!(s.due(&[], at).is_empty() && !s.waits.contains("p0"));
}

#[test]
fn all_keys_are_asked_again_after_the_refresh_and_less_often_while_nothing_is_found_or_it_fails() {
    let t = Instant::now();
    let wanted = keys(1);
    let mut first = Pacer::new(RANGES, t);
    first.not_before = t + Duration::from_secs(90);
    assert!(first.due(&wanted, t).is_empty(), "the start's spread");
    assert_eq!(
        first.due(&wanted, t + Duration::from_secs(90)),
        std::slice::from_ref(&wanted)
    );
    let mut kept = Pacer::new(RANGES, t);
    assert_eq!(kept.due(&wanted, t).len(), 1);
    kept.answered(&wanted, true, t);
    assert!(kept.due(&wanted, t + Duration::from_secs(599)).is_empty());
    assert_eq!(kept.wake(&wanted, t), t + Duration::from_mins(10));
    // A new key wanted: asked, but not within the gap of the last ask.
    let changed = keys(2);
    assert!(kept.due(&changed, t + Duration::from_secs(30)).is_empty());
    assert_eq!(kept.wake(&changed, t), t + Duration::from_mins(1));
    // Nothing found: 10, 20, 40 … minutes, to 1,280 at most.
    let quiet: Vec<u64> = (0..9u32)
        .map(|q| {
            let mut p = Pacer::new(RANGES, t);
            p.quiet = q.saturating_sub(1);
            p.answered(&wanted, q == 0, t);
            p.last = Some(t);
            (p.wake(&wanted, t) - t).as_secs() / 60
        })
        .collect();
    assert_eq!(quiet, [10, 20, 40, 80, 160, 320, 640, 1280, 1280]);
    // Failing: 1, 2, 4 … minutes, to 32, whatever else holds.
    let mut failing = Pacer::new(RANGES, t);
    failing.last = Some(t);
    let waits: Vec<u64> = (1..9)
        .map(|failures| {
            failing.failures = failures;
            (failing.wake(&wanted, t) - t).as_secs() / 60
        })
        .collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 32, 32]);
}

/// The lookups of who holds an address's pace.
const HOLDERS: Pace = Pace::OnNews {
    first: FIRST_WAIT,
    longest: LONGEST_WAIT,
    burst: 5,
    per_minute: 5,
};
const FIRST_WAIT: Duration = Duration::from_mins(1);
const LONGEST_WAIT: Duration = Duration::from_mins(15);
/// How often a token comes back (5 a minute).
const REFILL: Duration = Duration::from_secs(12);

fn ip(last: u8) -> std::net::IpAddr {
    std::net::IpAddr::from([10, 244, 4, last])
}

fn noise(pairs: &[(u8, u64)]) -> BTreeMap<std::net::IpAddr, u64> {
    pairs.iter().map(|(l, n)| (ip(*l), *n)).collect()
}

/// The asks `p` makes at `t` (the paused clock moved on to it) of the keys of
/// `news`; `followed`: none of them may be asked.
async fn due(
    p: &mut Pacer<std::net::IpAddr>,
    t: Instant,
    news: &BTreeMap<std::net::IpAddr, u64>,
    followed: bool,
) -> Vec<std::net::IpAddr> {
    tokio::time::advance(t.saturating_duration_since(Instant::now())).await;
    p.news = if followed {
        BTreeMap::new()
    } else {
        news.clone()
    };
    p.due(&news.keys().copied().collect::<Vec<_>>(), t).concat()
}

/// When `p` next has an ask due of the keys of `news`.
fn next_due(p: &mut Pacer<std::net::IpAddr>, news: &BTreeMap<std::net::IpAddr, u64>) -> Instant {
    p.news = news.clone();
    p.wake_on_news(Instant::now())
}

#[tokio::test(start_paused = true)]
async fn a_key_with_news_is_asked_once_and_less_often_while_nothing_is_found() {
    let t0 = Instant::now();
    let mut p = Pacer::new(HOLDERS, t0);
    assert_eq!(due(&mut p, t0, &noise(&[(251, 1)]), false).await, [ip(251)]);
    p.answered(&[ip(251)], false, t0);
    let none = |v: Vec<_>| v.is_empty();
    assert!(
        none(due(&mut p, t0, &noise(&[(251, 1)]), false).await),
        "no news"
    );
    let t = t0 + Duration::from_secs(30);
    assert!(
        none(due(&mut p, t, &noise(&[(251, 2)]), false).await),
        "news, but within the first wait"
    );
    assert_eq!(next_due(&mut p, &noise(&[(251, 2)])), t0 + FIRST_WAIT);
    let t1 = t0 + FIRST_WAIT;
    assert_eq!(due(&mut p, t1, &noise(&[(251, 2)]), false).await, [ip(251)]);
    p.answered(&[ip(251)], false, t1);
    // The wait doubles while nothing is found, up to its ceiling.
    let t = t1 + FIRST_WAIT;
    assert!(none(due(&mut p, t, &noise(&[(251, 3)]), false).await));
    let mut t = t1 + FIRST_WAIT * 2;
    assert_eq!(due(&mut p, t, &noise(&[(251, 3)]), false).await, [ip(251)]);
    for n in 4..20 {
        p.answered(&[ip(251)], false, t);
        t += LONGEST_WAIT;
        let asked = due(&mut p, t, &noise(&[(251, n)]), false).await;
        assert_eq!(asked, [ip(251)], "{n}");
    }
    // Keys without news to hear (a pod found on them is followed) are not asked.
    let t = t + LONGEST_WAIT;
    assert!(none(due(&mut p, t, &noise(&[(251, 99)]), true).await));
}

#[tokio::test(start_paused = true)]
async fn across_keys_with_news_a_token_bucket_bounds_the_asks() {
    let t0 = Instant::now();
    let mut p = Pacer::new(HOLDERS, t0);
    let many: BTreeMap<_, _> = (1..=50).map(|i| (ip(i), 1)).collect();
    assert_eq!(due(&mut p, t0, &many, false).await.len(), 5, "the burst");
    assert!(due(&mut p, t0, &many, false).await.is_empty());
    assert_eq!(next_due(&mut p, &many), t0 + REFILL);
    // A minute: five more, whatever the number of keys.
    let mut got = 0;
    for i in 1..=5 {
        got += due(&mut p, t0 + REFILL * i, &many, false).await.len();
    }
    assert_eq!(got, 5);
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_found_something_starts_the_waits_over() {
    let t0 = Instant::now();
    let mut p = Pacer::new(HOLDERS, t0);
    for i in 0..4u32 {
        let t = t0 + LONGEST_WAIT * i;
        let news = noise(&[(9, u64::from(i) + 1)]);
        assert_eq!(due(&mut p, t, &news, false).await, [ip(9)]);
        p.answered(&[ip(9)], i == 3, t);
    }
    let t = t0 + LONGEST_WAIT * 3;
    let news = noise(&[(9, 10)]);
    let early = due(&mut p, t + Duration::from_secs(59), &news, false).await;
    assert!(early.is_empty());
    assert_eq!(due(&mut p, t + FIRST_WAIT, &news, false).await, [ip(9)]);
}
