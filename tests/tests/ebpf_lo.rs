//! The embedded eBPF classifier, loaded and attached to `lo` of a fresh
//! network namespace, counts host traffic to a shadowed IP (and nothing else).
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{
    net::{IpAddr, SocketAddr, TcpStream},
    time::Duration,
};

use ipshadow::ebpf::{AttachMode, Observer, Ownership};
use ipshadow_tests::{
    can_run_netns_tests, kernel_at_least,
    lab::{ROUTER, wait_for},
    netns::{NetNs, attached_programs},
};

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

fn node_with_router_ip(tag: &str) -> NetNs {
    let ns = NetNs::new(tag);
    ns.add_router_device(ROUTER);
    ns
}

/// Probes the router IP and checks counters and samples; the same in either attach mode.
fn counts_syns_rsts_and_samples(mode: AttachMode) {
    let ns = node_with_router_ip("ebpf");
    let inside = ns.enter();
    let mut obs = Observer::load().unwrap();
    assert_eq!(
        obs.attach("lo", mode, Ownership::Shared).unwrap(),
        0,
        "nothing stale in a fresh namespace"
    );
    let router: IpAddr = ROUTER.parse().unwrap();
    obs.watch(router).unwrap();
    assert_eq!(obs.counters(router).unwrap().unwrap().packets, 0);
    drop(inside);
    assert_eq!(attached_programs(&ns, "lo", "ipshadow_lo"), 1, "{mode:?}");
    let inside_again = ns.enter();

    // 30 "kubelet probes" to the pod that has the router IP: each SYN is
    // delivered locally and refused.
    refused_connects(ROUTER, 30);
    let c = obs.counters(router).unwrap().unwrap();
    assert_eq!(c.tcp_syns, 30, "{c:?}");
    assert_eq!(c.refused, 30, "{c:?}");
    // SYN and RST both have the router IP as destination (the host talks to
    // itself). Exactly 60: lo's ingress hook sees each looped-back packet once,
    // in both directions of the exchange.
    assert_eq!(c.packets, 60, "{c:?}");
    assert!(c.bytes >= 60 * 40, "{c:?}");

    // Every SYN was either sampled to the ring buffer or held back by the rate limit.
    let (samples, bad) = obs.drain_samples();
    assert_eq!(bad, 0);
    assert_eq!(samples.len() as u64, c.samples_sent, "{c:?}");
    assert_eq!(c.samples_sent + c.samples_dropped, 30, "{c:?}");
    assert!(c.samples_sent >= 1);
    let s = &samples[0];
    assert_eq!(
        (s.dst, s.dport, s.protocol, s.tcp_flags.as_str()),
        (router, CLOSED_PORT, "tcp", "SYN")
    );

    // Traffic to an IP that is not in the map is not counted anywhere.
    refused_connects("127.0.0.1", 10);
    assert_eq!(obs.counters(router).unwrap().unwrap(), c);
    assert!(
        obs.counters("127.0.0.1".parse().unwrap())
            .unwrap()
            .is_none()
    );
    assert!(obs.drain_samples().0.is_empty());

    // Removing the IP returns its last counters and stops counting it.
    let last = obs.unwatch(router).unwrap().unwrap();
    assert_eq!(last, c);
    refused_connects(ROUTER, 5);
    assert!(obs.counters(router).unwrap().is_none());
    assert!(obs.drain_samples().0.is_empty());

    // Dropping the observer detaches it.
    drop(obs);
    drop(inside_again);
    // The link goes when its last fd closes, and a process another test
    // forks at that moment holds a copy until it execs.
    wait_for(&format!("{mode:?} detached"), ipshadow_tests::HANG, || {
        (attached_programs(&ns, "lo", "ipshadow_lo") == 0).then_some(())
    });
}

#[test]
fn tcx_classifier_counts_syns_rsts_and_samples_of_a_shadowed_ip_only() {
    let test = "tcx_classifier_counts_syns_rsts_and_samples_of_a_shadowed_ip_only";
    if can_run_netns_tests(test) && kernel_at_least(6, 6, test, "TCX") {
        counts_syns_rsts_and_samples(AttachMode::Tcx);
    }
}

#[test]
fn legacy_tc_classifier_counts_the_same() {
    if can_run_netns_tests("legacy_tc_classifier_counts_the_same") {
        counts_syns_rsts_and_samples(AttachMode::Netlink);
    }
}

#[test]
fn a_udp_flood_is_rate_limited_in_the_kernel() {
    if !can_run_netns_tests("a_udp_flood_is_rate_limited_in_the_kernel") {
        return;
    }
    let ns = node_with_router_ip("ebpfrl");
    let _inside = ns.enter();
    let mut obs = Observer::load().unwrap();
    obs.attach("lo", AttachMode::Auto, Ownership::Shared)
        .unwrap();
    let router: IpAddr = ROUTER.parse().unwrap();
    obs.watch(router).unwrap();
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..2000 {
        // Unanswered: nothing listens, the ICMP port-unreachable goes back to 127.0.0.1.
        let _ = sock.send_to(b"probe", (ROUTER, 53));
    }
    let c = obs.counters(router).unwrap().unwrap();
    assert_eq!(c.udp, 2000, "{c:?}");
    let cpus = aya::util::nr_cpus().unwrap() as u64;
    // At most 16 samples per CPU per one-second window; the loop may straddle a window edge.
    assert!(c.samples_sent <= 2 * 16 * cpus, "{c:?}");
    assert_eq!(c.samples_sent + c.samples_dropped, 2000, "{c:?}");
    assert_eq!(obs.drain_samples().0.len() as u64, c.samples_sent);
}

/// The router's IPv6 address in these tests.
const ROUTER6: &str = "fd00:10:244:4::1f";

#[test]
fn fragments_extension_headers_and_gso_are_counted_as_on_the_wire() {
    if !can_run_netns_tests("fragments_extension_headers_and_gso_are_counted_as_on_the_wire") {
        return;
    }
    let ns = node_with_router_ip("ebpffrag");
    ns.ip(&[
        "addr",
        "add",
        &format!("{ROUTER6}/128"),
        "dev",
        "cilium_host",
        "nodad",
    ]);
    // An Ethernet-sized MTU on lo: big datagrams are fragmented, TCP is sent as
    // GSO super-packets of many MSS-sized segments.
    ns.ip(&["link", "set", "lo", "mtu", "1500"]);
    let _inside = ns.enter();
    let mut obs = Observer::load().unwrap();
    obs.attach("lo", AttachMode::Auto, Ownership::Shared)
        .unwrap();
    let (v4, v6): (IpAddr, IpAddr) = (ROUTER.parse().unwrap(), ROUTER6.parse().unwrap());
    obs.watch(v4).unwrap();
    obs.watch(v6).unwrap();

    // One 4,000-byte UDP datagram each way: 3 fragments on the wire, one UDP
    // header (the others carry payload where a header would be).
    let big = vec![0x5a_u8; 4000];
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.send_to(&big, (ROUTER, 53)).unwrap();
    let sock6 = std::net::UdpSocket::bind("[::1]:0").unwrap();
    sock6.send_to(&big, (ROUTER6, 53)).unwrap();
    for ip in [v4, v6] {
        let c = obs.counters(ip).unwrap().unwrap();
        assert_eq!((c.packets, c.udp, c.icmp), (3, 1, 0), "{ip}: {c:?}");
        // Only the first fragment is a flow to sample.
        assert_eq!(c.samples_sent + c.samples_dropped, 1, "{ip}: {c:?}");
    }
    let (samples, bad) = obs.drain_samples();
    assert_eq!(bad, 0);
    assert!(
        samples.iter().all(|s| s.dport == 53 && s.protocol == "udp"),
        "{samples:?}"
    );

    // A megabyte over TCP to the router IP: counted in segments, not skbs.
    let server = std::net::TcpListener::bind((ROUTER, 7000)).unwrap();
    let sink = std::thread::spawn(move || {
        let (mut s, _) = server.accept().unwrap();
        std::io::copy(&mut s, &mut std::io::sink()).unwrap()
    });
    let before = obs.counters(v4).unwrap().unwrap();
    let client = std::net::TcpStream::connect((ROUTER, 7000)).unwrap();
    {
        use std::io::Write as _;
        let mut client = client;
        client.write_all(&vec![7u8; 1 << 20]).unwrap();
    }
    let got = sink.join().unwrap();
    assert_eq!(got, 1 << 20);
    let c = obs.counters(v4).unwrap().unwrap();
    let packets = c.packets - before.packets;
    // At least one packet per MSS-sized segment (the ACKs, from the router IP
    // to itself, come on top).
    assert!(
        packets >= (1 << 20) / 1500,
        "{packets} packets counted for 1 MiB at MTU 1500: GSO super-packets counted as one"
    );
}
