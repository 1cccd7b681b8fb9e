//! The embedded eBPF classifier, loaded and attached to `lo` of a fresh
//! network namespace, counts host traffic to a shadowed IP (and nothing else).
#![allow(clippy::unwrap_used)]

use std::{
    net::{IpAddr, SocketAddr, TcpStream},
    time::Duration,
};

use ipshadow::ebpf::Observer;
use ipshadow_tests::{can_run_netns_tests, netns::NetNs};

const ROUTER: &str = "10.244.4.251";
/// Nothing listens here: every connect is refused with a RST by the local stack.
const CLOSED_PORT: u16 = 5432;

fn refused_connects(ip: &str, n: usize) {
    let addr = SocketAddr::new(ip.parse().unwrap(), CLOSED_PORT);
    for _ in 0..n {
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap_err();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "{addr}: {err}"
        );
    }
}

#[test]
fn classifier_on_lo_counts_syns_and_rsts_of_a_shadowed_ip_only() {
    if !can_run_netns_tests("classifier_on_lo_counts_syns_and_rsts_of_a_shadowed_ip_only") {
        return;
    }
    let ns = NetNs::new("ebpf");
    ns.ip(&[
        "link",
        "add",
        "cilium_host",
        "type",
        "veth",
        "peer",
        "name",
        "cilium_net",
    ]);
    ns.ip(&["addr", "add", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
    ns.ip(&["link", "set", "cilium_host", "up"]);
    let _inside = ns.enter();

    let mut obs = Observer::load().unwrap();
    obs.attach("lo").unwrap();
    let router: IpAddr = ROUTER.parse().unwrap();
    obs.watch(router).unwrap();
    assert_eq!(obs.counters(router).unwrap().unwrap().packets_to, 0);

    // 30 "kubelet probes" to the pod that has the router IP: each SYN is
    // delivered locally and refused.
    refused_connects(ROUTER, 30);
    let c = obs.counters(router).unwrap().unwrap();
    assert_eq!(c.tcp_syns_to, 30, "{c:?}");
    assert_eq!(c.tcp_rsts_from, 30, "{c:?}");
    // SYN and RST both go to the router IP (the local stack answers itself).
    assert_eq!(c.packets_to, 60, "{c:?}");
    assert!(c.bytes_to > 0 && c.last_seen_ns > 0, "{c:?}");

    // Traffic to an IP that is not in the map is not counted anywhere.
    refused_connects("127.0.0.1", 10);
    assert_eq!(obs.counters(router).unwrap().unwrap(), c);
    assert!(
        obs.counters("127.0.0.1".parse().unwrap())
            .unwrap()
            .is_none()
    );

    // Removing the IP returns its last counters and stops counting it.
    let last = obs.unwatch(router).unwrap().unwrap();
    assert_eq!(last, c);
    refused_connects(ROUTER, 5);
    assert!(obs.counters(router).unwrap().is_none());
}
