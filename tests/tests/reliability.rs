//! Reliability: an agent killed at random points restarts into the same
//! state, and a netlink burst that overruns its socket ends in a full resync
//! with no stale finding.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{
    collections::BTreeSet,
    fmt::Write as _,
    time::{Duration, Instant},
};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, figure,
    lab::{ME, PROGRAM, ROUTER, wait_for},
    netns::attached_programs,
    node::SimNode,
    objects::{cilium_node, node, pod, with_pod_cidrs, write_list},
};
use proptest::{
    prelude::RngExt as _,
    test_runner::{RngAlgorithm, TestRng},
};

/// Irregular but reproducible delays: proptest's deterministic generator.
fn delays() -> impl FnMut(u64) -> Duration {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    move |max_ms| Duration::from_millis(rng.random_range(0..max_ms))
}

/// The finding series of a scrape, as a set of lines.
fn findings(metrics: &str) -> BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("ipshadow_collision_info{"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn twenty_kill_9s_at_random_points_leave_one_program_the_same_findings_and_no_duplicate_event() {
    if !can_run_netns_tests("twenty_kill_9s") {
        return;
    }
    let sim = SimNode::kube_ovn("rk9", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    api.apply(Res::Nodes, node(ME, &["10.244.4.0/24"]));
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(ME, ROUTER, Some("10.244.4.12"), None),
            &["10.244.4.0/24"],
        ),
    );
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    api.apply(Res::Pods, pod("tenant", "gateway-0", ME, &["10.244.4.12"]));
    let dir = ipshadow_tests::TempDir::new("rk9");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let env = [("KUBECONFIG", kubeconfig.to_str().unwrap())];
    let args = ["--node", ME, "--tc-attach", "netlink"];

    let first = AgentProc::spawn_env(&sim.node, &args, &env);
    first.wait_ready(&sim.node);
    let before = AgentProc::wait_metrics(&sim.node, HANG, |m| findings(m).len() == 2)
        .and_then(|_| AgentProc::get(&sim.node, "/metrics").ok())
        .map(|(_, m)| findings(&m))
        .unwrap();
    wait_for("the two Events", HANG, || {
        (api.event_objects().len() >= 2).then_some(())
    });
    drop(first); // kill -9

    // A legacy tc filter outlives a killed agent: the worst case for stacking.
    let mut delay = delays();
    let mut killed_after = Vec::new();
    for _ in 0..20 {
        let after = delay(400);
        let a = AgentProc::spawn_env(&sim.node, &args, &env);
        std::thread::sleep(after);
        drop(a); // SIGKILL, wherever it is: loading, attaching, listing, reconciling, writing Events
        killed_after.push(after.as_millis());
    }
    figure(format!("killed 20 agents after {killed_after:?} ms"));

    let last = AgentProc::spawn_env(&sim.node, &args, &env);
    last.wait_ready(&sim.node);
    let after = AgentProc::wait_metrics(&sim.node, HANG, |m| findings(m) == before);
    assert!(
        after.is_some(),
        "findings differ after the restarts; log:\n{}",
        last.log_text()
    );
    assert_eq!(
        attached_programs(&sim.node, "lo", PROGRAM),
        1,
        "programs stacked on lo"
    );
    // The last agent has written both series (a new process continues each
    // existing series with a write: created, or patched when it found the
    // object): what it did about them is in, so a duplicate would be too.
    wait_for("the last agent's writes of both series", HANG, || {
        let (_, m) = AgentProc::get(&sim.node, "/metrics").ok()?;
        let writes = |result| {
            ipshadow_tests::http::sample(&m, "ipshadow_event_writes_total", &[("result", result)])
        };
        (writes("created")? + writes("patched")? >= 2.0).then_some(())
    });
    // Event series continued: still one object per series.
    let mut per_series = std::collections::BTreeMap::new();
    for e in api.event_objects() {
        *per_series
            .entry((e["regarding"]["name"].to_string(), e["reason"].to_string()))
            .or_insert(0) += 1;
    }
    assert!(per_series.values().all(|n| *n == 1), "{per_series:?}");
    assert_eq!(per_series.len(), 2, "{per_series:?}");
    let (status, _) = last.terminate();
    assert!(status.success());
    assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 0);
}

#[test]
fn a_burst_that_overruns_the_netlink_socket_ends_in_a_resync_with_no_stale_finding() {
    if !can_run_netns_tests("a_burst_of_ten_thousand_changes") {
        return;
    }
    let sim = SimNode::kube_ovn("rburst", ROUTER);
    sim.node.add_veth("burst0", "burst1");
    sim.node.ip(&["link", "set", "burst0", "up"]);
    let dir = ipshadow_tests::TempDir::new("rburst");
    let pods = dir.join("pods.json");
    // Two pods on addresses the burst adds: one stays, one goes again.
    write_list(
        &pods,
        vec![
            pod("t", "stays", ME, &["10.244.203.3"]),
            pod("t", "goes", ME, &["10.244.200.7"]),
        ],
    );
    let agent = AgentProc::spawn(
        &sim.node,
        &[
            "--node",
            ME,
            "--pods",
            pods.to_str().unwrap(),
            "--ebpf",
            "off",
        ],
    );
    agent.wait_ready(&sim.node);

    // 10,000 address changes (each also a local route) while the agent is
    // stopped: nothing reads the socket, so the kernel must drop notifications.
    // SAFETY: signals to our own child's pid.
    unsafe { libc::kill(agent.pid().cast_signed(), libc::SIGSTOP) };
    let mut batch = String::new();
    for i in 0..5000u32 {
        let _ = writeln!(
            batch,
            "addr add 10.244.{}.{}/32 dev burst0",
            200 + i / 250,
            i % 250 + 1
        );
    }
    for i in 0..5000u32 {
        let (a, b) = (200 + i / 250, i % 250 + 1);
        if (a, b) != (203, 3) {
            let _ = writeln!(batch, "addr del 10.244.{a}.{b}/32 dev burst0");
        }
    }
    sim.node.ip_batch(&batch);
    // SAFETY: as above.
    unsafe { libc::kill(agent.pid().cast_signed(), libc::SIGCONT) };

    let settled = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        let f = findings(m);
        f.len() == 1
            && f.iter()
                .all(|l| l.contains("pod=\"stays\"") && l.contains("device=\"burst0\""))
    });
    let log = agent.log_text();
    assert!(
        log.contains("netlink notifications overran (ENOBUFS): full resync"),
        "the burst did not overrun the socket, or the agent did not say so; log:\n{log}"
    );
    assert!(
        settled.is_some(),
        "stale or missing finding after the burst; log:\n{log}"
    );
    figure(format!(
        "burst of 9,999 address changes to a stopped agent: overran, resynced, settled in {:?} after SIGCONT",
        settled.unwrap()
    ));
    let (status, _) = agent.terminate();
    assert!(status.success());
}

#[test]
fn interfaces_that_vanish_mid_reconcile_fail_no_reconcile_and_leave_no_stale_finding() {
    if !can_run_netns_tests("interfaces_that_vanish_mid_reconcile") {
        return;
    }
    const IP: &str = "10.244.210.7";
    let sim = SimNode::kube_ovn("rvanish", ROUTER);
    let dir = ipshadow_tests::TempDir::new("rvanish");
    let pods = dir.join("pods.json");
    write_list(&pods, vec![pod("t", "flap", ME, &[IP])]);
    let agent = AgentProc::spawn(&sim.node, &["--node", ME, "--pods", pods.to_str().unwrap()]);
    agent.wait_ready(&sim.node);

    // 200 devices (veth: this kernel has no dummy) holding the pod's IP appear and vanish, at irregular moments
    // against the agent's 20 ms debounce: dumps and FIB lookups meet devices
    // (and addresses, and routes) that are gone by the time they are read.
    let mut delay = delays();
    for i in 0..200 {
        let dev = format!("vanish{i}");
        let batch = format!(
            "link add {dev} type veth peer name {dev}p\naddr add {IP}/32 dev {dev}\nlink set {dev} up\nlink del {dev}\n"
        );
        sim.node.ip_batch(&batch);
        std::thread::sleep(delay(30));
    }
    let clean = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        findings(m).is_empty()
            && ipshadow_tests::http::sample(m, "ipshadow_source_up", &[("source", "netlink")])
                == Some(1.0)
    });
    assert!(
        clean.is_some(),
        "stale finding or netlink down; log:\n{}",
        agent.log_text()
    );
    // The last one stays: found on it.
    sim.node.add_veth("vanish-last", "vanish-peer");
    sim.node
        .ip(&["addr", "add", &format!("{IP}/32"), "dev", "vanish-last"]);
    let found = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        findings(m)
            .iter()
            .any(|l| l.contains("pod=\"flap\"") && l.contains("device=\"vanish-last\""))
    });
    assert!(found.is_some(), "log:\n{}", agent.log_text());
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let reconciles = |result: &str| {
        ipshadow_tests::http::sample(&m, "ipshadow_reconciles_total", &[("result", result)])
            .unwrap_or(0.0)
    };
    let log = agent.log_text();
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        reconciles("error") < 1.0,
        "a reconcile failed on a vanished device; log:\n{log}"
    );
    figure(format!(
        "200 devices appeared and vanished under the agent: {} reconciles, none failed, no stale finding",
        reconciles("ok")
    ));
    let (status, _) = agent.terminate();
    assert!(status.success());
}

#[test]
fn a_long_lived_task_that_stops_fails_healthz_by_name() {
    if !can_run_netns_tests("a_long_lived_task_that_stops_fails_healthz_by_name") {
        return;
    }
    let sim = SimNode::kube_ovn("rtask", ROUTER);
    let dir = ipshadow_tests::TempDir::new("rtask");
    let pods = dir.join("pods.json");
    write_list(&pods, vec![pod("t", "pg", ME, &[ROUTER])]);
    // The debug build's test hook cuts the netlink notifier off 1.5 s after start.
    let agent = AgentProc::spawn_env(
        &sim.node,
        &["--node", ME, "--pods", pods.to_str().unwrap()],
        &[
            ("IPSHADOW_TEST_END_TASK", "netlink-notifier"),
            ("IPSHADOW_TEST_END_AFTER_MS", "1500"),
        ],
    );
    agent.wait_ready(&sim.node);
    assert_eq!(AgentProc::get(&sim.node, "/healthz").unwrap().0, 200);
    // /healthz reads the tasks' state on each request (daemon/supervise.rs's
    // unit test: an ended task is named at once); here, that it reaches the probe.
    let body = wait_for("/healthz failing", HANG, || {
        match AgentProc::get(&sim.node, "/healthz") {
            Ok((503, body)) => Some(body),
            _ => None,
        }
    });
    assert!(body.contains("netlink-notifier ended"), "{body}");
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert_eq!(
        ipshadow_tests::http::sample(&m, "ipshadow_task_up", &[("task", "netlink-notifier")]),
        Some(0.0),
        "{m}"
    );
    assert_eq!(
        ipshadow_tests::http::sample(&m, "ipshadow_task_up", &[("task", "reconcile")]),
        Some(1.0)
    );
    assert!(agent.log_text().contains("a long-lived task stopped"));
}

#[test]
fn healthz_answers_while_a_large_pods_file_is_read_again() {
    if !can_run_netns_tests("healthz_answers_while_a_large_pods_file_is_read_again") {
        return;
    }
    let sim = SimNode::kube_ovn("rlarge", ROUTER);
    let dir = ipshadow_tests::TempDir::new("rlarge");
    let pods = dir.join("pods.json");
    // 100,000 pods elsewhere (the cluster's pods, as `kubectl get pods -A` gives them).
    let many = |n: u32| -> Vec<serde_json::Value> {
        (0..n)
            .map(|i| {
                pod(
                    "tenant",
                    &format!("p-{i}"),
                    "node-z",
                    &[&format!(
                        "10.{}.{}.{}",
                        100 + i / 65_536,
                        (i / 256) % 256,
                        i % 256
                    )],
                )
            })
            .collect()
    };
    write_list(&pods, many(100_000));
    let agent = AgentProc::spawn(&sim.node, &["--node", ME, "--pods", pods.to_str().unwrap()]);
    agent.wait_ready(&sim.node);
    // The file is replaced: the agent reads all of it again, and pg (on
    // node-a's router IP) in /metrics says it has. Until then every /healthz
    // says the loop answers: 200 "ok", which the agent gives only when its
    // reconcile loop answered the ping within its own liveness timeout. How
    // long each answer took is a figure here (the probe timeout's margin is
    // the benchmark's, `cargo xtask bench scale`), never asserted.
    let mut changed = many(100_000);
    changed.push(pod("tenant", "pg", ME, &[ROUTER]));
    write_list(&pods, changed);
    let read_again = |m: &str| {
        ipshadow_tests::http::sample(m, "ipshadow_collision_info", &[("pod", "pg")]) == Some(1.0)
    };
    let start = Instant::now();
    let (mut slowest, mut answered, mut read) = (Duration::ZERO, 0, false);
    while !read && start.elapsed() < HANG * 4 {
        let asked = Instant::now();
        let (code, body) = AgentProc::get(&sim.node, "/healthz").unwrap();
        slowest = slowest.max(asked.elapsed());
        assert_eq!(
            (code, body.as_str()),
            (200, "ok\n"),
            "/healthz failed while the file was read"
        );
        answered += 1;
        read = AgentProc::get(&sim.node, "/metrics").is_ok_and(|(_, m)| read_again(&m));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(read, "the file was never read again:\n{}", agent.log_text());
    figure(format!(
        "a 100,000-pod file read again in {:.1} s: /healthz answered {answered} times meanwhile, the slowest in {slowest:?}",
        start.elapsed().as_secs_f64()
    ));
}
