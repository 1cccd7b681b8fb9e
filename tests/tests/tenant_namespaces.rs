//! What a pod with NET_ADMIN writes inside its own network namespace — its
//! addresses, its link state — against the real agent on pods the real `ptp`
//! plugin laid out (issue 38): it is a hint, it never sets the Node condition
//! nor counts in the alerting series, and no pod's Event names another
//! namespace's pod or tells it to delete itself on another pod's say-so. What
//! the host itself does (setting a pod's veth down) still speaks for the node.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    cni_node::CniNode,
    http::sample,
    lab::{self, Lab, ME},
    objects::{node, pod},
};
use serde_json::Value;

/// Every PodIPsShadowed condition the agent wrote to its Node, in order.
fn conditions_written(api: &ApiServer) -> Vec<Value> {
    api.counts()
        .writes
        .iter()
        .filter(|w| w.resource == "nodes" && w.sub_resource == "status")
        .filter_map(|w| {
            w.object["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "PodIPsShadowed")
                .cloned()
        })
        .collect()
}

/// The note of the Event `reason` about pod `namespace/name`.
fn note(api: &ApiServer, namespace: &str, name: &str, reason: &str) -> String {
    let e = lab::wait_for(&format!("{reason} on {namespace}/{name}"), HANG, || {
        lab::event(api, namespace, name, reason)
    });
    e["message"].as_str().unwrap().to_owned()
}

#[test]
fn what_a_pod_writes_in_its_own_namespace_never_speaks_for_the_node() {
    let test = "what_a_pod_writes_in_its_own_namespace_never_speaks_for_the_node";
    let Some(n) = CniNode::new(test, "tn", 3) else {
        return;
    };
    let api = ApiServer::start(Some(&n.node));
    api.apply(Res::Nodes, node(ME, &[]));
    api.apply(Res::Pods, pod("tenant-a", "victim", ME, &[n.ip(0)]));
    api.apply(Res::Pods, pod("tenant-b", "thief", ME, &[n.ip(1)]));
    api.apply(Res::Pods, pod("tenant-b", "sulker", ME, &[n.ip(2)]));
    let lab = Lab::new("tn", &api);
    // Addresses changed inside a namespace send the node no notification: the
    // resync reads them again.
    let agent = lab.agent_with(
        &n.node,
        ME,
        &[
            "--node-condition-interval-seconds",
            "1",
            "--resync-seconds",
            "1",
        ],
    );
    agent.wait_ready(&n.node);
    lab::wait_for("the condition False", HANG, || {
        conditions_written(&api)
            .last()
            .filter(|c| c["status"] == "False")
            .cloned()
    });

    // The thief takes the victim's address (dropping its own); the sulker sets
    // its eth0 down. Each needs nothing but NET_ADMIN in its own namespace.
    let thief = &n.pods[1];
    thief.ip(&["addr", "del", &format!("{}/24", n.ip(1)), "dev", "eth0"]);
    thief.ip(&["addr", "add", &format!("{}/24", n.ip(0)), "dev", "eth0"]);
    n.pods[2].ip(&["link", "set", "eth0", "down"]);
    let hints = |m: &str, kind: &str| sample(m, "ipshadow_hints", &[("kind", kind)]);
    AgentProc::wait_metrics(&n.node, HANG, |m| {
        hints(m, "PodAddressHeldTwice") == Some(1.0)
            && hints(m, "PodRouteMisdirected") == Some(1.0)
            && hints(m, "PodRouteDeadEnd") == Some(1.0)
    })
    .expect("the three hints in /metrics");
    let (_, m) = AgentProc::get(&n.node, "/metrics").unwrap();
    for kind in [
        "PodAddressHeldTwice",
        "PodRouteMisdirected",
        "PodRouteDeadEnd",
    ] {
        let counted = sample(&m, "ipshadow_kernel_truth_problems", &[("kind", kind)]);
        assert_eq!(counted, Some(0.0), "{kind} in the alerting series: {m}");
    }

    // The victim is told a second namespace holds its address, but not whose,
    // and not to delete itself; the thief's Event does not name the victim.
    let told = note(&api, "tenant-a", "victim", "PodAddressHeldTwice");
    for word in ["tenant-b", "thief", "delete"] {
        assert!(
            !told.contains(word),
            "{word:?} in the victim's note: {told}"
        );
    }
    let told = note(&api, "tenant-b", "thief", "PodRouteMisdirected");
    assert!(!told.contains("victim"), "{told}");
    let _ = note(&api, "tenant-b", "sulker", "PodRouteDeadEnd");
    for kind in [
        "PodAddressHeldTwice",
        "PodRouteMisdirected",
        "PodRouteDeadEnd",
    ] {
        assert!(
            lab::event(&api, "default", ME, kind).is_none(),
            "{kind} on the Node"
        );
    }

    // What the host does speaks for the node: the control that the condition
    // follows at all. Before it, every condition written was False.
    let before = conditions_written(&api).len();
    n.node.ip(&["link", "set", n.veth(2), "down"]);
    let on = lab::wait_for("the condition True", HANG, || {
        conditions_written(&api)
            .last()
            .filter(|c| c["status"] == "True")
            .cloned()
    });
    assert_eq!(on["reason"], "PodRouteDeadEnd", "{on}");
    let written = conditions_written(&api);
    assert!(
        written[..before].iter().all(|c| c["status"] == "False"),
        "{written:#?}"
    );
    let message = on["message"].as_str().unwrap();
    assert!(
        message.contains("sulker") && !message.contains("victim"),
        "{message}"
    );
}
