//! Streaming lists (`sendInitialEvents`) against the test API server playing a
//! kube-apiserver with the `WatchList` gate on, and one with it off: the same
//! findings either way, one refusal at most per watch, then lists.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, RequestCounts, Res},
    can_run_netns_tests, deploy, figure,
    http::sample,
    lab::{Lab, ME, OTHER_ROUTER, ROUTER, cozystack, wait_for},
    netns::NetNs,
    node::SimNode,
    objects::{pod, subnet},
    watch_list::WatchList,
};

/// The watches every agent starts (no traffic: no pod elsewhere followed).
const WATCHED: [&str; 5] = ["pods", "ciliumnodes", "subnets", "nodes", "configmaps"];

/// A same-node and a cross-node collision, and kube-ovn's default Subnet over
/// Cilium's range (a node-level finding that needs Subnets and CiliumNodes).
fn objects(api: &ApiServer) {
    cozystack(api);
    api.set_crd(Res::Subnets, true);
    api.apply(Res::Subnets, subnet("ovn-default", "10.244.0.0/16", &[]));
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    api.apply(Res::Pods, pod("tenant", "web-0", ME, &[OTHER_ROUTER]));
}

/// The agent's findings as its metrics show them, once every watch is up and
/// all three are there: the series that carry a finding's kind, sorted.
fn findings(ns: &NetNs) -> Vec<String> {
    let m = wait_for("every watch up and the three findings", HANG, || {
        let (_, m) = AgentProc::get(ns, "/metrics").ok()?;
        let up = ["pods", "ciliumnodes", "subnets", "nodes"]
            .iter()
            .all(|s| sample(&m, "ipshadow_source_up", &[("source", s)]) == Some(1.0));
        let both = ["postgres-0", "web-0"]
            .iter()
            .all(|p| sample(&m, "ipshadow_collision_info", &[("pod", p)]) == Some(1.0));
        let overlap = m.lines().any(|l| l.contains("kind=\"AllocatorOverlap\""));
        (up && both && overlap).then_some(m)
    });
    let mut lines: Vec<String> = m
        .lines()
        .filter(|l| l.starts_with("ipshadow_") && l.contains("kind=\"") && !l.contains("_total"))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// The requests of the watched resources since `from` (a watch's URI names its
/// resource before the query).
fn watched_requests(c: &RequestCounts, from: usize) -> Vec<String> {
    c.log[from..]
        .iter()
        .filter(|(m, u)| {
            let path = u.split('?').next().unwrap_or_default();
            m == "GET" && WATCHED.iter().any(|r| path.ends_with(&format!("/{r}")))
        })
        .map(|(_, u)| u.clone())
        .collect()
}

#[test]
fn a_streaming_start_and_a_list_start_give_the_same_findings() {
    if !can_run_netns_tests("a_streaming_start_and_a_list_start_give_the_same_findings") {
        return;
    }
    let sim = SimNode::kube_ovn("kstream", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    objects(&api);
    let lab = Lab::new("stream", &api);

    // auto, against a server with streaming lists: every initial state streamed.
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let streamed = findings(&sim.node);
    assert!(
        streamed.iter().any(|l| l.contains("AllocatorOverlap")),
        "{streamed:#?}"
    );
    let (status, _) = agent.terminate();
    assert!(status.success());
    let c = api.counts();
    let asked = watched_requests(&c, 0);
    assert!(
        asked.iter().all(|u| u.contains("watch=true")),
        "no list of a watched resource: {asked:#?}"
    );
    let streams: Vec<&String> = asked
        .iter()
        .filter(|u| u.contains("sendInitialEvents=true"))
        .collect();
    assert_eq!(
        streams.len(),
        WATCHED.len(),
        "one streaming start per watch: {asked:#?}"
    );
    assert!(
        streams
            .iter()
            .all(|u| u.contains("resourceVersionMatch=NotOlderThan")
                && u.contains("allowWatchBookmarks=true")
                && u.contains("resourceVersion=0")),
        "{streams:#?}"
    );
    assert_eq!(c.refused_watches, 0);
    assert!(c.uncached_lists.is_empty(), "{:#?}", c.uncached_lists);
    figure(format!(
        "streaming start: {} requests for the watched resources ({} streaming lists, 0 lists)",
        asked.len(),
        streams.len()
    ));

    // --initial-list list: the same findings from lists, none streamed.
    let from = api.counts().log.len();
    let streams_before = api.counts().streaming_starts;
    let agent = lab.agent_with(&sim.node, ME, &["--initial-list", "list"]);
    agent.wait_ready(&sim.node);
    let listed = findings(&sim.node);
    let (status, _) = agent.terminate();
    assert!(status.success());
    assert_eq!(
        listed, streamed,
        "a list start and a streaming start differ"
    );
    let c = api.counts();
    assert_eq!(c.streaming_starts, streams_before, "nothing streamed");
    let asked = watched_requests(&c, from);
    let lists: Vec<&String> = asked.iter().filter(|u| !u.contains("watch=")).collect();
    assert_eq!(lists.len(), WATCHED.len(), "one list per watch: {asked:#?}");
    figure(format!(
        "list start: {} requests for the watched resources ({} lists, {} watches)",
        asked.len(),
        lists.len(),
        asked.len() - lists.len()
    ));
    // Whole, from the watch cache: a paged list would be a consistent read,
    // from etcd on most servers without streaming lists.
    for u in lists {
        assert!(
            u.contains("resourceVersion=0") && !u.contains("limit="),
            "{u}"
        );
    }
}

#[test]
fn a_server_without_streaming_lists_is_listed_after_one_refusal() {
    if !can_run_netns_tests("a_server_without_streaming_lists_is_listed_after_one_refusal") {
        return;
    }
    let sim = SimNode::kube_ovn("knostream", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    objects(&api);
    let lab = Lab::new("nostream", &api);

    // The reference: the same objects, streamed.
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let streamed = findings(&sim.node);
    let (status, _) = agent.terminate();
    assert!(status.success());

    // A 1.33 server as it comes (WatchList off): refused, then listed.
    api.set_watch_list(WatchList::Off);
    let before = api.counts();
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let listed = findings(&sim.node);
    assert_eq!(listed, streamed, "the fallback's findings differ");
    let c = api.counts();
    assert_eq!(c.streaming_starts, before.streaming_starts);
    // deploy/rbac.yaml allows the fallback's lists (a streaming list is a `watch`).
    let rules = deploy::cluster_role_rules(&deploy::manifests(), "ipshadow");
    let used = deploy::used_and_allowed(&c.log, &rules);
    for (group, resource) in [
        ("", "pods"),
        ("", "nodes"),
        ("", "configmaps"),
        ("cilium.io", "ciliumnodes"),
        ("kubeovn.io", "subnets"),
    ] {
        let key = (group.to_owned(), resource.to_owned(), "list".to_owned());
        assert!(used.contains(&key), "never listed: {group}/{resource}");
    }
    // One watch asks while the others wait for its answer: one refusal.
    let refused = c.refused_watches - before.refused_watches;
    assert_eq!(
        refused,
        1,
        "{refused} refusals for {} watches",
        WATCHED.len()
    );
    let asked = watched_requests(&c, before.log.len());
    figure(format!(
        "WatchList off: {} requests for the watched resources to start ({refused} refused \
         streaming lists, {} lists, {} watches)",
        asked.len(),
        asked.iter().filter(|u| !u.contains("watch=")).count(),
        asked.iter().filter(|u| u.contains("watch=true")).count() as u64 - refused,
    ));
    assert!(
        agent.log_text().contains("no streaming lists"),
        "the fallback is said once: {}",
        agent.log_text()
    );

    // Dropped watches resume from their resourceVersion: no list, no change lost.
    let lists = api.counts().list_starts;
    api.drop_watches();
    api.apply(Res::Pods, pod("tenant", "late-0", ME, &[ROUTER]));
    wait_for("late-0 found after the drop", HANG, || {
        let (_, m) = AgentProc::get(&sim.node, "/metrics").ok()?;
        (sample(&m, "ipshadow_collision_info", &[("pod", "late-0")]) == Some(1.0)).then_some(())
    });
    assert_eq!(
        api.counts().list_starts,
        lists,
        "a dropped watch listed again"
    );

    // A relist of every watch (410 Gone) lists again: the refusal is remembered.
    let c = api.counts();
    let lists_before = c.list_starts;
    api.gone_next_watches(u32::try_from(WATCHED.len()).unwrap());
    api.drop_watches();
    wait_for("every watch relisted", HANG, || {
        (api.counts().list_starts >= lists_before + WATCHED.len() as u64).then_some(())
    });
    let c = api.counts();
    assert_eq!(
        c.refused_watches - before.refused_watches,
        refused,
        "streaming asked again after the refusal"
    );
    let (status, _) = agent.terminate();
    assert!(status.success());
}

#[test]
fn stream_only_keeps_asking_a_server_that_refuses_and_never_lists() {
    if !can_run_netns_tests("stream_only_keeps_asking_a_server_that_refuses_and_never_lists") {
        return;
    }
    let sim = SimNode::kube_ovn("kstreamonly", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    objects(&api);
    api.set_watch_list(WatchList::Absent);
    let lab = Lab::new("streamonly", &api);
    let agent = lab.agent_with(&sim.node, ME, &["--initial-list", "stream"]);
    // Every watch refused at least twice: retried with backoff (0.5-1 s first).
    wait_for("each watch refused twice", HANG, || {
        (api.counts().refused_watches >= 2 * WATCHED.len() as u64).then_some(())
    });
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert_eq!(
        sample(&m, "ipshadow_source_up", &[("source", "ciliumnodes")]),
        Some(0.0),
        "{m}"
    );
    let c = api.counts();
    assert!(
        watched_requests(&c, 0)
            .iter()
            .all(|u| u.contains("watch=true")),
        "nothing listed"
    );
    let (status, _) = agent.terminate();
    assert!(status.success());
}
