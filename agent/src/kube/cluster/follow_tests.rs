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
