//! The traffic book: series across flapping findings, unexplained traffic, and what a pod found after a lookup is given.

use super::*;

const IP: &str = "10.244.4.251";

fn ip() -> IpAddr {
    IP.parse().expect("ip")
}

fn key(pod: &str) -> SeriesKey {
    SeriesKey {
        ip: ip(),
        namespace: "ns".into(),
        pod: pod.into(),
    }
}

fn claim(pod: &str, since: Option<i64>) -> BTreeMap<IpAddr, Claim> {
    BTreeMap::from([(
        ip(),
        Claim {
            key: key(pod),
            since,
        },
    )])
}

fn counters(packets: u64) -> BTreeMap<IpAddr, Counters> {
    BTreeMap::from([(
        ip(),
        Counters {
            packets,
            tcp_syns: packets / 2,
            refused: packets / 2,
            ..Default::default()
        },
    )])
}

fn none() -> BTreeMap<IpAddr, Counters> {
    BTreeMap::new()
}

#[test]
fn counters_survive_a_finding_flapping_and_cleared_series_disappear() {
    let mut book = TrafficBook::default();
    let want = claim("pg", None);
    book.update(&want, &counters(0), &none(), 0);
    book.update(&want, &counters(10), &none(), 1);
    assert_eq!(book.exposed()[0].1.packets, 10);

    // The finding clears: the IP leaves the map with 14 packets counted.
    book.update(&BTreeMap::new(), &none(), &counters(14), 2);
    assert!(book.exposed().is_empty());

    // It comes back: the map restarts at zero, the series continues at 14.
    book.update(&want, &counters(0), &none(), 3);
    assert_eq!(book.exposed()[0].1.packets, 14);
    book.update(&want, &counters(6), &none(), 4);
    let (k, t) = &book.exposed()[0];
    assert_eq!(
        (k.pod.as_str(), t.packets, t.tcp_syns, t.refused),
        ("pg", 20, 10, 10)
    );
}

#[test]
fn a_new_pod_on_the_same_ip_starts_its_own_series() {
    let mut book = TrafficBook::default();
    book.update(&claim("a", None), &counters(0), &none(), 0);
    book.update(&claim("a", None), &counters(8), &none(), 1);
    // Pod a is replaced by pod b holding the same IP; the map entry stays.
    book.update(&claim("b", None), &counters(8), &none(), 2);
    book.update(&claim("b", None), &counters(11), &none(), 3);
    let exposed = book.exposed();
    assert_eq!(exposed.len(), 1);
    assert_eq!((exposed[0].0.pod.as_str(), exposed[0].1.packets), ("b", 3));
}

#[test]
fn traffic_no_series_claims_is_unexplained_once_per_burst() {
    let mut book = TrafficBook::default();
    let nobody = BTreeMap::new();
    book.update(&nobody, &counters(0), &none(), 100);
    assert!(book.unexplained(&nobody).is_empty(), "quiet so far");
    book.update(&nobody, &counters(3), &none(), 110);
    assert_eq!(book.unexplained(&nobody), BTreeMap::from([(ip(), 1)]));
    book.update(&nobody, &counters(3), &none(), 120);
    assert_eq!(
        book.unexplained(&nobody),
        BTreeMap::from([(ip(), 1)]),
        "no new traffic, no new burst"
    );
    book.update(&nobody, &counters(5), &none(), 130);
    assert_eq!(book.unexplained(&nobody), BTreeMap::from([(ip(), 2)]));
    assert!(book.exposed().is_empty(), "no series without a pod");
    // Unmapped: forgotten.
    book.update(&nobody, &none(), &counters(5), 140);
    assert!(book.unexplained(&nobody).is_empty());
}

#[test]
fn a_pod_found_after_traffic_gets_what_came_since_it_existed_and_nothing_before() {
    // The address is quiet at 120 with 4 packets (the node's own traffic
    // before), then 3 more arrive; a lookup finds a pod created at 115.
    let mut book = TrafficBook::default();
    let nobody = BTreeMap::new();
    book.update(&nobody, &counters(0), &none(), 100);
    book.update(&nobody, &counters(4), &none(), 110);
    book.update(&nobody, &counters(4), &none(), 120);
    book.update(&nobody, &counters(7), &none(), 130);
    book.update(&claim("pg", Some(115)), &counters(7), &none(), 131);
    assert_eq!(book.exposed()[0].1.packets, 3, "the traffic since 120");
    assert!(book.unexplained(&claim("pg", Some(115))).is_empty());

    // The same history, but the pod was created at 125: after the quiet
    // moment, so the 3 packets may predate it: none are its.
    let mut book = TrafficBook::default();
    book.update(&nobody, &counters(0), &none(), 100);
    book.update(&nobody, &counters(4), &none(), 120);
    book.update(&nobody, &counters(4), &none(), 121);
    book.update(&nobody, &counters(7), &none(), 130);
    book.update(&claim("pg", Some(125)), &counters(7), &none(), 131);
    assert_eq!(book.exposed()[0].1.packets, 0);
    book.update(&claim("pg", Some(125)), &counters(9), &none(), 140);
    assert_eq!(book.exposed()[0].1.packets, 2, "what came after the claim");

    // The pod goes; new traffic is unexplained again, as a new burst.
    let before = book.unexplained(&nobody)[&ip()];
    book.update(&nobody, &counters(9), &none(), 150);
    book.update(&nobody, &counters(12), &none(), 160);
    assert_eq!(book.unexplained(&nobody)[&ip()], before + 1);
    assert!(book.exposed().is_empty());
}

#[test]
fn a_quiet_refresh_between_the_burst_and_the_lookups_answer_keeps_the_burst_the_pods() {
    // Quiet at 100; a burst of 6 packets seen at 101; another refresh (a
    // reconcile's) at 101 sees nothing new; then the lookup finds a pod
    // created at 99: the burst is its.
    let mut book = TrafficBook::default();
    let nobody = BTreeMap::new();
    book.update(&nobody, &counters(0), &none(), 100);
    book.update(&nobody, &counters(6), &none(), 101);
    book.update(&nobody, &counters(6), &none(), 101);
    book.update(&nobody, &counters(6), &none(), 102);
    book.update(&claim("pg", Some(99)), &counters(6), &none(), 102);
    assert_eq!(book.exposed()[0].1.packets, 6);
    assert_eq!(book.exposed()[0].1.refused, 3);

    // A burst in two refreshes keeps the mark from before its first one.
    let mut book = TrafficBook::default();
    book.update(&nobody, &counters(0), &none(), 100);
    book.update(&nobody, &counters(2), &none(), 101);
    book.update(&nobody, &counters(6), &none(), 101);
    book.update(&nobody, &counters(6), &none(), 105);
    book.update(&claim("pg", Some(100)), &counters(6), &none(), 105);
    assert_eq!(book.exposed()[0].1.packets, 6);
}

#[test]
fn a_churn_of_pods_keeps_at_most_the_newest_retired_series() {
    let mut book = TrafficBook::default();
    // Each round a new pod holds the IP, sends traffic, and goes.
    for i in 0..(RETIRED_MAX + 50) {
        let pod = format!("p{i}");
        let now = i64::try_from(i).expect("small");
        book.update(&claim(&pod, None), &counters(0), &none(), now);
        book.update(&claim(&pod, None), &counters(2), &none(), now);
        book.update(&BTreeMap::new(), &none(), &counters(2), now);
    }
    assert_eq!(book.retired.len(), RETIRED_MAX);
    assert!(
        !book.retired.contains_key(&key("p0")),
        "the oldest is forgotten"
    );
    assert!(
        book.retired
            .contains_key(&key(&format!("p{}", RETIRED_MAX + 49)))
    );
}
