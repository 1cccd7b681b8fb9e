//! The exposition: every family in both formats, and what a scrape without the names shows.

use super::*;
use crate::{
    detect::{Owner, PodRef, PodSite, Remedy, Role, Scope},
    inventory::{DeadEnd, IpSource, Source},
    report::traffic::{Counters, SeriesKey},
};

fn site() -> PodSite {
    site_of("ns", "p")
}

fn site_of(namespace: &str, name: &str) -> PodSite {
    PodSite {
        pod: PodRef {
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        },
        node: "n".into(),
        ip_source: IpSource::Status,
        created: None,
        controller: None,
    }
}

#[test]
fn findings_and_traffic_are_exposed_in_both_formats() {
    let shared = Arc::new(std::sync::Mutex::new(FindingsView::default()));
    let source = Arc::clone(&shared);
    let m = Exposition::new(
        Registry::default(),
        Box::new(move || source.lock().expect("lock").clone()),
    );
    {
        let mut v = shared.lock().expect("lock");
        let owner = Owner {
            node: "n".into(),
            role: Role::Router,
            device: Some("cilium_host".into()),
            source: Source::SpecAddresses,
        };
        v.findings = Arc::new(vec![
            Finding::collision(
                Scope::SameNode,
                "10.0.0.1".parse().expect("ip"),
                owner,
                site(),
                (None, None),
                Remedy::ReallocatePod { node: "n".into() },
            ),
            Finding::blackhole(
                "10.0.0.2".parse().expect("ip"),
                site(),
                DeadEnd::Blackhole,
                None,
                false,
            ),
        ]);
        v.traffic = Arc::new(vec![(
            SeriesKey {
                ip: "10.0.0.1".parse().expect("ip"),
                namespace: "ns".into(),
                pod: "p".into(),
            },
            Counters {
                packets: 4,
                bytes: 256,
                tcp_syns: 2,
                refused: 2,
                ..Counters::default()
            },
        )]);
    }
    let om = m.encode(true, Names::Shown).expect("encodes");
    assert!(om.ends_with("# EOF\n"), "{om}");
    for line in [
        "ipshadow_collisions{kind=\"RouterIPCollision\",scope=\"same-node\"} 1",
        "ipshadow_collisions{kind=\"HealthIPCollision\",scope=\"cross-node\"} 0",
        "ipshadow_host_route_blackholes 1",
        "ipshadow_allocator_overlaps 0",
        "ipshadow_ipam_problems{kind=\"PodIPExhaustion\"} 0",
        "ipshadow_ipam_problems{kind=\"IngressIPNotMasqueraded\"} 0",
        "ipshadow_refused_connections_total{ip=\"10.0.0.1\",namespace=\"ns\",pod=\"p\"} 2",
        "ipshadow_blackholed_bytes_total{ip=\"10.0.0.1\",namespace=\"ns\",pod=\"p\"} 256",
        "ipshadow_build_info{version=",
    ] {
        assert!(om.contains(line), "{line} missing in\n{om}");
    }
    // The commit built: a git hash here (a checkout), "unknown" outside git.
    let revision = om
        .lines()
        .find_map(|l| l.split("revision=\"").nth(1)?.split('"').next())
        .expect("ipshadow_build_info has a revision");
    assert!(
        revision == "unknown"
            || (revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit())),
        "revision {revision:?}"
    );
    let text = m.encode(false, Names::Shown).expect("encodes");
    // Prometheus text names counter families with their _total suffix.
    assert!(
        text.contains("# TYPE ipshadow_refused_connections_total counter"),
        "{text}"
    );
    assert!(!text.contains("# EOF"));

    // A cleared finding's series is gone on the next scrape.
    shared.lock().expect("lock").findings = Arc::default();
    let om = m.encode(true, Names::Shown).expect("encodes");
    assert!(!om.contains("ipshadow_collision_info{"), "{om}");
    assert!(om.contains("ipshadow_collisions{kind=\"RouterIPCollision\",scope=\"same-node\"} 0"));
}

fn router_owner() -> Owner {
    Owner {
        node: "n".into(),
        role: Role::Router,
        device: Some("cilium_host".into()),
        source: Source::SpecAddresses,
    }
}

fn traffic_of(ip: &str, namespace: &str, pod: &str, packets: u64) -> (SeriesKey, Counters) {
    (
        SeriesKey {
            ip: ip.parse().expect("ip"),
            namespace: namespace.into(),
            pod: pod.into(),
        },
        Counters {
            packets,
            bytes: packets * 64,
            tcp_syns: packets,
            refused: packets / 2,
            ..Counters::default()
        },
    )
}

/// Two tenants' pods on one router IP (one of them still starting), a third
/// pod's blackholed route, and host traffic to both addresses.
fn two_tenants() -> Exposition {
    let view = FindingsView {
        findings: Arc::new(vec![
            Finding::collision(
                Scope::SameNode,
                "10.0.0.1".parse().expect("ip"),
                router_owner(),
                site_of("tenant-a", "postgres-0"),
                (None, None),
                Remedy::ReallocatePod { node: "n".into() },
            ),
            Finding::collision(
                Scope::SameNode,
                "10.0.0.1".parse().expect("ip"),
                router_owner(),
                site_of("tenant-b", "web-7"),
                (None, None),
                Remedy::ReallocatePod { node: "n".into() },
            ),
            Finding::blackhole(
                "10.0.0.2".parse().expect("ip"),
                site_of("tenant-c", "cache-1"),
                DeadEnd::Blackhole,
                None,
                false,
            ),
        ]),
        traffic: Arc::new(vec![
            traffic_of("10.0.0.1", "tenant-a", "postgres-0", 4),
            traffic_of("10.0.0.1", "tenant-b", "web-7", 6),
            traffic_of("10.0.0.2", "tenant-c", "cache-1", 1),
        ]),
        impacts: Arc::default(),
    };
    Exposition::new(Registry::default(), Box::new(move || view.clone()))
}

/// The sample lines of `family` (its name up to the labels).
fn samples<'a>(text: &'a str, family: &str) -> Vec<&'a str> {
    let open = format!("{family}{{");
    text.lines().filter(|l| l.starts_with(&open)).collect()
}

#[test]
fn without_names_no_tenant_is_named_and_every_finding_stays_by_address_and_kind() {
    let m = two_tenants();
    for openmetrics in [true, false] {
        let text = m.encode(openmetrics, Names::Omitted).expect("encodes");
        for name in [
            "tenant-a",
            "tenant-b",
            "tenant-c",
            "postgres-0",
            "web-7",
            "cache-1",
        ] {
            assert!(!text.contains(name), "{name} named in\n{text}");
        }
        // The two pods on 10.0.0.1 left one series alike: it is written once, at 1.
        let info = samples(&text, "ipshadow_collision_info");
        assert_eq!(info.len(), 2, "{info:#?}");
        for (kind, ip) in [
            ("RouterIPCollision", "10.0.0.1"),
            ("HostRouteBlackhole", "10.0.0.2"),
        ] {
            let line = info
                .iter()
                .find(|l| l.contains(&format!("kind=\"{kind}\"")))
                .unwrap_or_else(|| panic!("no {kind} in {info:#?}"));
            assert!(line.contains(&format!("ip=\"{ip}\"")), "{line}");
            assert!(line.contains("namespace=\"\",pod=\"\""), "{line}");
            assert!(line.ends_with(" 1"), "{line}");
        }
        // The counts are the findings', names or not.
        assert!(
            text.contains("ipshadow_collisions{kind=\"RouterIPCollision\",scope=\"same-node\"} 2"),
            "{text}"
        );
        // Counters of one address are summed; each address keeps its own.
        let packets = samples(&text, "ipshadow_blackholed_packets_total");
        assert_eq!(
            packets,
            [
                "ipshadow_blackholed_packets_total{ip=\"10.0.0.1\",namespace=\"\",pod=\"\"} 10",
                "ipshadow_blackholed_packets_total{ip=\"10.0.0.2\",namespace=\"\",pod=\"\"} 1",
            ],
            "{text}"
        );
        assert!(
            text.contains(
                "ipshadow_blackholed_bytes_total{ip=\"10.0.0.1\",namespace=\"\",pod=\"\"} 640"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "ipshadow_refused_connections_total{ip=\"10.0.0.1\",namespace=\"\",pod=\"\"} 5"
            ),
            "{text}"
        );
    }
}

#[test]
fn with_names_each_pod_has_its_own_series() {
    let text = two_tenants().encode(true, Names::Shown).expect("encodes");
    let info = samples(&text, "ipshadow_collision_info");
    assert_eq!(info.len(), 3, "{info:#?}");
    for (namespace, pod, packets) in [
        ("tenant-a", "postgres-0", 4),
        ("tenant-b", "web-7", 6),
        ("tenant-c", "cache-1", 1),
    ] {
        let names = format!("namespace=\"{namespace}\",pod=\"{pod}\"");
        assert_eq!(
            info.iter().filter(|l| l.contains(&names)).count(),
            1,
            "{info:#?}"
        );
        assert!(
            samples(&text, "ipshadow_blackholed_packets_total")
                .iter()
                .any(|l| l.contains(&names) && l.ends_with(&format!(" {packets}"))),
            "{text}"
        );
    }
}
