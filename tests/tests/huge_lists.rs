//! Lists of huge objects, from the real binary against the test API server:
//! fifty sandbox Events of 1.4 MB messages (what anyone who may write Events
//! in a namespace can create about their own pod, each as large as etcd
//! stores) still give `check` and the agent the refusal and its finding, each
//! message read to its prefix and named as such; past the caps (more Events
//! than are read, a refusal worded past the prefix) what is not read is named
//! and counted, never guessed at. Memory is the benchmark's
//! (`cargo xtask bench lists`), not asserted here.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{process::Output, time::Duration};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests,
    http::sample,
    ipshadow_bin,
    lab::{INGRESS, Lab, ME, ROUTER, event, wait_for},
    node::SimNode,
    objects::{cilium_node, kubelet_sandbox_event, node_accepting, waiting_pod, with_pod_cidrs},
};
use serde_json::{Value, json};

/// How many Events a pod's list reads at most (the agent's, and `check`'s).
const READ: u32 = 50;
/// The bytes of a message read (`MESSAGE_READ_MAX` in the agent).
const PREFIX: usize = 16 * 1024;

/// kubelet's refusal of `ip`, Cilium's wording.
fn in_use(ip: &str) -> String {
    format!(
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for \
         sandbox \"3e42\": plugin type=\"cilium-cni\" failed (add): unable to create endpoint: \
         [PUT /endpoint/{{id}}][400] putEndpointIdInvalid \"IP ipv4:{ip} is already in use\""
    )
}

/// 1.4 MB of a CNI's output, as large as an Event etcd still stores.
fn padding() -> String {
    "stderr: plugin output line that goes on; ".repeat(1_400_000 / 41)
}

/// The `i`-th sandbox Event of `pod`, `message` its text.
fn sandbox_event(pod: &str, i: u32, message: &str) -> Value {
    let mut e = kubelet_sandbox_event("tenant", pod, message, 3);
    e["metadata"]["name"] = json!(format!("{pod}.{i:03}"));
    e
}

/// This node (Cilium's Ingress IP on it) in the test API server.
fn cluster(api: &ApiServer) {
    api.apply(Res::Nodes, node_accepting(ME, &["10.244.4.0/24"], 110));
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), None),
            &["10.244.4.0/24"],
        ),
    );
}

/// `ipshadow check` on this node against the test API server.
fn check(sim: &SimNode, lab: &Lab) -> Output {
    sim.node
        .command(ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", ME, "--output", "json", "--ebpf", "off"])
        .env("KUBECONFIG", &lab.kubeconfig)
        .output()
        .unwrap()
}

/// The pods `check`'s JSON names with a finding of `kind`.
fn pods_with(out: &Output, kind: &str) -> Vec<String> {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == kind)
        .filter_map(|f| f["pod"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn check_finds_the_refusal_among_fifty_events_of_1_4_mb_and_names_each_message_read_to_its_prefix()
{
    if !can_run_netns_tests("check_finds_the_refusal_among_fifty_events_of_1_4_mb") {
        return;
    }
    let sim = SimNode::kube_ovn("hugec", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&api);
    api.apply(Res::Pods, waiting_pod("tenant", "gateway-0", ME));
    let message = format!("{} {}", in_use(INGRESS), padding());
    for i in 0..READ {
        api.apply(Res::Events, sandbox_event("gateway-0", i, &message));
    }
    let lab = Lab::new("hugec", &api);
    let out = check(&sim, &lab);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(
        pods_with(&out, "IngressIPCollision"),
        ["gateway-0"],
        "{stderr}"
    );
    // Each message read to its prefix, and said so (not a silent cut).
    let named = stderr
        .lines()
        .filter(|l| l.contains(&format!("message longer than {PREFIX} bytes")))
        .count();
    assert_eq!(named, READ as usize, "{stderr}");
}

#[test]
fn check_names_what_it_does_not_read_past_the_caps_and_finds_nothing_there() {
    if !can_run_netns_tests("check_names_what_it_does_not_read_past_the_caps") {
        return;
    }
    let sim = SimNode::kube_ovn("capsc", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&api);
    // More refusals than one list reads: the first page finds the address.
    api.apply(Res::Pods, waiting_pod("tenant", "gateway-0", ME));
    for i in 0..READ + 10 {
        api.apply(Res::Events, sandbox_event("gateway-0", i, &in_use(INGRESS)));
    }
    // The refusal worded past the prefix: never read as one.
    api.apply(Res::Pods, waiting_pod("tenant", "late-0", ME));
    let late = format!("{} {}", padding(), in_use(INGRESS));
    api.apply(Res::Events, sandbox_event("late-0", 0, &late));
    let lab = Lab::new("capsc", &api);
    let out = check(&sim, &lab);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        pods_with(&out, "IngressIPCollision"),
        ["gateway-0"],
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("tenant/gateway-0")
                && l.contains(&format!("more than {READ} listed"))),
        "{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.contains("tenant/late-0.000")
            && l.contains(&format!("message longer than {PREFIX} bytes"))),
        "{stderr}"
    );
}

#[test]
fn the_agent_finds_the_refusal_among_fifty_events_of_1_4_mb_and_counts_each_message_cut() {
    if !can_run_netns_tests("the_agent_finds_the_refusal_among_fifty_events_of_1_4_mb") {
        return;
    }
    let sim = SimNode::kube_ovn("hugea", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&api);
    api.apply(Res::Pods, waiting_pod("tenant", "gateway-0", ME));
    let message = format!("{} {}", in_use(INGRESS), padding());
    for i in 0..READ {
        api.apply(Res::Events, sandbox_event("gateway-0", i, &message));
    }
    // The tenant's namespace holds large EndpointSlices of other pods too: read,
    // not kept; the one naming the pod still tells what breaks.
    for s in 0..20 {
        let endpoints: Vec<Value> = (0..1_000)
            .map(|i| json!({"addresses": [format!("10.245.{s}.{}", i % 250)],
                            "targetRef": {"kind": "Pod", "namespace": "tenant", "name": format!("web-{s}-{i}")}}))
            .collect();
        api.apply(
            Res::EndpointSlices,
            json!({"metadata": {"name": format!("web-{s}"), "namespace": "tenant",
                                "labels": {"kubernetes.io/service-name": format!("web-{s}")}},
                   "addressType": "IPv4", "endpoints": endpoints}),
        );
    }
    api.apply(
        Res::EndpointSlices,
        json!({"metadata": {"name": "gateway-x", "namespace": "tenant",
                            "labels": {"kubernetes.io/service-name": "gateway"}},
               "addressType": "IPv4",
               "endpoints": [{"addresses": [INGRESS],
                              "targetRef": {"kind": "Pod", "namespace": "tenant", "name": "gateway-0"}}]}),
    );
    let lab = Lab::new("hugea", &api);
    let agent = lab.agent(&sim.node, ME);
    // Read once the pod has waited 30 s without an address.
    let wait = Duration::from_secs(30) + HANG;
    let e = wait_for("IngressIPCollision on gateway-0", wait, || {
        event(&api, "tenant", "gateway-0", "IngressIPCollision")
    });
    let note = e["message"].as_str().unwrap();
    assert!(note.contains(INGRESS), "{note}");
    let counted = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        let cut = sample(
            m,
            "ipshadow_invalid_objects_total",
            &[("resource", "events")],
        );
        let high = sample(
            m,
            "ipshadow_collision_info",
            &[("pod", "gateway-0"), ("severity", "high")],
        );
        cut == Some(f64::from(READ)) && high == Some(1.0)
    });
    assert!(counted.is_some(), "log:\n{}", agent.log_text());
}
