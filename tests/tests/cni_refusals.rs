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
    objects::{kubelet_sandbox_event, list, node, pod, waiting_pod},
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

/// Every real message of issue 39's corpus, in its order.
fn issue39_messages() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus/realworld/sandbox/event-messages-issue39.json");
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "real-event")
        .map(|e| e["message"].as_str().unwrap().to_owned())
        .collect()
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

/// The real message of issue 39's corpus that holds `words`.
fn issue39(words: &str) -> String {
    let all = issue39_messages();
    all.into_iter()
        .find(|m| m.contains(words))
        .unwrap_or_else(|| panic!("{words:?} in no message"))
}

#[test]
fn calicos_older_route_ipam_and_exhaustion_wordings_get_calicos_fix_and_look_alikes_nothing() {
    if !can_run_netns_tests(
        "calicos_older_route_ipam_and_exhaustion_wordings_get_calicos_fix_and_look_alikes_nothing",
    ) {
        return;
    }
    // containerd/cri#436: Calico (before 3.x, relayed by containerd) found a
    // route to 10.64.4.8 in the way; it names only its own new veth, so the
    // kernel names the holder: a veth an old sandbox left.
    let ns = NetNs::new("calico-old-words");
    let old = NetNs::new("calico-old-sb");
    let veth = "calia0b1c2d3e4f";
    ns.ip(&[
        "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", &old.name,
    ]);
    ns.ip(&["link", "set", veth, "up"]);
    old.ip(&["link", "set", "eth0", "up"]);
    ns.ip(&["route", "add", "10.64.4.8/32", "dev", veth, "scope", "link"]);
    let event = |pod: &str, words: &str| kubelet_sandbox_event("tenant", pod, &issue39(words), 4);
    let waiting = [
        "route-0", "fixed-0", "fixed-1", "full-0", "svc-0", "aws-0", "cni0-0",
    ];
    let mut pods: Vec<Value> = waiting
        .iter()
        .map(|p| waiting_pod("tenant", p, "node-a"))
        .collect();
    // calico#5337: the fixed address another node's live pod holds.
    pods.push(pod("tenant", "redis-0", "node-b", &["172.16.102.20"]));
    let findings = check(
        &ns,
        pods,
        vec![node("node-a", &[]), node("node-b", &[])],
        vec![
            event("route-0", "Dst: 10.64.4.8/32"),
            event("fixed-0", "Failed to assign address 90.0.0.1"),
            event("fixed-1", "resource already exists: 172.16.102.20"),
            event("full-0", "per host block limit"),
            // Look-alikes: the Service allocator's "range is full", AWS VPC
            // CNI's host route, the bridge's address: no plugin's here.
            event("svc-0", "failed to allocate a serviceIP: range is full"),
            event("aws-0", "failed to add host route: file exists"),
            event("cni0-0", "could not add IP address to"),
        ],
    );
    let found = |kind: &str, pod: &str| {
        findings
            .iter()
            .find(|f| f["kind"] == kind && (f["pod"]["name"] == pod || f["owner"]["node"] == pod))
            .unwrap_or_else(|| panic!("no {kind} for {pod}: {findings:#?}"))
    };
    let route = found("PodRouteTaken", "route-0");
    assert_eq!(route["ip"], "10.64.4.8", "{route:#}");
    assert_eq!(route["owner"]["device"], veth, "{route:#}");
    let stale = found("StaleCalicoAllocation", "fixed-0");
    assert_eq!(stale["ip"], "90.0.0.1", "{stale:#}");
    let dup = found("DuplicatePodIP", "fixed-1");
    assert_eq!(dup["ip"], "172.16.102.20", "{dup:#}");
    let full = found("PodIPExhaustion", "node-a");
    assert_eq!(findings.len(), 4, "a look-alike was read: {findings:#?}");
    let calicos = [
        (route, "calicoctl ipam check"),
        (stale, "calicoctl ipam release --ip=90.0.0.1"),
        (dup, "cni.projectcalico.org/ipAddrs"),
        (full, "maxBlocksPerHost"),
    ];
    for (f, fix) in calicos {
        assert_own_words(
            f["message"].as_str().unwrap(),
            &["Calico", fix],
            &["cilium", "kube-ovn", "host-local"],
        );
    }
}
