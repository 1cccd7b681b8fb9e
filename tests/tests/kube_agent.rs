//! The real agent against the test API server: watches, Events on the
//! affected pods (and Node), series that survive repeats and restarts,
//! cross-node detection from both sides, and API faults.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{collections::BTreeMap, fmt::Write as _, time::Duration};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, deploy, figure,
    http::sample,
    lab::{
        INGRESS, Lab, ME, OTHER, OTHER_INGRESS, OTHER_ROUTER, ROUTER, assert_one_event_each,
        cozystack, event, poll, series_objects, wait_for,
    },
    netns::NetNs,
    node::SimNode,
    objects::{cilium_node, kube_ovn_ip, node, pending_pod, pod, subnet, with_pod_cidrs},
};
use serde_json::Value;

#[test]
fn events_name_each_cozystack_mode_and_resolve_when_the_pod_goes() {
    if !can_run_netns_tests("events_name_each_cozystack_mode_and_resolve_when_the_pod_goes") {
        return;
    }
    let sim = SimNode::kube_ovn("kev", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.set_crd(Res::Subnets, true);
    api.apply(
        Res::Subnets,
        subnet("ovn-default", "10.244.0.0/16", &["10.244.0.1"]),
    );
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    api.apply(Res::Pods, pending_pod("tenant", "gateway-0", ME, INGRESS));
    // kube-ovn's own record confirms the annotation (a Warning needs it).
    api.apply(
        Res::KubeOvnIps,
        kube_ovn_ip("tenant", "gateway-0", ME, INGRESS),
    );
    api.apply(Res::Pods, pod("tenant", "api-0", ME, &[OTHER_ROUTER]));
    api.apply(Res::Pods, pod("tenant", "cache-0", ME, &[OTHER_INGRESS]));
    api.apply(Res::Pods, pod("tenant", "web-0", ME, &["10.244.0.35"]));
    api.apply(
        Res::Pods,
        pod("tenant", "elsewhere", OTHER, &["10.244.0.36"]),
    );
    let lab = Lab::new("ev", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);

    for (pod_name, reason, ip, owner) in [
        ("postgres-0", "RouterIPCollision", ROUTER, ME),
        ("gateway-0", "IngressIPCollision", INGRESS, ME),
        ("api-0", "RouterIPCollision", OTHER_ROUTER, OTHER),
        ("cache-0", "IngressIPCollision", OTHER_INGRESS, OTHER),
    ] {
        let e = wait_for(
            &format!("{reason} on {pod_name}"),
            Duration::from_secs(10),
            || event(&api, "tenant", pod_name, reason),
        );
        assert_eq!(e["type"], "Warning", "{e:#}");
        assert_eq!(e["involvedObject"]["kind"], "Pod");
        assert_eq!(e["involvedObject"]["name"], pod_name);
        assert_eq!(e["involvedObject"]["uid"], format!("uid-{pod_name}"));
        assert_eq!(e["reportingComponent"], "ipshadow.io/agent");
        assert_eq!(e["reportingInstance"], ME);
        let msg = e["message"].as_str().unwrap();
        for needle in [ip, &format!("node {owner}"), "Fix:"] {
            assert!(msg.contains(needle), "{needle:?} missing in {msg}");
        }
    }
    let impact = event(&api, "tenant", "postgres-0", "RouterIPCollision").unwrap();
    assert!(
        impact["message"]
            .as_str()
            .unwrap()
            .contains("kubelet probes and webhooks from node-a reach node-a itself"),
        "{impact:#}"
    );
    assert!(api.core_events_for("tenant", "web-0").is_empty());

    // The root cause, on the Node.
    let overlap = wait_for(
        "AllocatorOverlap on the Node",
        Duration::from_secs(10),
        || event(&api, "default", ME, "AllocatorOverlap"),
    );
    assert_eq!(overlap["involvedObject"]["kind"], "Node");
    assert!(
        overlap["message"]
            .as_str()
            .unwrap()
            .contains("10.244.4.0..10.244.4.255"),
        "{overlap:#}"
    );

    // The pod goes away: the collision is resolved, in a Normal Event.
    api.delete(Res::Pods, "tenant", "postgres-0");
    let resolved = wait_for("IPCollisionResolved", Duration::from_secs(10), || {
        event(&api, "tenant", "postgres-0", "IPCollisionResolved")
    });
    assert_eq!(resolved["type"], "Normal");
    assert!(resolved["message"].as_str().unwrap().contains(ROUTER));
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert_eq!(
        sample(&m, "ipshadow_collision_info", &[("pod", "postgres-0")]),
        None,
        "{m}"
    );
    assert_eq!(
        sample(&m, "ipshadow_source_up", &[("source", "subnets")]),
        Some(1.0),
        "{m}"
    );

    // deploy/rbac.yaml allows every request the agent made, and nothing is left
    // unused. The watches start with streaming lists here (verb `watch`); the
    // lists of a server without them are checked in streaming_lists.rs.
    let rules = deploy::cluster_role_rules(&deploy::manifests(), "ipshadow");
    let used = deploy::used_and_allowed(&api.counts().log, &rules);
    for (group, resource, verb) in [
        ("", "pods", "watch"),
        ("", "nodes", "watch"),
        ("cilium.io", "ciliumnodes", "watch"),
        ("kubeovn.io", "subnets", "watch"),
        ("events.k8s.io", "events", "create"),
    ] {
        let key = (group.to_owned(), resource.to_owned(), verb.to_owned());
        assert!(used.contains(&key), "never used: {verb} {group}/{resource}");
    }
}

#[test]
fn one_event_object_per_series_across_repeats_and_restarts() {
    if !can_run_netns_tests("one_event_object_per_series_across_repeats_and_restarts") {
        return;
    }
    let sim = SimNode::kube_ovn("kser", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new("ser", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    wait_for("the first Event", Duration::from_secs(10), || {
        event(&api, "tenant", "postgres-0", "RouterIPCollision")
    });

    // 100 detections of the same collision, each awaited: the agent has
    // reconciled after every change (the pod's phase flips between Pending and
    // Running, which detection reads; a change nothing reads would not
    // reconcile at all).
    for i in 0..100 {
        let mut p = pod("tenant", "postgres-0", ME, &[ROUTER]);
        p["metadata"]["uid"] = Value::from("uid-postgres-0");
        p["status"]["phase"] = Value::from(if i % 2 == 0 { "Pending" } else { "Running" });
        AgentProc::reconciled_after(&sim.node, || api.apply(Res::Pods, p));
    }
    let objs = series_objects(&api, "postgres-0", "RouterIPCollision");
    assert_eq!(objs.len(), 1, "{objs:#?}");
    // Counted at most every 30 s: still the first occurrence.
    assert_eq!(
        event(&api, "tenant", "postgres-0", "RouterIPCollision").unwrap()["count"],
        1
    );

    // A restart continues the series instead of creating another object.
    let (status, _) = agent.terminate();
    assert!(status.success());
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let e = wait_for("the series to continue", Duration::from_secs(10), || {
        event(&api, "tenant", "postgres-0", "RouterIPCollision").filter(|e| e["count"] == 2)
    });
    assert_eq!(
        series_objects(&api, "postgres-0", "RouterIPCollision").len(),
        1,
        "{e:#}"
    );
    // The agent logs it once the write returned: the Event may be seen first.
    wait_for("the continuation in the log", HANG, || {
        agent
            .log_text()
            .contains("continuing an existing Event series")
            .then_some(())
    });
}

#[test]
fn cross_node_collisions_are_seen_from_both_nodes() {
    if !can_run_netns_tests("cross_node_collisions_are_seen_from_both_nodes") {
        return;
    }
    // Node A holds the router IP; the pod that has it runs on node B. The two
    // node namespaces share a link so B's agent reaches the API server in A.
    let a = SimNode::kube_ovn("kxa", ROUTER);
    let b = SimNode::kube_ovn("kxb", OTHER_ROUTER);
    a.node.ip(&[
        "link",
        "add",
        "mgmt",
        "type",
        "veth",
        "peer",
        "name",
        "mgmt",
        "netns",
        &b.node.name,
    ]);
    a.node
        .ip(&["addr", "add", "192.168.100.1/24", "dev", "mgmt"]);
    a.node.ip(&["link", "set", "mgmt", "up"]);
    b.node
        .ip(&["addr", "add", "192.168.100.2/24", "dev", "mgmt"]);
    b.node.ip(&["link", "set", "mgmt", "up"]);
    let api = ApiServer::start_on(Some(&a.node), "0.0.0.0:0");
    cozystack(&api);
    api.apply(Res::Nodes, node(OTHER, &["10.244.1.0/24"]));
    api.apply(Res::Pods, pod("tenant", "webhook-0", OTHER, &[ROUTER]));
    let lab = Lab::new("x", &api);
    let kube_b = lab.dir.join("kubeconfig-b");
    api.write_kubeconfig_via(&kube_b, &format!("192.168.100.1:{}", api.addr.port()));
    let agent_a = lab.agent(&a.node, ME);
    let agent_b = AgentProc::spawn_env(
        &b.node,
        &["--node", OTHER],
        &[("KUBECONFIG", kube_b.to_str().unwrap())],
    );
    agent_a.wait_ready(&a.node);
    agent_b.wait_ready(&b.node);

    // The pod's node writes the Event …
    let e = wait_for("the pod's node's Event", Duration::from_secs(10), || {
        event(&api, "tenant", "webhook-0", "RouterIPCollision")
    });
    assert_eq!(e["reportingInstance"], OTHER);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("host network of node node-a cannot reach it"),
        "{e:#}"
    );
    let names_the_owner = |m: &str| {
        sample(
            m,
            "ipshadow_collision_info",
            &[
                ("pod", "webhook-0"),
                ("scope", "cross-node"),
                ("owner_node", ME),
            ],
        ) == Some(1.0)
    };
    assert!(
        AgentProc::wait_metrics(&b.node, HANG, names_the_owner).is_some(),
        "the pod's node names the owner; log:\n{}",
        agent_b.log_text()
    );
    // The owner node watches no pod but its own: it does not know yet (though
    // it reconciled a change of its own since), and has asked the API server
    // nothing it cannot index.
    AgentProc::reconciled_after(&a.node, || {
        api.apply(
            Res::Pods,
            pod("tenant", "bystander-0", ME, &["10.244.4.77"]),
        );
    });
    let (_, from_a) = AgentProc::get(&a.node, "/metrics").unwrap();
    assert_eq!(
        sample(&from_a, "ipshadow_collision_info", &[("pod", "webhook-0")]),
        None,
        "{from_a}"
    );
    let before = api.counts();
    assert!(before.unindexed.is_empty(), "{:#?}", before.unindexed);
    assert!(!before.log.iter().any(|(_, u)| u.contains("status.podIP")));

    // The owner node's host traffic to that IP never leaves A: the observer
    // sees it, A looks up once who holds the address, and writes HostTrafficBlackholed.
    {
        let _inside = a.node.enter();
        for _ in 0..3 {
            let _ = std::net::TcpStream::connect_timeout(
                &format!("{ROUTER}:443").parse().unwrap(),
                Duration::from_secs(1),
            );
        }
    }
    assert!(
        AgentProc::wait_metrics(&a.node, HANG, names_the_owner).is_some(),
        "owner node did not find the pod after traffic; log:\n{}",
        agent_a.log_text()
    );
    let blackholed = poll(HANG * 2, || {
        event(&api, "tenant", "webhook-0", "HostTrafficBlackholed")
    })
    .unwrap_or_else(|| {
        panic!(
            "no HostTrafficBlackholed Event; A's log:\n{}\nrequests: {:#?}",
            agent_a.log_text(),
            api.counts().log
        )
    });
    assert_eq!(blackholed["reportingInstance"], ME);
    // The Event is written at first sight (later counts wait for the 30-minute
    // refresh); the traffic that led to the lookup is the pod's (it existed by then).
    let note = blackholed["message"].as_str().unwrap();
    assert!(
        ["refused 1", "refused 2", "refused 3"]
            .iter()
            .any(|n| note.contains(n)),
        "{blackholed:#}"
    );
    let counted = AgentProc::wait_metrics(&a.node, HANG, |m| {
        sample(
            m,
            "ipshadow_refused_connections_total",
            &[("ip", ROUTER), ("pod", "webhook-0")],
        ) == Some(3.0)
    });
    assert!(counted.is_some(), "{}", agent_a.log_text());
    // One series per (pod, reason, IP): B's Event and A's are different reasons.
    assert_eq!(
        series_objects(&api, "webhook-0", "RouterIPCollision").len(),
        1
    );

    // Exactly one lookup: a list from the watch cache; then the pod is watched
    // by name (a single key), nothing unindexed is watched.
    let lookups = |c: &ipshadow_tests::apiserver::RequestCounts| {
        c.log
            .iter()
            .filter(|(_, u)| u.contains("status.podIP"))
            .map(|(_, u)| u.clone())
            .collect::<Vec<_>>()
    };
    let counts = api.counts();
    let asked = lookups(&counts);
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(
        asked[0].contains("resourceVersion=0") && !asked[0].contains("watch=true"),
        "{asked:#?}"
    );
    assert_eq!(
        counts.unindexed,
        [(false, asked[0].clone())],
        "the lookup is the only unindexed request"
    );
    assert!(
        counts
            .log
            .iter()
            .any(|(_, u)| u.contains("/namespaces/tenant/pods?")
                && u.contains("metadata.name%3Dwebhook-0")
                && u.contains("watch=true"))
    );
    // More traffic is explained now: no new lookup.
    {
        let _inside = a.node.enter();
        let _ = std::net::TcpStream::connect_timeout(
            &format!("{ROUTER}:443").parse().unwrap(),
            Duration::from_secs(1),
        );
    }
    AgentProc::wait_metrics(&a.node, HANG, |m| {
        sample(
            m,
            "ipshadow_refused_connections_total",
            &[("ip", ROUTER), ("pod", "webhook-0")],
        ) == Some(4.0)
    })
    .unwrap();
    assert_eq!(lookups(&api.counts()).len(), 1);

    // The pod goes: its watch by name says so, and the owner's finding clears.
    api.delete(Res::Pods, "tenant", "webhook-0");
    let cleared = AgentProc::wait_metrics(&a.node, HANG, |m| {
        sample(m, "ipshadow_collision_info", &[("pod", "webhook-0")]).is_none()
    });
    assert!(cleared.is_some(), "{}", agent_a.log_text());
}

/// The cozystack cluster with postgres-0 on node-a's router IP, and the agent
/// on node-a, ready and reporting it.
fn cluster_with_a_finding(
    tag: &str,
    extra: impl FnOnce(&ApiServer),
) -> (SimNode, ApiServer, Lab, AgentProc) {
    let sim = SimNode::kube_ovn(tag, ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    extra(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new(tag, &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    assert!(
        AgentProc::wait_metrics(&sim.node, HANG, postgres_found).is_some(),
        "log:\n{}",
        agent.log_text()
    );
    (sim, api, lab, agent)
}

fn postgres_found(m: &str) -> bool {
    sample(m, "ipshadow_collision_info", &[("pod", "postgres-0")]) == Some(1.0)
}

#[test]
fn malformed_objects_from_the_api_are_named_counted_and_skipped() {
    if !can_run_netns_tests("malformed_objects_from_the_api_are_named_counted_and_skipped") {
        return;
    }
    let (sim, _api, _lab, agent) = cluster_with_a_finding("kbad", |api| {
        api.apply(
            Res::CiliumNodes,
            serde_json::json!({"metadata": {"name": "node-x"}, "spec": {"addresses": [{"type": "CiliumInternalIP", "ip": "ten.dot.one"}], "ingress": {"ipv4": 42}}}),
        );
        // A huge excludeIps list of garbage, and a Subnet without a block.
        api.set_crd(Res::Subnets, true);
        let junk: Vec<String> = (0..5000).map(|i| format!("not-an-ip-{i}")).collect();
        api.apply(
            Res::Subnets,
            serde_json::json!({"metadata": {"name": "broken"}, "spec": {"cidrBlock": "10.244.0.0/16", "excludeIps": junk}}),
        );
        api.apply(
            Res::Subnets,
            serde_json::json!({"metadata": {"name": "no-block"}, "spec": {"cidrBlock": 7}}),
        );
    });
    let invalid = |m: &str, resource| {
        sample(
            m,
            "ipshadow_invalid_objects_total",
            &[("resource", resource)],
        )
    };
    // The finding comes from node-a's CiliumNode; node-x's may be converted
    // (and counted) a moment later by its own watch: wait for both counts to
    // arrive (bounded against a hang), then assert them exactly.
    let scrape = || AgentProc::get(&sim.node, "/metrics").unwrap().1;
    let m = poll(HANG, || {
        let m = scrape();
        let seen = |r| invalid(&m, r).is_some_and(|v| v > 0.0);
        (seen("ciliumnodes") && seen("subnets")).then_some(m)
    })
    .unwrap_or_else(scrape);
    assert_eq!(invalid(&m, "ciliumnodes"), Some(2.0), "{m}");
    // The first 4,096 junk entries each named, the cap named once, the Subnet without a block.
    assert_eq!(invalid(&m, "subnets"), Some(4096.0 + 1.0 + 1.0), "{m}");
    let log = agent.log_text();
    assert!(log.contains("node-x") && log.contains("no-block"), "{log}");
}

/// The backoffs a source's watch logged since `from` (a byte offset of the
/// log): `retry_in_ms` of each "watch still failing" line, by source.
fn logged_backoffs(log: &str, from: usize) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in log.get(from..).unwrap_or_default().lines() {
        if !line.contains("watch still failing") {
            continue;
        }
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(|v| v.trim_matches('"').to_owned())
        };
        if let (Some(source), Some(ms)) = (field("source="), field("retry_in_ms=")) {
            out.entry(source).or_default().push(ms.parse().unwrap());
        }
    }
    out
}

#[test]
fn a_failing_api_is_retried_with_a_growing_backoff_not_hammered() {
    if !can_run_netns_tests("a_failing_api_is_retried_with_a_growing_backoff_not_hammered") {
        return;
    }
    let (_sim, api, _lab, agent) = cluster_with_a_finding("k500", |_| {});
    // Nothing but 500s, with every watch dropped: the watches back off (0.5 s
    // doubling, jittered by up to the delay itself) instead of retrying at once.
    let from = agent.log_text().len();
    let before = api.counts().total;
    api.fail_next(u32::MAX, 500);
    api.drop_watches();
    // The facts: three retries of one source, each with the delay it waited
    // before the next (what the agent decided, not how fast this machine is).
    let (source, delays) = wait_for("three logged retries of one watch", HANG, || {
        logged_backoffs(&agent.log_text(), from)
            .into_iter()
            .find(|(_, d)| d.len() >= 3)
    });
    let during = api.counts().total - before;
    api.fail_next(0, 500);
    figure(format!(
        "500s: {source}'s watch retried after {delays:?} ms; {during} requests meanwhile"
    ));
    assert!(during > 0, "the watches did not retry at all");
    assert!(delays.iter().all(|d| *d >= 500), "{source}: {delays:?}");
    // Doubling with jitter below the delay itself: never shorter than the one before.
    for pair in delays.windows(2) {
        assert!(pair[1] >= pair[0], "{source}: not growing: {delays:?}");
    }
    assert!(delays[2] >= 2 * delays[0], "{source}: {delays:?}");
}

#[test]
fn dropped_watches_410s_and_slow_responses_lose_no_finding_and_duplicate_no_event() {
    if !can_run_netns_tests(
        "dropped_watches_410s_and_slow_responses_lose_no_finding_and_duplicate_no_event",
    ) {
        return;
    }
    let (sim, api, _lab, agent) = cluster_with_a_finding("k410", |_| {});
    wait_for("the first Event", HANG, || {
        event(&api, "tenant", "postgres-0", "RouterIPCollision")
    });
    api.drop_watches();
    api.compact();
    api.gone_next_watches(3);
    api.drop_watches();
    api.set_delay(Duration::from_millis(300));
    a_second_collision_gets_through(&api, &sim.node, &agent);
    api.set_delay(Duration::ZERO);
    wait_for("api-0's Event", HANG, || {
        event(&api, "tenant", "api-0", "RouterIPCollision")
    });
    assert_one_event_each(
        &api,
        &[
            ("postgres-0", "RouterIPCollision"),
            ("api-0", "RouterIPCollision"),
        ],
    );
    let c = api.counts();
    figure(format!(
        "requests: {} total, {} lists, {} watches, {} creates, {} patches, {} failed by fault",
        c.total, c.lists, c.watches, c.creates, c.patches, c.failed_by_fault
    ));
}

#[test]
fn with_the_api_server_down_netlink_detection_goes_on_and_recovers_after() {
    if !can_run_netns_tests("with_the_api_server_down_netlink_detection_goes_on_and_recovers_after")
    {
        return;
    }
    let (sim, api, _lab, agent) = cluster_with_a_finding("kdown", |_| {});
    api.down();
    sim.node.add_veth("kube-ipvs0", "ipvs-peer");
    sim.node
        .ip(&["addr", "add", "10.244.0.35/32", "dev", "kube-ipvs0"]);
    let mut web = pod("tenant", "web-0", ME, &["10.244.0.35"]);
    web["metadata"]["uid"] = Value::from("uid-web-0");
    api.apply(Res::Pods, web); // queued for when the server is back
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert!(
        postgres_found(&m),
        "findings lost while the API server is down:\n{m}"
    );
    // The kernel side keeps reconciling while the pods source is down.
    let reconciled = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(m, "ipshadow_source_up", &[("source", "netlink")]) == Some(1.0)
            && sample(m, "ipshadow_source_up", &[("source", "pods")]) == Some(0.0)
    });
    assert!(reconciled.is_some(), "log:\n{}", agent.log_text());
    api.up();
    let local = |m: &str| {
        sample(
            m,
            "ipshadow_collision_info",
            &[("pod", "web-0"), ("kind", "LocalAddressCollision")],
        ) == Some(1.0)
    };
    assert!(
        AgentProc::wait_metrics(&sim.node, Duration::from_secs(90), local).is_some(),
        "no recovery after the API server came back; log:\n{}",
        agent.log_text()
    );
    wait_for("web-0's Event", Duration::from_mins(1), || {
        event(&api, "tenant", "web-0", "LocalAddressCollision")
    });
    let (status, _) = agent.terminate();
    assert!(status.success());
}

/// Adds api-0 on the other node's router IP and waits (up to a minute) until
/// it and postgres-0 are both findings: nothing lost to the faults at hand.
fn a_second_collision_gets_through(api: &ApiServer, ns: &NetNs, agent: &AgentProc) {
    api.apply(Res::Pods, pod("tenant", "api-0", ME, &[OTHER_ROUTER]));
    let both = |m: &str| {
        ["postgres-0", "api-0"]
            .iter()
            .all(|p| sample(m, "ipshadow_collision_info", &[("pod", p)]) == Some(1.0))
    };
    assert!(
        AgentProc::wait_metrics(ns, Duration::from_mins(1), both).is_some(),
        "lost a finding; log:\n{}",
        agent.log_text()
    );
}

/// Every URI answered 429, with how long after it the same URI came next:
/// both instants are the test API server's, taken as each request arrived.
fn retries_after_429(api: &ApiServer) -> Vec<(String, Duration)> {
    let timeline = api.counts().timeline;
    let mut out = Vec::new();
    for (i, (at, uri, status)) in timeline.iter().enumerate() {
        if *status != Some(429) {
            continue;
        }
        if let Some((next, _, _)) = timeline[i + 1..].iter().find(|(_, u, _)| u == uri) {
            out.push((uri.clone(), *next - *at));
        }
    }
    out
}

#[test]
fn throttling_429_with_retry_after_is_waited_out_and_loses_nothing() {
    if !can_run_netns_tests("throttling_429_with_retry_after_is_waited_out_and_loses_nothing") {
        return;
    }
    const RETRY_AFTER: u64 = 2;
    let sim = SimNode::kube_ovn("k429", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new("429", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let router =
        |m: &str| sample(m, "ipshadow_collision_info", &[("pod", "postgres-0")]) == Some(1.0);
    assert!(AgentProc::wait_metrics(&sim.node, HANG, router).is_some());
    wait_for("the first Event", Duration::from_secs(10), || {
        event(&api, "tenant", "postgres-0", "RouterIPCollision")
    });

    // The API server sheds load (API Priority and Fairness): the next 25 requests
    // get 429 with Retry-After. Every watch re-connects and a new collision needs
    // an Event, so watches and writes both meet it.
    api.throttle_next(25, RETRY_AFTER);
    api.drop_watches();
    a_second_collision_gets_through(&api, &sim.node, &agent);
    wait_for("api-0's Event", Duration::from_mins(1), || {
        event(&api, "tenant", "api-0", "RouterIPCollision")
    });
    let c = api.counts();
    assert_eq!(c.throttled, 25, "not every throttled answer was met");
    // An order of events, not a timing: the server took the 429's instant
    // before it answered, the agent slept Retry-After after reading the answer
    // and only then sent the retry, whose instant the server took on arrival.
    // However slow the machine, an agent that waits it out cannot retry
    // sooner; only one that does not wait can.
    let retries = retries_after_429(&api);
    assert!(!retries.is_empty());
    let retry_after = Duration::from_secs(RETRY_AFTER);
    for (uri, waited) in &retries {
        assert!(
            *waited >= retry_after,
            "{uri} retried {waited:?} after a 429 with Retry-After: {RETRY_AFTER}"
        );
    }
    let shortest = retries.iter().map(|(_, w)| *w).min().unwrap();
    figure(format!(
        "429 x {}: {} retries of the same request, the soonest after {shortest:?} (Retry-After: {RETRY_AFTER} s)",
        c.throttled,
        retries.len()
    ));
    assert_one_event_each(
        &api,
        &[
            ("postgres-0", "RouterIPCollision"),
            ("api-0", "RouterIPCollision"),
        ],
    );
    let (status, _) = agent.terminate();
    assert!(status.success());
}

#[test]
fn watches_dropped_fifteen_times_resume_without_relisting_or_losing_a_change() {
    if !can_run_netns_tests("watches_dropped_fifteen_times_resume") {
        return;
    }
    let sim = SimNode::kube_ovn("kflap", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    let lab = Lab::new("flap", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    // The streams the agent watches in this cluster: pods here, this Node,
    // CiliumNodes, and Cilium's ConfigMap (no Subnets: their CRD is absent;
    // no Node metadata: CiliumNodes name the other nodes' addresses). Each
    // stream is open once its list is done, so when all are, every list is
    // in: ready alone does not say so (it needs the pods only).
    const STREAMS: [&str; 4] = ["pods", "nodes", "ciliumnodes", "configmaps"];
    let all_open = || {
        let open = api.wire().open_watches;
        STREAMS
            .iter()
            .all(|s| open.get(*s).copied().unwrap_or(0) == 1)
            .then_some(())
    };
    wait_for("the agent's watches to open", HANG, all_open);
    let start = api.counts();

    // Fifteen rounds: all watch streams end, a colliding pod comes and a
    // harmless one churns; once the colliding pod's Event shows the agent saw
    // it, it goes again, and the next round ends the streams while that
    // deletion may still be on its way.
    const ROUNDS: usize = 15;
    for round in 0..ROUNDS {
        // Every stream resumed after the last drop: this one ends them all.
        wait_for("every watch open again", HANG, all_open);
        api.drop_watches();
        let collide = format!("hit-{round}");
        api.apply(Res::Pods, pod("tenant", &collide, ME, &[ROUTER]));
        api.apply(
            Res::Pods,
            pod(
                "tenant",
                &format!("ok-{round}"),
                ME,
                &[&format!("10.244.4.{}", 20 + round)],
            ),
        );
        wait_for(&format!("{collide}'s Event"), HANG, || {
            event(&api, "tenant", &collide, "RouterIPCollision")
        });
        if round + 1 < ROUNDS {
            api.delete(Res::Pods, "tenant", &collide);
        }
    }
    let last = format!("hit-{}", ROUNDS - 1);
    let settled = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        m.lines()
            .filter(|l| l.starts_with("ipshadow_collision_info{"))
            .count()
            == 1
            && sample(m, "ipshadow_collision_info", &[("pod", &last)]) == Some(1.0)
    });
    assert!(
        settled.is_some(),
        "findings do not match the cluster; log:\n{}",
        agent.log_text()
    );
    // Every colliding pod got its one Event, and the gone ones their resolution.
    for round in 0..ROUNDS {
        let name = format!("hit-{round}");
        wait_for(&format!("{name}'s Events"), Duration::from_secs(40), || {
            let opened = series_objects(&api, &name, "RouterIPCollision").len();
            let resolved = series_objects(&api, &name, "IPCollisionResolved").len();
            let want_resolved = usize::from(round + 1 < ROUNDS);
            (opened == 1 && resolved == want_resolved).then_some(())
        });
    }
    // Every stream resumed after the last drop too: a relist would have come
    // before its watch.
    wait_for("every watch open after the last drop", HANG, all_open);
    let c = api.counts();
    // Relists of the watched resources; the impact lookups (EndpointSlices,
    // webhook configurations, APIServices) are one-off lists, not watches.
    let lookup = |u: &str| {
        ["endpointslices", "webhookconfigurations", "apiservices"]
            .iter()
            .any(|r| u.contains(r))
    };
    let lookups = c.log[start.log.len()..]
        .iter()
        .filter(|(m, u)| m == "GET" && !u.contains("watch=") && lookup(u))
        .count() as u64;
    let (lists, watches) = (c.lists - start.lists - lookups, c.watches - start.watches);
    figure(format!(
        "{ROUNDS} watch drops: {watches} re-watches, {lists} relists ({lookups} impact lookups)"
    ));
    // Resumed from the last resourceVersion: no relist, and one watch per
    // stream per drop (each drop ended every stream).
    assert_eq!(lists, 0, "watches relisted after a plain drop");
    assert_eq!(
        watches,
        (STREAMS.len() * ROUNDS) as u64,
        "{watches} watches for {ROUNDS} drops of {} streams",
        STREAMS.len()
    );
    let (status, _) = agent.terminate();
    assert!(status.success());
}

#[test]
fn metrics_and_logs_never_show_credentials_or_annotations() {
    if !can_run_netns_tests("metrics_and_logs_never_show_credentials_or_annotations") {
        return;
    }
    const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.ipshadow-test-token";
    const ANNOTATION: &str = "hunter2-not-for-metrics";
    let sim = SimNode::kube_ovn("ksec", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    let mut p = pod("tenant", "postgres-0", ME, &[ROUTER]);
    p["metadata"]["annotations"] = serde_json::json!({"example.com/db-password": ANNOTATION});
    api.apply(Res::Pods, p);
    let lab = Lab::new("sec", &api);
    // The service-account token the agent authenticates with.
    let kubeconfig = std::fs::read_to_string(&lab.kubeconfig).unwrap();
    std::fs::write(
        &lab.kubeconfig,
        kubeconfig.replace("user: {}", &format!("user: {{token: {TOKEN}}}")),
    )
    .unwrap();
    let agent = AgentProc::spawn_env(
        &sim.node,
        &["--node", ME, "--log-level", "debug"],
        &[("KUBECONFIG", lab.kubeconfig.to_str().unwrap())],
    );
    agent.wait_ready(&sim.node);
    assert!(
        AgentProc::wait_metrics(&sim.node, HANG, |m| {
            sample(m, "ipshadow_collision_info", &[("pod", "postgres-0")]) == Some(1.0)
        })
        .is_some()
    );
    wait_for("the Event", Duration::from_secs(10), || {
        event(&api, "tenant", "postgres-0", "RouterIPCollision")
    });
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let log = agent.log_text();
    assert!(log.contains("DEBUG"), "not the debug log: {log}");
    let (status, _) = agent.terminate();
    assert!(status.success());
    for (what, text) in [("metrics", &m), ("debug log", &log)] {
        assert!(!text.contains(TOKEN), "the token is in the {what}");
        assert!(
            !text.contains(ANNOTATION),
            "an annotation value is in the {what}"
        );
    }
    let all = serde_json::to_string(&api.event_objects()).unwrap();
    assert!(!all.contains(TOKEN) && !all.contains(ANNOTATION), "{all}");
    figure(
        "secrets: the token and an annotation value appear in neither /metrics, the debug log nor the Events",
    );
}

#[test]
fn check_reads_the_cluster_once_when_given_no_files() {
    if !can_run_netns_tests("check_reads_the_cluster_once_when_given_no_files") {
        return;
    }
    let sim = SimNode::kube_ovn("kchk", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "api-0", ME, &[OTHER_ROUTER]));
    // On another node, holding this node's router IP: found through the status.podIP list.
    api.apply(Res::Pods, pod("tenant", "webhook-0", OTHER, &[ROUTER]));
    api.apply(Res::Pods, pod("tenant", "far-0", OTHER, &["10.244.0.99"]));
    let lab = Lab::new("chk", &api);
    let out = sim
        .node
        .command(ipshadow_tests::ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", ME, "--output", "json"])
        .env("KUBECONFIG", &lab.kubeconfig)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fs = v["findings"].as_array().unwrap();
    let pods: Vec<&str> = fs
        .iter()
        .filter_map(|f| f["pod"]["name"].as_str())
        .collect();
    assert_eq!(pods, ["api-0", "webhook-0"], "{fs:#?}");
    assert!(
        fs.iter()
            .all(|f| f["kind"] == "RouterIPCollision" && f["scope"] == "cross-node")
    );
    // Listed once, from the watch cache: nothing watched, no list repeated.
    let log = api.counts().log;
    assert!(log.iter().all(|(_, u)| !u.contains("watch=")), "{log:#?}");
    let pods_of_node: Vec<_> = log
        .iter()
        .filter(|(_, u)| u.starts_with("/api/v1/pods?") && u.contains("spec.nodeName"))
        .collect();
    assert_eq!(pods_of_node.len(), 1, "{log:#?}");
    assert!(pods_of_node[0].1.contains("resourceVersion=0"), "{log:#?}");
}

/// A kube-ovn node without its router IP, the test API server holding its Node
/// and `pods`, and the agent on it, ready, finding nothing yet.
fn cluster_node_without_router_ip(
    tag: &str,
    pods: &[Value],
) -> (SimNode, ApiServer, Lab, AgentProc) {
    let sim = SimNode::kube_ovn(tag, ROUTER);
    sim.node
        .ip(&["addr", "del", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
    let api = ApiServer::start(Some(&sim.node));
    api.apply(Res::Nodes, node(ME, &["10.244.4.0/24"]));
    for p in pods {
        api.apply(Res::Pods, p.clone());
    }
    let lab = Lab::new(tag, &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    assert_eq!(
        same_node_router(&AgentProc::get(&sim.node, "/metrics").unwrap().1),
        Some(0.0)
    );
    (sim, api, lab, agent)
}

fn same_node_router(m: &str) -> Option<f64> {
    sample(
        m,
        "ipshadow_collisions",
        &[("kind", "RouterIPCollision"), ("scope", "same-node")],
    )
}

#[test]
fn with_the_api_server_an_address_change_is_found_through_netlink() {
    if !can_run_netns_tests("with_the_api_server_an_address_change_is_found_through_netlink") {
        return;
    }
    let (sim, _api, _lab, agent) =
        cluster_node_without_router_ip("knl", &[pod("tenant", "postgres-0", ME, &[ROUTER])]);
    sim.node
        .ip(&["addr", "add", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
    let took = AgentProc::wait_metrics(&sim.node, HANG, |m| same_node_router(m) == Some(1.0));
    let took = took.unwrap_or_else(|| panic!("no finding; log:\n{}", agent.log_text()));
    figure(format!("address added -> finding in /metrics: {took:?}"));
    sim.node
        .ip(&["addr", "del", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
    assert!(
        AgentProc::wait_metrics(&sim.node, HANG, |m| same_node_router(m) == Some(0.0)).is_some(),
        "finding did not clear; log:\n{}",
        agent.log_text()
    );
}

#[test]
fn with_the_api_server_a_new_pod_on_a_local_address_is_found() {
    if !can_run_netns_tests("with_the_api_server_a_new_pod_on_a_local_address_is_found") {
        return;
    }
    let (sim, api, _lab, agent) = cluster_node_without_router_ip("knp", &[]);
    sim.node
        .ip(&["addr", "add", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
    api.apply(Res::Pods, pod("tenant", "postgres-1", ME, &[ROUTER]));
    let took = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(m, "ipshadow_collision_info", &[("pod", "postgres-1")]) == Some(1.0)
    });
    let took = took.unwrap_or_else(|| panic!("no finding; log:\n{}", agent.log_text()));
    figure(format!("pod added -> finding in /metrics: {took:?}"));
}

#[test]
fn a_node_annotation_alone_names_another_node_s_router_ip() {
    if !can_run_netns_tests("a_node_annotation_alone_names_another_node_s_router_ip") {
        return;
    }
    // No CiliumNode for node-b: only its Node's annotation (Cilium's
    // --annotate-k8s-node) says what its router IP is. The agent reads every
    // Node's annotations through a metadata-only watch.
    let sim = SimNode::kube_ovn("kann", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    api.apply(Res::Nodes, node(ME, &["10.244.4.0/24"]));
    let mut other = node(OTHER, &["10.244.1.0/24"]);
    other["metadata"]["annotations"] =
        serde_json::json!({"network.cilium.io/ipv4-cilium-host": OTHER_ROUTER});
    api.apply(Res::Nodes, other);
    api.apply(Res::Pods, pod("tenant", "api-0", ME, &[OTHER_ROUTER]));
    let lab = Lab::new("ann", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let found = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(
            m,
            "ipshadow_collision_info",
            &[
                ("pod", "api-0"),
                ("owner_node", OTHER),
                ("scope", "cross-node"),
            ],
        ) == Some(1.0)
    });
    assert!(found.is_some(), "log:\n{}", agent.log_text());
    let e = wait_for("api-0's Event", HANG, || {
        event(&api, "tenant", "api-0", "RouterIPCollision")
    });
    let note = e["message"].as_str().unwrap_or_default();
    assert!(
        note.contains("network.cilium.io annotations"),
        "the note names where the address was read: {note}"
    );
    let metadata_watches = || {
        api.wire()
            .open_watches
            .get("nodes-metadata")
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(metadata_watches(), 1);
    // Cilium's CiliumNodes appear: every Node's metadata is no longer watched
    // (one event per kubelet status report, per agent), the finding stays.
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(OTHER, OTHER_ROUTER, None, None),
            &["10.244.1.0/24"],
        ),
    );
    wait_for("the Node metadata watch to stop", HANG, || {
        (metadata_watches() == 0).then_some(())
    });
    // A reconcile after the watch stopped: a pod added now, on this node's own
    // router IP, is a finding of its own; the scrape that shows it shows what
    // became of api-0.
    api.apply(Res::Pods, pod("tenant", "witness-0", ME, &[ROUTER]));
    let m = wait_for("a reconcile after the watch stopped", HANG, || {
        let (_, m) = AgentProc::get(&sim.node, "/metrics").ok()?;
        (sample(&m, "ipshadow_collision_info", &[("pod", "witness-0")]) == Some(1.0)).then_some(m)
    });
    assert_eq!(
        sample(
            &m,
            "ipshadow_collision_info",
            &[("pod", "api-0"), ("owner_node", OTHER)]
        ),
        Some(1.0),
        "{m}"
    );
}

#[test]
fn every_list_is_served_from_the_watch_cache() {
    if !can_run_netns_tests("every_list_is_served_from_the_watch_cache") {
        return;
    }
    let sim = SimNode::kube_ovn("kcache", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.set_crd(Res::Subnets, true);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new("cache", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    assert!(
        AgentProc::wait_metrics(&sim.node, HANG, |m| {
            sample(m, "ipshadow_collision_info", &[("pod", "postgres-0")]) == Some(1.0)
        })
        .is_some()
    );
    // Initial states: lists, or streaming lists (watches with
    // sendInitialEvents, from the watch cache) where the server offers them.
    let lists: Vec<String> = api
        .counts()
        .log
        .into_iter()
        .filter(|(m, uri)| {
            m == "GET"
                && (!uri.contains("watch=true") || uri.contains("sendInitialEvents=true"))
                && !uri.contains("/events")
        })
        .filter(|(_, uri)| {
            ["/api/v1/pods", "/api/v1/nodes", "/ciliumnodes", "/subnets"]
                .iter()
                .any(|p| uri.split('?').next().is_some_and(|path| path.ends_with(p)))
        })
        .map(|(_, uri)| uri)
        .collect();
    // Pods here, this Node, CiliumNodes, Subnets (no CiliumNodes would add every Node's metadata).
    assert!(lists.len() >= 4, "{lists:#?}");
    // Nor any other list: the impact lookups of postgres-0's namespace (the
    // APIServices come last) included.
    wait_for("the impact lookups", HANG, || {
        api.counts()
            .log
            .iter()
            .any(|(_, u)| u.contains("/apiservices"))
            .then_some(())
    });
    let uncached = api.counts().uncached_lists;
    assert!(
        uncached.is_empty(),
        "lists not from the watch cache: {uncached:#?}"
    );
    // Nothing the watch cache cannot index (no traffic: no lookup).
    let unindexed = api.counts().unindexed;
    assert!(unindexed.is_empty(), "{unindexed:#?}");
    // With CiliumNodes, not every Node: only this one, by name.
    let watches = api.wire().open_watches;
    assert_eq!(
        watches.get("nodes-metadata").copied().unwrap_or(0),
        0,
        "{watches:?}"
    );
    assert!(
        !api.counts()
            .log
            .iter()
            .any(|(_, u)| u.starts_with("/api/v1/nodes?") && !u.contains("fieldSelector")),
        "a list or watch of every Node"
    );
}

#[test]
fn status_only_updates_of_subnets_and_ciliumnodes_reconcile_nothing() {
    if !can_run_netns_tests("status_only_updates_of_subnets_and_ciliumnodes_reconcile_nothing") {
        return;
    }
    let sim = SimNode::kube_ovn("kstat", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.set_crd(Res::Subnets, true);
    let ovn_default = subnet("ovn-default", "10.244.0.0/16", &["10.244.0.1"]);
    api.apply(Res::Subnets, ovn_default.clone());
    api.apply(Res::Pods, pod("tenant", "web-0", ME, &["10.244.0.35"]));
    let lab = Lab::new("stat", &api);
    // Without the Node condition (node_condition.rs's): each of its writes
    // comes back through the agent's own Node watch as a reconcile, which
    // this count is not about.
    let agent = lab.agent_with(&sim.node, ME, &["--node-condition", "false"]);
    agent.wait_ready(&sim.node);
    let overlaps = |m: &str| sample(m, "ipshadow_allocator_overlaps", &[]);
    assert!(
        AgentProc::wait_metrics(&sim.node, HANG, |m| overlaps(m) == Some(1.0)).is_some(),
        "node-a's range, with its router and Ingress IPs, lies in ovn-default: one overlap"
    );
    // Count from a reconcile after every start-up change: each stream has
    // listed (its watch is open), then a pod added on node-a's router IP is a
    // finding, and the scrape that shows it has counted that reconcile.
    wait_for("the agent's watches to open", HANG, || {
        let open = api.wire().open_watches;
        ["pods", "nodes", "ciliumnodes", "subnets", "configmaps"]
            .iter()
            .all(|s| open.get(*s).copied().unwrap_or(0) == 1)
            .then_some(())
    });
    api.apply(Res::Pods, pod("tenant", "witness-0", ME, &[ROUTER]));
    let reconciles_in = |m: &str| sample(m, "ipshadow_reconciles_total", &[("result", "ok")]);
    let before = wait_for("witness-0's finding", HANG, || {
        let (_, m) = AgentProc::get(&sim.node, "/metrics").ok()?;
        (sample(&m, "ipshadow_collision_info", &[("pod", "witness-0")]) == Some(1.0))
            .then(|| reconciles_in(&m))
            .flatten()
    });
    let reconciles = || reconciles_in(&AgentProc::get(&sim.node, "/metrics").unwrap().1).unwrap();
    // What kube-ovn writes on every address it hands out anywhere, and what a
    // CRD-style Cilium operator writes for every pod: nothing detection reads.
    let mut other = with_pod_cidrs(
        cilium_node(OTHER, OTHER_ROUTER, Some(OTHER_INGRESS), None),
        &["10.244.1.0/24"],
    );
    for i in 0..200u32 {
        let mut s = ovn_default.clone();
        s["status"] = serde_json::json!({
            "v4usingIPs": i, "v4availableIPs": 65_533 - i,
            "v4usingIPrange": format!("10.244.0.2-10.244.0.{}", 2 + i % 250),
        });
        api.apply(Res::Subnets, s);
        other["status"] = serde_json::json!({"ipam": {"operator-status": {}, "used": {
            "10.244.1.7": {"owner": format!("tenant/pod-{i}")}
        }}});
        api.apply(Res::CiliumNodes, other.clone());
    }
    // Then one change of each that detection does read, behind them in their
    // streams: when both show, every status update has been seen.
    let mut fixed = subnet(
        "ovn-default",
        "10.244.0.0/16",
        &["10.244.0.1", "10.244.4.0..10.244.4.255"],
    );
    fixed["status"] = serde_json::json!({"v4usingIPs": 200});
    api.apply(Res::Subnets, fixed);
    other["spec"]["ingress"] = serde_json::json!({"ipv4": "10.244.0.35"});
    api.apply(Res::CiliumNodes, other);
    let seen = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        overlaps(m) == Some(0.0)
            && sample(
                m,
                "ipshadow_collision_info",
                &[("pod", "web-0"), ("kind", "IngressIPCollision")],
            ) == Some(1.0)
    });
    let took = seen.unwrap_or_else(|| {
        panic!(
            "the address change did not show; log:\n{}",
            agent.log_text()
        )
    });
    let during = reconciles() - before;
    figure(format!(
        "400 status-only updates (200 Subnet, 200 CiliumNode) and 2 real changes: {during} reconciles; the Ingress IP change shown {took:?} after it was written"
    ));
    // The two real changes, and one for the CiliumNode that became CRD-style
    // (its status.ipam.used appeared), debounced together or not; and one more
    // if witness-0's trigger was still queued when the count began (a
    // reconcile can read a change before its trigger is taken).
    assert!(during <= 4.0, "{during} reconciles for status-only updates");
    // Changes of the cluster alone: the node's network is not read again.
    let log = agent.log_text();
    assert!(
        log.contains("a change of the cluster only: reusing the host snapshot"),
        "{log}"
    );
}

/// `ipshadow_event_writes_total{result}` from a scrape (a counter: whole).
fn event_writes(sim: &SimNode, result: &str) -> u64 {
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let v = sample(&m, "ipshadow_event_writes_total", &[("result", result)]).unwrap();
    format!("{v}").parse().unwrap()
}

#[test]
fn an_event_deleted_under_a_live_series_comes_back_at_the_next_refresh() {
    if !can_run_netns_tests("an_event_deleted_under_a_live_series_comes_back_at_the_next_refresh") {
        return;
    }
    let sim = SimNode::kube_ovn("kdel", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new("del", &api);
    // A refresh every second instead of every 30 minutes, to see one happen.
    let agent = lab.agent_with(&sim.node, ME, &["--event-refresh-seconds", "1"]);
    agent.wait_ready(&sim.node);
    let first = wait_for("the Event", HANG, || {
        series_objects(&api, "postgres-0", "RouterIPCollision").pop()
    });
    let name = first["metadata"]["name"].as_str().unwrap().to_owned();
    // As the API server's TTL (or an operator) would.
    api.delete(Res::Events, "tenant", &name);
    let back = wait_for("the Event again", HANG, || {
        series_objects(&api, "postgres-0", "RouterIPCollision").pop()
    });
    assert_eq!(
        back["metadata"]["name"],
        name.as_str(),
        "the series' own name"
    );
    assert_ne!(
        back["metadata"]["uid"], first["metadata"]["uid"],
        "a new object"
    );
    // The counter moves once the create's answer is in, just after the object shows.
    wait_for("the second create counted", HANG, || {
        (event_writes(&sim, "created") >= 2).then_some(())
    });
    assert_eq!(event_writes(&sim, "dropped"), 0);
}

#[test]
fn a_series_in_a_terminating_namespace_ends_with_one_line_and_no_retries() {
    if !can_run_netns_tests("a_series_in_a_terminating_namespace_ends_with_one_line_and_no_retries")
    {
        return;
    }
    let sim = SimNode::kube_ovn("kterm", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.terminate_namespace("doomed");
    api.apply(Res::Pods, pod("doomed", "postgres-0", ME, &[ROUTER]));
    api.apply(Res::Pods, pod("tenant", "gateway-0", ME, &[INGRESS]));
    let lab = Lab::new("term", &api);
    let agent = lab.agent_with(&sim.node, ME, &["--event-refresh-seconds", "1"]);
    agent.wait_ready(&sim.node);
    wait_for("the other namespace's Event", HANG, || {
        event(&api, "tenant", "gateway-0", "IngressIPCollision")
    });
    wait_for("the series to be dropped", HANG, || {
        (event_writes(&sim, "dropped") == 1).then_some(())
    });
    let creates = api.counts().creates;
    // Three syncs later (refresh periods, in the agent's debug log): the ended
    // series is not tried again, nor backed off on.
    let from = agent.log_text().len();
    wait_for("three more Event syncs", HANG, || {
        (agent.log_text()[from..].matches("syncing Events").count() >= 3).then_some(())
    });
    assert_eq!(
        api.counts().creates,
        creates,
        "the dropped series was retried"
    );
    assert_eq!(event_writes(&sim, "dropped"), 1);
    assert_eq!(event_writes(&sim, "failed"), 0);
    let log = agent.log_text();
    assert_eq!(
        log.matches("refuses this Event for good").count(),
        1,
        "one log line; log:\n{log}"
    );
}

#[test]
fn two_thousand_findings_write_within_the_budget_and_the_rest_on_the_node() {
    if !can_run_netns_tests(
        "two_thousand_findings_write_within_the_budget_and_the_rest_on_the_node",
    ) {
        return;
    }
    // 2,000 pods on addresses of kube-ipvs0 (2,000 Service IPs in the pod
    // range): 2,000 findings, the default cap of 100 pod series and the default
    // budget (25 at once, then 30 a minute); the Node's ManyShadowedPods first.
    const PODS: usize = 2000;
    let ip_of = |i: usize| format!("10.244.{}.{}", 200 + i / 250, i % 250 + 1);
    let sim = SimNode::kube_ovn("kcap", ROUTER);
    sim.node.add_veth("kube-ipvs0", "ipvs-peer");
    let batch = (0..PODS).fold(String::new(), |mut b, i| {
        let _ = writeln!(b, "addr add {}/32 dev kube-ipvs0", ip_of(i));
        b
    });
    sim.node.ip_batch(&batch);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    for i in 0..PODS {
        api.apply(
            Res::Pods,
            pod("tenant", &format!("svc-{i:04}"), ME, &[&ip_of(i)]),
        );
    }
    let lab = Lab::new("cap", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let many = poll(HANG, || {
        api.event_objects()
            .into_iter()
            .find(|e| e["reason"] == "ManyShadowedPods")
    })
    .unwrap_or_else(|| {
        panic!(
            "no ManyShadowedPods Event; {} creates; log:\n{}",
            api.counts().creates,
            agent.log_text()
        )
    });
    assert_eq!(many["regarding"]["kind"], "Node");
    let note = many["note"].as_str().unwrap();
    assert!(
        note.starts_with("1900 more pods") && note.contains("LocalAddressCollision x1900"),
        "{note}"
    );
    // The budget's burst went out and it holds the rest of the 100 pod series
    // back (its rate, 30 a minute, is kube/recorder.rs's unit test on a clock).
    let pending = |m: &str| sample(m, "ipshadow_events_pending", &[]);
    let held = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        pending(m).is_some_and(|p| p >= 50.0) && api.counts().creates >= 25
    });
    assert!(
        held.is_some(),
        "the burst of 25 written and 50 or more series held back; {} creates, log:\n{}",
        api.counts().creates,
        agent.log_text()
    );
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let creates = api.counts().creates;
    assert_eq!(
        sample(
            &m,
            "ipshadow_collisions",
            &[("kind", "LocalAddressCollision"), ("scope", "same-node")]
        ),
        Some(2000.0),
        "every finding is still in the metrics"
    );
    figure(format!(
        "2,000 findings: the Node's aggregate first, {creates} creates (budget: 25, then 30/min), \
         {} pending",
        sample(&m, "ipshadow_events_pending", &[]).unwrap()
    ));
}

#[test]
fn a_pod_being_deleted_ends_its_series_quietly() {
    if !can_run_netns_tests("a_pod_being_deleted_ends_its_series_quietly") {
        return;
    }
    let sim = SimNode::kube_ovn("kgo", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new("go", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let metrics = || AgentProc::get(&sim.node, "/metrics").unwrap().1;
    let series = |m: &str| sample(m, "ipshadow_collision_info", &[("pod", "postgres-0")]);
    let reconciles = |m: &str| sample(m, "ipshadow_reconciles_total", &[("result", "ok")]);
    wait_for("RouterIPCollision on postgres-0", HANG, || {
        event(&api, "tenant", "postgres-0", "RouterIPCollision")
    });
    wait_for("postgres-0's series", HANG, || series(&metrics()));
    let before = api.core_events_for("tenant", "postgres-0");

    // kubectl delete: the pod gets its deletionTimestamp and lingers while it stops.
    let mut leaving = pod("tenant", "postgres-0", ME, &[ROUTER]);
    leaving["metadata"]["deletionTimestamp"] = Value::from("2026-12-04T20:00:00Z");
    api.apply(Res::Pods, leaving);
    // The reconcile that sees it leaving ends the series in the metrics.
    let seen_at = wait_for("postgres-0's series gone", HANG, || {
        let m = metrics();
        series(&m).is_none().then(|| reconciles(&m)).flatten()
    });
    // Later facts: another reconcile, and another pod's Event written after it.
    api.apply(Res::Pods, pod("tenant", "api-0", ME, &[OTHER_ROUTER]));
    wait_for("a later reconcile", HANG, || {
        reconciles(&metrics()).filter(|n| *n > seen_at)
    });
    wait_for("api-0's Event, written after", HANG, || {
        event(&api, "tenant", "api-0", "RouterIPCollision")
    });
    // Nothing new for the leaving pod: no Warning repeated, no IPCollisionResolved
    // (nothing was fixed; the pod is going), and its series stays gone.
    assert_eq!(api.core_events_for("tenant", "postgres-0"), before);
    assert_eq!(series(&metrics()), None);
}
