//! The Node condition `PodIPsShadowed` from the real agent against the test API
//! server: True with the worst finding while the node has findings, False once
//! fixed (node-problem-detector's most common complaint is conditions that
//! never clear), one write per change and changes within the minimum interval
//! written together, other conditions untouched, written again when removed
//! while the agent runs, not written again while unchanged (kubelet's status
//! reports, resyncs), and gone after the documented removal command with the
//! real kubectl.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::time::Duration;

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, figure,
    http::sample,
    lab::{Lab, ME, ROUTER, cozystack, wait_for},
    node::SimNode,
    objects::pod,
};
use serde_json::{Value, json};

/// Our condition on `node`, if any.
fn condition(api: &ApiServer, node: &str) -> Option<Value> {
    api.object(Res::Nodes, "", node)?["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodIPsShadowed")
        .cloned()
}

/// kubelet's own condition is still there.
fn assert_ready_kept(api: &ApiServer) {
    let conditions = api.object(Res::Nodes, "", ME).unwrap()["status"]["conditions"].clone();
    assert!(
        conditions
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready"),
        "{conditions}"
    );
}

fn status_writes(api: &ApiServer) -> usize {
    api.counts()
        .log
        .iter()
        .filter(|(m, u)| m == "PATCH" && u.starts_with(&format!("/api/v1/nodes/{ME}/status")))
        .count()
}

/// The removal of docs/agent.md ("Uninstall"), run for every Node with the real kubectl.
const REMOVE: &str = r#"for n in $(kubectl get nodes -o name); do kubectl patch "$n" --subresource=status -p '{"status":{"conditions":[{"type":"PodIPsShadowed","$patch":"delete"}]}}'; done"#;

/// Runs [`REMOVE`] with kubectl where the API server listens: inside the node's namespace.
fn remove(sim: &SimNode, lab: &Lab) -> std::process::Output {
    let out = sim
        .node
        .command("sh")
        .args(["-ec", REMOVE])
        .env("KUBECONFIG", &lab.kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_node_condition_goes_true_and_clears() {
    if !can_run_netns_tests("the_node_condition_goes_true_and_clears") {
        return;
    }
    let sim = SimNode::kube_ovn("ncond", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    // kubelet's own condition, which ours must leave alone.
    let mut node = api.object(Res::Nodes, "", ME).unwrap();
    node["status"]["conditions"] =
        json!([{"type": "Ready", "status": "True", "reason": "KubeletReady"}]);
    api.apply(Res::Nodes, node);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new("ncond", &api);
    let agent = lab.agent_with(&sim.node, ME, &["--node-condition-interval-seconds", "1"]);
    let on = wait_for("PodIPsShadowed True", HANG, || {
        condition(&api, ME).filter(|c| c["status"] == "True")
    });
    assert_eq!(on["reason"], "RouterIPCollision", "{on}");
    assert!(
        on["message"]
            .as_str()
            .unwrap()
            .contains("tenant/postgres-0 (10.244.4.251)"),
        "{on}"
    );
    assert_eq!(status_writes(&api), 1);

    // Unrelated changes write nothing (once the agent reconciled one, it had
    // its chance); the fix writes False once.
    AgentProc::reconciled_after(&sim.node, || {
        api.apply(Res::Pods, pod("tenant", "web-0", ME, &["10.244.4.77"]));
    });
    assert_eq!(status_writes(&api), 1, "{:#?}", api.counts().log);
    // The API server keeps whole seconds: the fix comes in a later second than
    // the collision's transition, so a moved transition time shows.
    let on_at: jiff::Timestamp = on["lastTransitionTime"].as_str().unwrap().parse().unwrap();
    wait_for("a second past the first transition", HANG, || {
        (jiff::Timestamp::now().as_second() > on_at.as_second()).then_some(())
    });
    api.delete(Res::Pods, "tenant", "postgres-0");
    let off = wait_for("PodIPsShadowed False", HANG, || {
        condition(&api, ME).filter(|c| c["status"] == "False")
    });
    assert_eq!(off["reason"], "NoShadowedPodIPs");
    // The status changed: so did its transition time.
    assert!(
        off["lastTransitionTime"].as_str() > on["lastTransitionTime"].as_str(),
        "{on} {off}"
    );
    // The write came back through the Node watch: the agent reconciled it and
    // wrote nothing more (the interval logic: daemon/condition/tests.rs).
    AgentProc::reconciled_after(&sim.node, || {
        api.apply(Res::Pods, pod("tenant", "web-1", ME, &["10.244.4.78"]));
    });
    assert_eq!(status_writes(&api), 2, "{:#?}", api.counts().log);
    assert_ready_kept(&api);
    figure("PodIPsShadowed: True on the collision, False on the fix, 2 writes, Ready kept");

    // Removed while the agent runs (the README's command): written again.
    remove(&sim, &lab);
    wait_for("PodIPsShadowed back after its removal", HANG, || {
        condition(&api, ME).filter(|c| c["status"] == "False")
    });
    // kubectl's PATCH, then the agent's one.
    assert_eq!(status_writes(&api), 4, "{:#?}", api.counts().log);

    // Uninstall: the agent goes first, then the README's command removes the condition.
    let (exit, _) = agent.terminate();
    assert!(exit.success());
    let out = remove(&sim, &lab);
    assert!(
        condition(&api, ME).is_none(),
        "{}{}\n{:#?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        &api.counts().log[api.counts().log.len().saturating_sub(8)..]
    );
    assert_ready_kept(&api);
}

/// The minimum interval between two writes in the burst test: long enough
/// that the four changes below fall within it on any machine (the test waits
/// for each to be reconciled); the timing itself is daemon/condition/tests.rs's.
const INTERVAL: Duration = Duration::from_secs(10);

#[test]
fn changes_within_the_interval_are_written_together_at_its_end() {
    if !can_run_netns_tests("changes_within_the_interval_are_written_together_at_its_end") {
        return;
    }
    let sim = SimNode::kube_ovn("nburst", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "p-0", ME, &[ROUTER]));
    let lab = Lab::new("nburst", &api);
    let _agent = lab.agent_with(
        &sim.node,
        ME,
        &[
            "--node-condition-interval-seconds",
            &INTERVAL.as_secs().to_string(),
        ],
    );
    wait_for("PodIPsShadowed True", HANG, || {
        condition(&api, ME).filter(|c| c["status"] == "True")
    });
    assert_eq!(status_writes(&api), 1);
    // Four more findings, each a reconcile of its own, none written yet: the
    // agent reconciled each and held the write back.
    for i in 1..=4 {
        AgentProc::reconciled_after(&sim.node, || {
            api.apply(Res::Pods, pod("tenant", &format!("p-{i}"), ME, &[ROUTER]));
        });
        assert_eq!(status_writes(&api), 1, "{:#?}", api.counts().log);
    }
    // Written once more, at the interval's end, with all five.
    let all = wait_for(
        "the condition naming five findings",
        HANG + INTERVAL,
        || {
            condition(&api, ME).filter(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("5 findings"))
            })
        },
    );
    assert_eq!(status_writes(&api), 2, "{all}\n{:#?}", api.counts().log);
    figure(format!(
        "PodIPsShadowed: 5 findings in 5 reconciles, 2 writes ({} s interval)",
        INTERVAL.as_secs()
    ));
}

/// kubelet's status report `beat` of [`ME`]: its Ready condition's heartbeat,
/// patched as kubelet patches it (the other conditions kept).
fn kubelet_report(api: &ApiServer, beat: u32) {
    api.report_node_status(
        ME,
        &json!({"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": format!("2026-12-03T00:00:{:02}Z", beat % 60)}]}),
    );
}

#[test]
fn an_unchanged_condition_is_not_written_again() {
    if !can_run_netns_tests("an_unchanged_condition_is_not_written_again") {
        return;
    }
    let sim = SimNode::kube_ovn("nsame", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    let mut node = api.object(Res::Nodes, "", ME).unwrap();
    node["status"]["conditions"] =
        json!([{"type": "Ready", "status": "True", "reason": "KubeletReady"}]);
    api.apply(Res::Nodes, node);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new("nsame", &api);
    // A resync every second: each one reconciles with nothing changed.
    let _agent = lab.agent_with(
        &sim.node,
        ME,
        &[
            "--node-condition-interval-seconds",
            "1",
            "--resync-seconds",
            "1",
        ],
    );
    let on = wait_for("PodIPsShadowed True", HANG, || {
        condition(&api, ME).filter(|c| c["status"] == "True")
    });
    assert_eq!(status_writes(&api), 1);
    // kubelet's status reports (each a Node update the agent's watch brings,
    // and a reconcile), an unrelated pod, then resyncs with nothing changed.
    for beat in 1..=5 {
        AgentProc::reconciled_after(&sim.node, || kubelet_report(&api, beat));
    }
    AgentProc::reconciled_after(&sim.node, || {
        api.apply(Res::Pods, pod("tenant", "web-0", ME, &["10.244.4.77"]));
    });
    let resynced = AgentProc::reconciles(&sim.node) + 3.0;
    let seen = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(m, "ipshadow_reconciles_total", &[("result", "ok")]).is_some_and(|n| n >= resynced)
    });
    assert!(seen.is_some(), "no resyncs");
    assert_eq!(status_writes(&api), 1, "{:#?}", api.counts().log);
    // Not written again: the condition is the first write's, heartbeat and all.
    assert_eq!(condition(&api, ME), Some(on));
    assert_ready_kept(&api);

    // Replaced by a Node without it (what the fleet bench's kubelet did before
    // it patched as kubelet does): news, written again.
    let mut node = api.object(Res::Nodes, "", ME).unwrap();
    node["status"]["conditions"] =
        json!([{"type": "Ready", "status": "True", "reason": "KubeletReady"}]);
    api.apply(Res::Nodes, node);
    wait_for("PodIPsShadowed back", HANG, || {
        condition(&api, ME).filter(|c| c["status"] == "True")
    });
    assert_eq!(status_writes(&api), 2, "{:#?}", api.counts().log);
    figure("PodIPsShadowed: unchanged over 5 kubelet reports, a pod and 3 resyncs: 1 write");
}
