//! Calico's and the bridge plugin's sandbox refusals over what the node kept
//! from before, as `check` reports them on a node laid out as the refusal
//! says (real messages: tests/corpus/realworld/sandbox): each found on the
//! refused pod, with the address, the interface and that CNI's fix only; a
//! look-alike of another plugin gives nothing.
//!
//! Calico's leftover veth is a real veth named as Calico names them, holding
//! the host route Calico found in the way; the bridge is a real bridge.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; an end-to-end scenario reads top to bottom"
)]

use std::path::Path;

use ipshadow_tests::{
    can_run_netns_tests, ipshadow_bin,
    netns::NetNs,
    objects::{kubelet_sandbox_event, list, node, waiting_pod},
};
use serde_json::Value;

/// The message of `cni`'s first real Event in the corpus.
fn real_message(cni: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus/realworld/sandbox/event-messages-other-cnis.json");
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .find(|e| e["cni"] == cni && e["kind"] == "real-event")
        .and_then(|e| e["message"].as_str())
        .unwrap()
        .to_owned()
}

/// `check`'s findings on `ns` as node-a, with `pods`, `nodes` and `events`.
fn check(ns: &NetNs, pods: Vec<Value>, nodes: Vec<Value>, events: Vec<Value>) -> Vec<Value> {
    let dir = ipshadow_tests::TempDir::new("refusals");
    let mut args: Vec<String> = Vec::new();
    for (flag, file, items) in [
        ("--pods", "pods.json", pods),
        ("--nodes", "nodes.json", nodes),
        ("--events", "events.json", events),
    ] {
        let path = dir.join(file);
        std::fs::write(&path, serde_json::to_vec(&list(items)).unwrap()).unwrap();
        args.extend([flag.to_owned(), path.to_str().unwrap().to_owned()]);
    }
    let out = ns
        .command(ipshadow_bin().to_str().unwrap())
        .args([
            "check", "--node", "node-a", "--output", "json", "--ebpf", "off",
        ])
        .args(&args)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["findings"].as_array().unwrap().clone()
}

fn assert_own_words(message: &str, want: &[&str], foreign: &[&str]) {
    for words in want {
        assert!(message.contains(words), "{words:?} not in {message}");
    }
    for words in foreign {
        assert!(
            !message.to_lowercase().contains(words),
            "{words}: {message}"
        );
    }
}

#[test]
fn calicos_route_through_a_leftover_veth_is_found_on_the_refused_pod_with_calicos_fix() {
    if !can_run_netns_tests(
        "calicos_route_through_a_leftover_veth_is_found_on_the_refused_pod_with_calicos_fix",
    ) {
        return;
    }
    // calico#8180: 172.25.136.1 is still routed through calif6cb5368383.
    let message = real_message("calico");
    assert!(message.contains("Iface: calif6cb5368383"), "{message}");
    let ns = NetNs::new("calico-route");
    // The old sandbox's namespace, never torn down, behind its host veth.
    let old = NetNs::new("calico-old");
    ns.ip(&[
        "link",
        "add",
        "calif6cb5368383",
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &old.name,
    ]);
    ns.ip(&["link", "set", "calif6cb5368383", "up"]);
    old.ip(&["link", "set", "eth0", "up"]);
    ns.ip(&[
        "route",
        "add",
        "172.25.136.1/32",
        "dev",
        "calif6cb5368383",
        "scope",
        "link",
    ]);
    let findings = check(
        &ns,
        vec![
            waiting_pod("tenant", "web-0", "node-a"),
            waiting_pod("tenant", "other-0", "node-a"),
        ],
        vec![node("node-a", &[])],
        vec![
            kubelet_sandbox_event("tenant", "web-0", &message, 12),
            // DANM's look-alike of an address in use: no plugin of these.
            kubelet_sandbox_event(
                "tenant",
                "other-0",
                "requested IP address:172.25.136.9 is already in use",
                3,
            ),
        ],
    );
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(f["kind"], "PodRouteTaken", "{f:#}");
    assert_eq!(f["pod"]["name"], "web-0", "{f:#}");
    assert_eq!(f["ip"], "172.25.136.1", "{f:#}");
    assert_eq!(f["owner"]["device"], "calif6cb5368383", "{f:#}");
    assert_eq!(f["trust"], "hint", "{f:#}");
    assert_eq!(f["kubelet"]["count"], 12, "{f:#}");
    assert_own_words(
        f["message"].as_str().unwrap(),
        &[
            "The node's kernel shows the route: 172.25.136.1 dev calif6cb5368383",
            "`ip link delete calif6cb5368383`",
            "calicoctl ipam check",
        ],
        &["cilium", "kube-ovn", "bridge"],
    );
}

#[test]
fn the_bridges_refusal_is_found_on_the_refused_pod_with_the_old_address_to_delete() {
    if !can_run_netns_tests(
        "the_bridges_refusal_is_found_on_the_refused_pod_with_the_old_address_to_delete",
    ) {
        return;
    }
    // minikube PR#9046: cni0 should hold 10.244.0.1/24; it kept 10.244.3.1/24
    // of the node's previous range, which no node owns now (so no Node finding).
    let message = real_message("bridge");
    let ns = NetNs::new("bridge-refused");
    ns.ip(&["link", "add", "cni0", "type", "bridge"]);
    ns.ip(&["addr", "add", "10.244.3.1/24", "dev", "cni0"]);
    ns.ip(&["link", "set", "cni0", "up"]);
    let findings = check(
        &ns,
        vec![waiting_pod(
            "kube-system",
            "coredns-f9fd979d6-jxvx5",
            "node-a",
        )],
        vec![node("node-a", &["10.244.0.0/24"])],
        vec![kubelet_sandbox_event(
            "kube-system",
            "coredns-f9fd979d6-jxvx5",
            &message,
            5,
        )],
    );
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(f["kind"], "StaleBridgeAddress", "{f:#}");
    assert_eq!(f["pod"]["name"], "coredns-f9fd979d6-jxvx5", "{f:#}");
    assert_eq!(f["ip"], "10.244.3.1", "{f:#}");
    assert_eq!(f["owner"]["device"], "cni0", "{f:#}");
    assert_own_words(
        f["message"].as_str().unwrap(),
        &[
            "bridge cni0 on node node-a still holds 10.244.3.1",
            "it wants 10.244.0.1/24",
            "ip addr del 10.244.3.1/24 dev cni0",
        ],
        &["cilium", "calico", "kube-ovn"],
    );
}
