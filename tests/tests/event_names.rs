//! Event series a tenant cannot end (issue 38): a series' object name is
//! predictable (so a restarted agent finds its series), and a tenant who may
//! create Events in its namespace can create one there first. The agent then
//! writes the series under a fresh name nobody can guess, never onto the
//! tenant's object (the admission policy refuses that update, which ended the
//! series for good); and a count at its top saturates instead of wrapping.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow::report::events::series_name;
use ipshadow_tests::{
    HANG,
    apiserver::{ApiServer, Res},
    can_run_netns_tests,
    lab::{Lab, ME, ROUTER, cozystack, series_objects, wait_for},
    node::SimNode,
    objects::pod,
};
use serde_json::{Value, json};

/// The name the agent gives the RouterIPCollision series of `tenant/postgres-0`.
fn predicted_name() -> String {
    series_name(
        "postgres-0",
        ("uid-postgres-0", "RouterIPCollision", ROUTER),
    )
}

/// An events.k8s.io/v1 Event named `name` about the pod, from `controller`.
fn event_at(name: &str, controller: &str, instance: &str, count: i64) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "tenant"},
        "eventTime": "2026-12-05T10:00:00.000000Z",
        "reportingController": controller, "reportingInstance": instance,
        "action": "Detect", "reason": "RouterIPCollision", "type": "Warning",
        "note": "written by the tenant",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "postgres-0",
                      "namespace": "tenant", "uid": "uid-postgres-0"},
        "series": {"count": count, "lastObservedTime": "2026-12-05T10:00:00.000000Z"}
    })
}

/// The agent's own objects of the series.
fn agents_objects(api: &ApiServer) -> Vec<Value> {
    series_objects(api, "postgres-0", "RouterIPCollision")
        .into_iter()
        .filter(|e| e["reportingController"] == "ipshadow.io/agent")
        .collect()
}

#[test]
fn a_tenants_event_at_the_series_name_moves_the_series_to_a_fresh_name() {
    if !can_run_netns_tests("a_tenants_event_at_the_series_name_moves_the_series_to_a_fresh_name") {
        return;
    }
    let sim = SimNode::kube_ovn("kname", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let name = predicted_name();
    api.apply(
        Res::Events,
        event_at(&name, "tenant.example/forger", "x", 1),
    );
    let lab = Lab::new("name", &api);
    let agent = lab.agent_with(&sim.node, ME, &["--event-refresh-seconds", "1"]);
    agent.wait_ready(&sim.node);
    // Refreshed at least once: the series lives on under its fresh name.
    let ours = wait_for("the series refreshed under a fresh name", HANG, || {
        agents_objects(&api)
            .into_iter()
            .find(|e| e["series"]["count"].as_i64().is_some_and(|c| c >= 2))
    });
    let fresh = ours["metadata"]["name"].as_str().unwrap();
    assert!(
        fresh.starts_with(&format!("{name}.")) && fresh.len() == name.len() + 13,
        "{fresh}"
    );
    assert_eq!(ours["reportingInstance"], ME);
    let theirs = api.object(Res::Events, "tenant", &name).unwrap();
    assert_eq!(theirs["note"], "written by the tenant", "{theirs:#}");
    assert_eq!(theirs["series"]["count"], 1, "{theirs:#}");
    assert_eq!(agents_objects(&api).len(), 1);
}

#[test]
fn a_series_at_the_top_of_its_count_stays_there() {
    if !can_run_netns_tests("a_series_at_the_top_of_its_count_stays_there") {
        return;
    }
    let sim = SimNode::kube_ovn("kcount", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    // A series of this node's (as a tenant can forge one too) at i32::MAX.
    let name = predicted_name();
    let top = i64::from(i32::MAX);
    api.apply(Res::Events, event_at(&name, "ipshadow.io/agent", ME, top));
    let lab = Lab::new("count", &api);
    let agent = lab.agent_with(&sim.node, ME, &["--event-refresh-seconds", "1"]);
    agent.wait_ready(&sim.node);
    // Continued, then refreshed: each write saturates.
    wait_for("two writes of the series", HANG, || {
        let patches = api
            .counts()
            .log
            .iter()
            .filter(|(m, u)| m == "PATCH" && u.contains(&format!("/{name}")))
            .count();
        (patches >= 2).then_some(())
    });
    let e = api.object(Res::Events, "tenant", &name).unwrap();
    assert_eq!(e["series"]["count"].as_i64(), Some(top), "{e:#}");
    assert!(
        agent
            .log_text()
            .contains("continuing an existing Event series")
    );
    assert!(!agent.log_text().contains("panicked"));
}
