//! The agent's HTTP endpoints under a slow-header flood: every connection is
//! closed by the server, the probes' own listener keeps answering, the memory
//! stays bounded; and one client holding all it may cannot starve another.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{
    io::{Read as _, Write as _},
    net::{IpAddr, SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    can_run_netns_tests, figure,
    http::{get, sample},
    lab::{ME, ROUTER, wait_for},
    node::SimNode,
    objects::{pod, write_list},
};

/// Connections the flood opens.
const FLOOD: usize = 1_000;

/// The agent's resident memory at its peak, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Room for the flood's sockets in this process.
fn raise_open_files() {
    let want = libc::rlimit {
        rlim_cur: 8192,
        rlim_max: 8192,
    };
    // SAFETY: setrlimit with a valid struct; root may raise the hard limit.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const want) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}

#[test]
fn half_sent_headers_are_closed_by_the_server_while_the_probes_answer() {
    if !can_run_netns_tests("half_sent_headers_are_closed_by_the_server_while_the_probes_answer") {
        return;
    }
    raise_open_files();
    let sim = SimNode::kube_ovn("hslow", ROUTER);
    let dir = ipshadow_tests::TempDir::new("hslow");
    let pods = dir.join("pods.json");
    write_list(&pods, vec![pod("t", "pg", ME, &[ROUTER])]);
    let health: SocketAddr = "127.0.0.1:9786".parse().unwrap();
    let agent = AgentProc::spawn(
        &sim.node,
        &[
            "--node",
            ME,
            "--pods",
            pods.to_str().unwrap(),
            "--health-listen",
            "127.0.0.1:9786",
            "--http-header-timeout-seconds",
            "2",
            // One client here: the listener's own limit is what this test is about.
            "--http-max-connections-per-peer",
            "64",
        ],
    );
    agent.wait_ready(&sim.node);
    let before = peak_rss_kib(agent.pid());

    let _inside = sim.node.enter();
    let start = Instant::now();
    let mut open: Vec<TcpStream> = (0..FLOOD)
        .map(|_| {
            let mut c = TcpStream::connect(AgentProc::addr()).unwrap();
            // Half a request header, never finished. Over the connection limit the
            // server has closed already: the write may fail, the read says so.
            let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nHost: ipshadow\r\nX-Slow: ");
            c.set_nonblocking(true).unwrap();
            c
        })
        .collect();
    let (mut answered, mut failed) = (0, Vec::new());
    while !open.is_empty() && start.elapsed() < HANG {
        open.retain(|c| {
            let mut buf = [0u8; 256];
            matches!((&*c).read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        match get(health, "/healthz") {
            Ok((200, _)) => answered += 1,
            other => failed.push(other),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        open.is_empty(),
        "{} of {FLOOD} connections still open after {HANG:?}",
        open.len()
    );
    let closed_in = start.elapsed();
    assert!(
        answered > 0 && failed.is_empty(),
        "probes failed: {failed:?}"
    );
    let (status, m) = get(AgentProc::addr(), "/metrics").unwrap();
    assert_eq!(status, 200, "the metrics port serves again");
    let rejected = sample(
        &m,
        "ipshadow_http_connections_rejected_total",
        &[("listener", "metrics"), ("limit", "listener")],
    )
    .unwrap();
    assert!(
        rejected > 0.0,
        "over the limit, connections are closed at accept"
    );
    let peak = peak_rss_kib(agent.pid());
    assert!(
        peak < 128 * 1024,
        "peak RSS {peak} KiB over the 128 MiB limit"
    );
    figure(format!(
        "{FLOOD} half-header connections: all closed by the agent in {:.1} s (header timeout 2 s, \
         {rejected} closed at accept over the limit of 64), /healthz answered {answered} times \
         meanwhile, none failed; peak RSS {} → {} MiB",
        closed_in.as_secs_f64(),
        before / 1024,
        peak / 1024
    ));
}

/// A TCP connection to `to` from the local address `from` (any of 127/8 is
/// local), made in the calling thread's network namespace.
fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let stream = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(from, 0)).unwrap();
        socket.connect(to).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// Whether the server closed `c` (a read says end of file or reset).
fn closed(c: &TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 256];
    let open = matches!((&*c).read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    c.set_nonblocking(false).unwrap();
    !open
}

#[test]
fn one_client_holding_its_connections_cannot_starve_another() {
    if !can_run_netns_tests("one_client_holding_its_connections_cannot_starve_another") {
        return;
    }
    let sim = SimNode::kube_ovn("hpeer", ROUTER);
    let dir = ipshadow_tests::TempDir::new("hpeer");
    let pods = dir.join("pods.json");
    write_list(&pods, vec![pod("t", "pg", ME, &[ROUTER])]);
    let agent = AgentProc::spawn(
        &sim.node,
        &[
            "--node",
            ME,
            "--pods",
            pods.to_str().unwrap(),
            "--health-listen",
            "127.0.0.1:9786",
            "--http-max-connections",
            "16",
            "--http-max-connections-per-peer",
            "4",
            // Half-sent headers are held, not timed out, while the test runs.
            "--http-header-timeout-seconds",
            "300",
        ],
    );
    agent.wait_ready(&sim.node);

    let _inside = sim.node.enter();
    let hog: IpAddr = "127.0.0.2".parse().unwrap();
    // The hog opens more than the whole listener serves, each with half a header.
    let mut held: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut c = connect_from(hog, AgentProc::addr());
            let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nHost: ipshadow\r\nX-Slow: ");
            c
        })
        .collect();
    // The server closes all but its cap, at accept.
    wait_for("the hog's connections over its cap closed", HANG, || {
        held.retain(|c| !closed(c));
        (held.len() <= 4).then_some(())
    });
    assert_eq!(held.len(), 4, "the hog keeps its cap");
    // Another client is served meanwhile, four connections at once too.
    let other: IpAddr = "127.0.0.3".parse().unwrap();
    let mine: Vec<TcpStream> = (0..4)
        .map(|_| connect_from(other, AgentProc::addr()))
        .collect();
    for mut c in mine {
        c.set_read_timeout(Some(HANG)).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: ipshadow\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let (status, m) = get(AgentProc::addr(), "/metrics").unwrap();
    assert_eq!(status, 200);
    let over = |limit| {
        sample(
            &m,
            "ipshadow_http_connections_rejected_total",
            &[("listener", "metrics"), ("limit", limit)],
        )
        .unwrap()
    };
    assert!(over("peer") >= 36.0, "{m}");
    assert!(over("listener") == 0.0, "the listener never filled: {m}");
    figure(format!(
        "one client opening 40 connections holds 4 of 16 (its cap), {} closed at accept; \
         another client served on 4 connections at once meanwhile",
        over("peer")
    ));
    drop(held);
}
