//! Opt-in remediation from the real agent against the test API server, with
//! deploy/remediation's RBAC: dry-run evicts nothing; evict removes a pod
//! through the Eviction API once the finding is old enough, never a bare pod,
//! leaves a pod whose PodDisruptionBudget allows no disruption (the API answers
//! 429) and tries it again, a restart included. When it acts (the minimum age,
//! the interval) is checked on a paused clock in daemon/remediate/loop_tests.rs.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use std::time::{Duration, Instant};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, deploy, figure,
    http::sample,
    lab::{INGRESS, Lab, ME, ROUTER, cozystack, event, wait_for},
    node::SimNode,
    objects::{cilium_node, pod, with_pod_cidrs},
};
use serde_json::{Value, json};

const HEALTH: &str = "10.244.4.104";
const AFTER: Duration = Duration::from_secs(2);
const INTERVAL: Duration = Duration::from_secs(5);

/// A pod a controller owns, labelled `app: <app>`.
fn controlled(name: &str, ip: &str, (kind, owner): (&str, &str), app: &str) -> Value {
    let mut p = pod("tenant", name, ME, &[ip]);
    p["metadata"]["labels"] = json!({ "app": app });
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": owner,
        "uid": format!("uid-{owner}"), "controller": true, "blockOwnerDeletion": true}]);
    p
}

/// Three shadowed pods on node-a: one a ReplicaSet owns, one a StatefulSet owns
/// behind a PodDisruptionBudget that allows nothing, one bare.
fn cluster(api: &ApiServer) {
    cozystack(api);
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), Some(HEALTH)),
            &["10.244.4.0/24"],
        ),
    );
    api.apply(
        Res::Pods,
        controlled("web-0", ROUTER, ("ReplicaSet", "web-5d9c"), "web"),
    );
    api.apply(
        Res::Pods,
        controlled("db-0", HEALTH, ("StatefulSet", "db"), "db"),
    );
    api.apply(Res::Pods, pod("tenant", "bare-0", ME, &[INGRESS]));
    api.apply(
        Res::Pdbs,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "db", "namespace": "tenant"},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
               "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}}),
    );
}

/// When each eviction was asked for, and of which pod.
fn evictions(api: &ApiServer) -> Vec<(Instant, String)> {
    api.counts()
        .timeline
        .into_iter()
        .filter(|(_, uri, _)| uri.ends_with("/eviction"))
        .map(|(at, uri, _)| (at, uri))
        .collect()
}

fn agent(lab: &Lab, sim: &SimNode, mode: &str) -> AgentProc {
    lab.agent_with(
        &sim.node,
        ME,
        &[
            "--remediate",
            mode,
            "--remediate-after",
            &format!("{}s", AFTER.as_secs()),
            "--remediate-interval",
            &format!("{}s", INTERVAL.as_secs()),
        ],
    )
}

#[test]
fn dry_run_says_what_it_would_evict_and_evicts_nothing() {
    if !can_run_netns_tests("dry_run_says_what_it_would_evict_and_evicts_nothing") {
        return;
    }
    let sim = SimNode::kube_ovn("rdry", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&api);
    let lab = Lab::new("rdry", &api);
    let _agent = agent(&lab, &sim, "dry-run");
    let said = wait_for("an IPShadowWouldEvict Event", HANG, || {
        ["db-0", "web-0"]
            .into_iter()
            .find_map(|p| event(&api, "tenant", p, "IPShadowWouldEvict"))
    });
    assert!(
        said["message"]
            .as_str()
            .unwrap()
            .contains("would evict this pod"),
        "{said}"
    );
    // The next interval's turn (the other pod's) was taken: still nothing
    // evicted, never the bare pod.
    let m = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(
            m,
            "ipshadow_remediations_total",
            &[("action", "dry-run"), ("result", "would-evict")],
        )
        .is_some_and(|n| n >= 2.0)
    });
    assert!(m.is_some(), "no second dry-run action");
    assert!(evictions(&api).is_empty());
    assert!(event(&api, "tenant", "bare-0", "IPShadowWouldEvict").is_none());
    for p in ["web-0", "db-0", "bare-0"] {
        assert!(api.object(Res::Pods, "tenant", p).is_some(), "{p} is gone");
    }
}

#[test]
fn evict_removes_a_controlled_pod_and_respects_its_budget() {
    if !can_run_netns_tests("evict_removes_a_controlled_pod_and_respects_its_budget") {
        return;
    }
    let sim = SimNode::kube_ovn("revict", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&api);
    let lab = Lab::new("revict", &api);
    let first = agent(&lab, &sim, "evict");
    wait_for("web-0 evicted", HANG * 2, || {
        api.object(Res::Pods, "tenant", "web-0")
            .is_none()
            .then_some(())
    });
    // The agent records the Event once the eviction returned: the pod may be gone first.
    wait_for("web-0's IPShadowEvicted Event", HANG, || {
        event(&api, "tenant", "web-0", "IPShadowEvicted")
    });
    // A restart (a rollout, a crash) must not let it act sooner than the interval.
    drop(first);
    let before_restart = evictions(&api).len();
    let agent = agent(&lab, &sim, "evict");
    // db-0 again: the budget still allows nothing.
    wait_for("db-0 tried twice", HANG * 3, || {
        (evictions(&api)
            .iter()
            .filter(|(_, u)| u.contains("/pods/db-0/"))
            .count()
            >= 2)
            .then_some(())
    });
    let tried = evictions(&api);
    // When it acts (the minimum age, one pod per interval, the start counted
    // as an action) is daemon/remediate/loop_tests.rs's, on a paused clock;
    // here, what: the restarted agent tried db-0 again rather than anything new.
    assert!(
        tried[before_restart..]
            .iter()
            .all(|(_, u)| u.contains("/pods/db-0/")),
        "{tried:?}"
    );
    assert!(
        tried.iter().all(|(_, u)| !u.contains("bare-0")),
        "{tried:?}"
    );
    assert!(api.object(Res::Pods, "tenant", "db-0").is_some());
    assert!(api.object(Res::Pods, "tenant", "bare-0").is_some());
    let blocked = event(&api, "tenant", "db-0", "IPShadowEvictionBlocked").unwrap();
    assert!(
        blocked["message"]
            .as_str()
            .unwrap()
            .contains("PodDisruptionBudget"),
        "{blocked}"
    );
    figure(format!(
        "remediation: {} eviction requests (web-0 evicted, db-0 blocked by its budget), bare-0 untouched",
        tried.len()
    ));

    // deploy/remediation grants exactly the eviction on top of the base.
    let objects = deploy::manifests_of("remediation");
    let extra = deploy::cluster_role_rules(&objects, "ipshadow-remediation");
    let mut rules = deploy::cluster_role_rules(&objects, "ipshadow");
    rules.extend(extra.iter().cloned());
    let used = deploy::used_and_allowed(&api.counts().log, &rules);
    let unused: Vec<_> = deploy::granted(&extra).difference(&used).cloned().collect();
    assert!(unused.is_empty(), "granted but never used: {unused:?}");
    drop(agent);
}
