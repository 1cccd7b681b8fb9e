//! Soaks, minutes long: a five-minute API outage, a churn of 1,000 pods
//! with collisions coming and going, and 50 findings held for five minutes. `cargo test` skips them (ignored);
//! `cargo xtask test` (and so CI) runs them, in parallel with each other.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::fmt::Write as _;
use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, figure,
    http::sample,
    lab::{
        INGRESS, Lab, ME, OTHER_ROUTER, ROUTER, assert_one_event_each, cozystack, event,
        series_objects, wait_for,
    },
    netns::tcx_program_map_entries,
    node::SimNode,
    objects::pod,
};

/// Seconds from the environment, for a shorter run by hand.
fn secs(var: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The series of a scrape: name and labels, without values.
fn series(metrics: &str) -> BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s.to_owned()))
        .collect()
}

fn collisions(metrics: &str) -> BTreeSet<String> {
    series(metrics)
        .into_iter()
        .filter(|s| s.starts_with("ipshadow_collision_info{"))
        .collect()
}

#[test]
#[ignore = "soak (5 minutes): `cargo xtask test` runs it"]
fn an_api_outage_of_five_minutes_keeps_detection_live_backs_off_and_recovers() {
    if !can_run_netns_tests("an_api_outage_of_five_minutes") {
        return;
    }
    let outage = secs("IPSHADOW_OUTAGE_SECONDS", 300);
    let sim = SimNode::kube_ovn("sout", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    api.apply(Res::Pods, pod("tenant", "web-0", ME, &["10.244.0.35"]));
    let lab = Lab::new("outage", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    wait_for("the first Event", Duration::from_secs(10), || {
        event(&api, "tenant", "postgres-0", "RouterIPCollision")
    });
    let router =
        |m: &str| sample(m, "ipshadow_collision_info", &[("pod", "postgres-0")]) == Some(1.0);

    // Every backend of the API server is gone: connections are accepted and cut.
    api.blackout();
    let start = Instant::now();
    let mut scrapes = 0u32;
    // Scrapes every 5 s until `until` into the outage: the finding stays.
    let mut serve_until = |until: Duration| {
        while start.elapsed() < until {
            let (code, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
            assert_eq!(code, 200);
            assert!(router(&m), "finding lost during the outage:\n{m}");
            scrapes += 1;
            std::thread::sleep(Duration::from_secs(5));
        }
    };
    serve_until(outage / 10);
    // A node-side change during the outage: found from netlink and the cached pod.
    sim.node.add_veth("kube-ipvs0", "ipvs-peer");
    sim.node
        .ip(&["addr", "add", "10.244.0.35/32", "dev", "kube-ipvs0"]);
    let found = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(
            m,
            "ipshadow_collision_info",
            &[("pod", "web-0"), ("kind", "LocalAddressCollision")],
        ) == Some(1.0)
    });
    assert!(
        found.is_some(),
        "netlink detection stalled; log:\n{}",
        agent.log_text()
    );
    serve_until(outage / 5);
    // Written while the agent cannot see it: must show after recovery.
    api.apply(Res::Pods, pod("tenant", "api-0", ME, &[OTHER_ROUTER]));
    serve_until(outage);
    let counts = api.counts();
    let total = counts.cut_connections;
    // The steady state: the second half of the outage, when every backoff is at
    // its cap. Each request (watch list, Event write) is retried on its own
    // schedule: the gaps between tries of one request show the backoff.
    let half = start + outage / 2;
    let mut tries: BTreeMap<&str, Vec<Instant>> = BTreeMap::new();
    for (at, request, status) in &counts.timeline {
        if *status == Some(0) && *at >= half {
            tries.entry(request.as_str()).or_default().push(*at);
        }
    }
    let second_half: usize = tries.values().map(Vec::len).sum();
    let per_minute =
        f64::from(u32::try_from(second_half).unwrap()) * 60.0 / (outage.as_secs_f64() / 2.0);
    let shortest = tries
        .values()
        .flat_map(|t| t.windows(2).map(|w| w[1] - w[0]))
        .min()
        .map_or_else(|| "-".to_owned(), |d| format!("{d:.1?}"));
    api.up();
    let recovered_from = Instant::now();

    let api0 = |m: &str| sample(m, "ipshadow_collision_info", &[("pod", "api-0")]) == Some(1.0);
    let took = AgentProc::wait_metrics(&sim.node, Duration::from_mins(1), |m| api0(m) && router(m));
    assert!(
        took.is_some(),
        "no recovery after the outage; log:\n{}",
        agent.log_text()
    );
    for (name, reason) in [
        ("api-0", "RouterIPCollision"),
        ("web-0", "LocalAddressCollision"),
    ] {
        wait_for(&format!("{name}'s Event"), Duration::from_mins(1), || {
            event(&api, "tenant", name, reason)
        });
    }
    let events_after = recovered_from.elapsed();
    assert_one_event_each(
        &api,
        &[
            ("postgres-0", "RouterIPCollision"),
            ("api-0", "RouterIPCollision"),
            ("web-0", "LocalAddressCollision"),
        ],
    );
    figure(format!(
        "API outage of {outage:?}: {scrapes} scrapes served, netlink finding during it, \
         {total} connection attempts; in the second half {second_half} ({per_minute:.1}/min) from \
         {} distinct requests, each retried at most every {shortest}; finding after recovery \
         in {:?}, Events in {events_after:?}",
        tries.len(),
        took.unwrap()
    ));
    assert!(total > 0, "the agent never retried");
    // Watches and the Event writer back off to 20 s plus up to as much jitter.
    let floor = Duration::from_secs(20);
    for (request, at) in &tries {
        for w in at.windows(2) {
            assert!(
                w[1] - w[0] >= floor,
                "{request} retried after {:?} at steady state: backoff not capped",
                w[1] - w[0]
            );
        }
    }
    // A fixed set of requests: one per watch and per pending Event, no fan-out.
    let requests: Vec<&&str> = tries.keys().collect();
    assert!(
        requests.len() <= 12,
        "{} distinct requests: {requests:#?}",
        requests.len()
    );
    let (status, _) = agent.terminate();
    assert!(status.success());
}

#[test]
#[ignore = "soak (~2 minutes): `cargo xtask test` runs it"]
fn a_churn_of_a_thousand_pods_leaks_no_map_entry_series_or_event() {
    if !can_run_netns_tests("a_churn_of_a_thousand_pods") {
        return;
    }
    const PODS: usize = 1000;
    /// Pods alive at once: each lives this many creations (~4 s).
    const ALIVE: usize = 40;
    let pace = Duration::from_millis(
        std::env::var("IPSHADOW_CHURN_PACE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100),
    );
    let sim = SimNode::kube_ovn("schurn", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    let lab = Lab::new("churn", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let pid = agent.pid();
    // Every 50th pod gets the router IP and every 50th the ingress IP (never two
    // alive at once); the rest reuse 80 addresses of the node's range.
    let ip_of = |i: usize| match i % 50 {
        10 => ROUTER.to_owned(),
        35 => INGRESS.to_owned(),
        _ => format!("10.244.4.{}", 20 + i % 80),
    };
    let name_of = |i: usize| format!("churn-{i:04}");
    let colliding: BTreeMap<usize, &str> = (0..PODS)
        .filter_map(|i| match i % 50 {
            10 => Some((i, "RouterIPCollision")),
            35 => Some((i, "IngressIPCollision")),
            _ => None,
        })
        .collect();

    let start = Instant::now();
    let mut rss_warm = 0;
    let mut rss_peak = 0;
    for i in 0..PODS {
        api.apply(Res::Pods, pod("tenant", &name_of(i), ME, &[&ip_of(i)]));
        if i >= ALIVE {
            api.delete(Res::Pods, "tenant", &name_of(i - ALIVE));
        }
        if i == PODS / 4 {
            rss_warm = rss_kib(pid);
        }
        rss_peak = rss_peak.max(rss_kib(pid));
        std::thread::sleep(pace);
    }
    let churned = start.elapsed();
    let alive: Vec<usize> = (PODS - ALIVE..PODS).collect();
    let want: Vec<&str> = alive
        .iter()
        .filter(|i| colliding.contains_key(i))
        .map(|i| colliding[i])
        .collect();
    assert_eq!(want.len(), 2, "the test's own arithmetic");
    let settled = AgentProc::wait_metrics(&sim.node, Duration::from_secs(15), |m| {
        collisions(m).len() == want.len()
            && alive.iter().filter(|i| colliding.contains_key(i)).all(|i| {
                sample(m, "ipshadow_collision_info", &[("pod", &name_of(*i))]) == Some(1.0)
            })
    });
    assert!(
        settled.is_some(),
        "findings do not match the cluster; log:\n{}",
        agent.log_text()
    );

    // The kernel watches exactly the IPs of the findings delivered to this host
    // (Cilium's datapath, not lo, takes the ingress IP's traffic: not watched)
    // and the node's own addresses a pod elsewhere could hold (its router IP).
    let watched = want
        .iter()
        .filter(|r| **r != "IngressIPCollision")
        .map(|r| match *r {
            "RouterIPCollision" => ROUTER,
            other => unreachable!("{other}"),
        })
        .chain([ROUTER])
        .collect::<BTreeSet<_>>()
        .len();
    let entries = tcx_program_map_entries(&sim.node, "lo", "ipshadow_lo", "SHADOWED");
    assert_eq!(
        entries, watched,
        "SHADOWED holds {entries} entries for {watched} watched findings"
    );

    // Every Event series is right: one collision Event per colliding pod, one
    // resolution per colliding pod that went, nothing for the others.
    wait_for("every Event of the churn", Duration::from_mins(1), || {
        colliding
            .iter()
            .all(|(i, reason)| {
                let name = name_of(*i);
                let gone = *i < PODS - ALIVE;
                series_objects(&api, &name, reason).len() == 1
                    && series_objects(&api, &name, "IPCollisionResolved").len() == usize::from(gone)
            })
            .then_some(())
    });
    let events = api.event_objects();
    let resolved = colliding.keys().filter(|i| **i < PODS - ALIVE).count();
    assert_eq!(events.len(), colliding.len() + resolved, "stray Events");

    // Memory is a figure, not an assertion (the benchmark owns resource bounds);
    // what cannot leak is asserted structurally: series, map entries, Events.
    let rss_end = rss_kib(pid);

    // No leaked series: the soaked agent exports exactly what a fresh agent on
    // the same cluster does.
    let (_, soaked) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let c = api.counts();
    let (status, _) = agent.terminate();
    assert!(status.success());
    let fresh = lab.agent(&sim.node, ME);
    fresh.wait_ready(&sim.node);
    AgentProc::wait_metrics(&sim.node, HANG, |m| collisions(m).len() == want.len()).unwrap();
    let (_, fresh_m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let (a, b) = (series(&soaked), series(&fresh_m));
    let leaked: Vec<_> = a.difference(&b).collect();
    let missing: Vec<_> = b.difference(&a).collect();
    assert!(
        leaked.is_empty() && missing.is_empty(),
        "leaked {leaked:#?}\nmissing {missing:#?}"
    );
    figure(format!(
        "churn: {PODS} pods created and {} deleted in {churned:?} ({} collisions came and went), \
         RSS {rss_warm} KiB at {} pods -> peak {rss_peak} -> {rss_end} KiB at the end, \
         SHADOWED {entries} entries = {watched} watched of {} findings, {} series (same as a fresh agent), \
         {} Event objects, API requests {} ({} watches, {} lists)",
        PODS - ALIVE,
        colliding.len(),
        PODS / 4,
        want.len(),
        a.len(),
        events.len(),
        c.total,
        c.watches,
        c.lists
    ));
    let (status, _) = fresh.terminate();
    assert!(status.success());
}

#[test]
#[ignore = "soak (5 minutes): `cargo xtask test` runs it"]
fn fifty_persistent_findings_over_five_minutes_are_fifty_creates_and_no_other_write() {
    if !can_run_netns_tests("fifty_persistent_findings") {
        return;
    }
    const FINDINGS: usize = 50;
    let span = secs("IPSHADOW_PERSIST_SECONDS", 300);
    let ip_of = |i: usize| format!("10.244.200.{}", i + 1);
    let sim = SimNode::kube_ovn("spersist", ROUTER);
    sim.node.add_veth("kube-ipvs0", "ipvs-peer");
    let batch = (0..FINDINGS).fold(String::new(), |mut b, i| {
        let _ = writeln!(b, "addr add {}/32 dev kube-ipvs0", ip_of(i));
        b
    });
    sim.node.ip_batch(&batch);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.set_crd(Res::Subnets, true);
    for i in 0..FINDINGS {
        api.apply(
            Res::Pods,
            pod("tenant", &format!("svc-{i:02}"), ME, &[&ip_of(i)]),
        );
    }
    let lab = Lab::new("persist", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    wait_for("50 Events", Duration::from_mins(1), || {
        (api.counts().creates == FINDINGS as u64).then_some(())
    });
    let reconciles_in = |m: &str| sample(m, "ipshadow_reconciles_total", &[("result", "ok")]);
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let reconciles_before = reconciles_in(&m).unwrap();

    // Five minutes of everything else moving: pods coming and going elsewhere
    // and on this node, kube-ovn's Subnet counters, addresses on the node.
    let start = Instant::now();
    let mut i = 0u32;
    while start.elapsed() < span {
        api.apply(
            Res::Pods,
            pod(
                "tenant",
                &format!("other-{}", i % 7),
                ME,
                &[&format!("10.244.4.{}", 100 + i % 50)],
            ),
        );
        api.apply(
            Res::Pods,
            pod(
                "tenant",
                &format!("far-{}", i % 7),
                "node-b",
                &[&format!("10.244.9.{}", 1 + i % 200)],
            ),
        );
        let mut s = ipshadow_tests::objects::subnet("tenant-net", "10.16.0.0/16", &["10.16.0.1"]);
        s["status"] = serde_json::json!({"v4usingIPs": i});
        api.apply(Res::Subnets, s);
        let dummy = format!("10.99.{}.1/32", i % 200);
        sim.node.ip(&["addr", "add", &dummy, "dev", "kube-ipvs0"]);
        sim.node.ip(&["addr", "del", &dummy, "dev", "kube-ipvs0"]);
        i += 1;
        std::thread::sleep(Duration::from_secs(2));
    }
    // Past the last change: a pod here whose address is not an IP, written
    // after it, is counted in ipshadow_invalid_objects_total by the first
    // reconcile that reads it; the counts are taken once that shows.
    let invalid = |m: &str| sample(m, "ipshadow_invalid_objects_total", &[("resource", "pods")]);
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let invalid_before = invalid(&m).unwrap_or(0.0);
    api.apply(Res::Pods, pod("tenant", "malformed-0", ME, &["not-an-ip"]));
    let m = wait_for("a reconcile past the last change", HANG, || {
        let (_, m) = AgentProc::get(&sim.node, "/metrics").ok()?;
        (invalid(&m)? > invalid_before).then_some(m)
    });
    let c = api.counts();
    let writes = |result: &str| {
        sample(&m, "ipshadow_event_writes_total", &[("result", result)]).unwrap_or(0.0)
    };
    let reconciled = reconciles_in(&m).unwrap() - reconciles_before;
    assert!(
        reconciled > 10.0,
        "the agent was not kept busy: {reconciled} reconciles"
    );
    assert_eq!(c.creates, FINDINGS as u64, "creates");
    assert_eq!(
        c.patches, 0,
        "patches of live series before their 30-minute refresh"
    );
    assert_eq!(
        (
            writes("created"),
            writes("patched"),
            writes("failed"),
            writes("dropped")
        ),
        (50.0, 0.0, 0.0, 0.0)
    );
    assert_eq!(api.event_objects().len(), FINDINGS);
    figure(format!(
        "{FINDINGS} persistent findings over {span:?} with {i} rounds of unrelated change ({reconciled} reconciles): \
         {} creates, {} patches",
        c.creates, c.patches
    ));
    let (status, _) = agent.terminate();
    assert!(status.success());
}
