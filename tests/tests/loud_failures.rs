//! The loud failures from files, as `check` reports them on a simulated node:
//! kubelet's sandbox refusals on a Cilium-only cluster (no Subnets, no
//! annotations), exhaustion, and the node findings of Cilium's configuration.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use ipshadow::inventory::SandboxRefusal;
use ipshadow_tests::{
    can_run_netns_tests,
    check::{Files, check, find, findings},
    lab::{INGRESS, ME, ROUTER},
    node::SimNode,
    objects::{cilium_node, list, pod, subnet, waiting_pod, with_pod_cidrs},
};
use serde_json::{Value, json};

fn corpus(name: &str) -> Value {
    let path = format!("{}/corpus/realworld/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn event(pod: &str, message: &str, count: u64) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{pod}.1"), "namespace": "tenant"},
        "involvedObject": {"kind": "Pod", "namespace": "tenant", "name": pod, "uid": format!("uid-{pod}")},
        "reason": "FailedCreatePodSandBox", "type": "Warning", "count": count,
        "message": message,
    })
}

fn kinds(fs: &[Value]) -> Vec<(String, String)> {
    let mut k: Vec<(String, String)> = fs
        .iter()
        .map(|f| {
            let who = f["pod"]["name"].as_str().unwrap_or("-").to_owned();
            (f["kind"].as_str().unwrap().to_owned(), who)
        })
        .collect();
    k.sort();
    k
}

#[test]
fn sandbox_refusals_without_annotations_are_diagnosed_and_look_alikes_are_not() {
    if !can_run_netns_tests(
        "sandbox_refusals_without_annotations_are_diagnosed_and_look_alikes_are_not",
    ) {
        return;
    }
    // Cilium's own IPAM, no kube-ovn: the pods that cannot start have no
    // address anywhere but in kubelet's FailedCreatePodSandBox Events.
    let sim = SimNode::kube_ovn("loud", ROUTER);
    let messages: Vec<String> = corpus("event-messages-sandbox-failures.json")["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"].as_str().unwrap().to_owned())
        .collect();
    let mut pods = vec![pod("tenant", "web-0", ME, &["10.244.4.40"])];
    let mut events = Vec::new();
    let mut in_use = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        // Every wording of "already in use", each with this node's Ingress IP;
        // exhaustion, look-alikes, garbage, kube-ovn's errors: never a pod finding.
        if let Some(SandboxRefusal::AddressInUse(ip)) = ipshadow::kube::objects::sandbox_refusal(m)
        {
            let name = format!("ingress-{i}");
            pods.push(waiting_pod("tenant", &name, ME));
            events.push(event(&name, &m.replace(&ip.to_string(), INGRESS), 85));
            in_use.push((m.clone(), ip));
        } else {
            let name = format!("other-{i}");
            pods.push(waiting_pod("tenant", &name, ME));
            events.push(event(&name, m, 3));
        }
    }
    assert!(
        in_use.len() >= 2,
        "the corpus has quoted and unquoted wordings"
    );
    let (wording, ip) = in_use[0].clone();
    // Held by nothing: a stale endpoint. Held by web-0: a duplicate.
    pods.push(waiting_pod("tenant", "stale-0", ME));
    events.push(event(
        "stale-0",
        &wording.replace(&ip.to_string(), "10.244.4.99"),
        2,
    ));
    pods.push(waiting_pod("tenant", "dup-0", ME));
    events.push(event(
        "dup-0",
        &wording.replace(&ip.to_string(), "10.244.4.40"),
        4,
    ));
    // A running pod's old refusal is history: it has its own address now.
    events.push(event(
        "web-0",
        &wording.replace(&ip.to_string(), INGRESS),
        1,
    ));

    let files = Files::new("loud");
    let pods = files.write("pods.json", &list(pods));
    let events = files.write("events.json", &list(events));
    let cns = files.write(
        "ciliumnodes.json",
        &list(vec![with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), None),
            &["10.244.4.0/24"],
        )]),
    );
    let out = check(
        &sim,
        &[
            "--pods",
            pods.to_str().unwrap(),
            "--ciliumnodes",
            cns.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fs = findings(&out);
    let mut want: Vec<(String, String)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if matches!(
            ipshadow::kube::objects::sandbox_refusal(m),
            Some(SandboxRefusal::AddressInUse(_))
        ) {
            want.push(("IngressIPCollision".into(), format!("ingress-{i}")));
        }
    }
    want.push(("DuplicatePodIP".into(), "dup-0".into()));
    want.push(("StaleCiliumEndpoint".into(), "stale-0".into()));
    // The corpus's exhaustion wordings (ENI's "No more IPs", "range is full"): one node finding.
    want.push(("PodIPExhaustion".into(), "-".into()));
    want.sort();
    assert_eq!(kinds(&fs), want, "{fs:#?}");
    for f in fs.iter().filter(|f| f["kind"] == "IngressIPCollision") {
        assert_eq!(
            (f["scope"].as_str(), f["ip"].as_str()),
            (Some("same-node"), Some(INGRESS))
        );
        assert_eq!(f["ip_source"], "event");
        assert_eq!(f["kubelet"]["count"], 85, "{f:#}");
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .contains("kubelet reported FailedCreatePodSandBox 85 times")
        );
    }
    let dup = find(&fs, "10.244.4.40");
    assert_eq!(
        (dup["kind"].as_str(), dup["holder"]["name"].as_str()),
        (Some("DuplicatePodIP"), Some("web-0"))
    );
    assert!(
        dup["message"]
            .as_str()
            .unwrap()
            .contains("pod tenant/web-0"),
        "{dup:#}"
    );
    let stale = find(&fs, "10.244.4.99");
    assert!(
        stale["message"]
            .as_str()
            .unwrap()
            .contains("cilium-dbg endpoint disconnect ipv4:10.244.4.99"),
        "{stale:#}"
    );
    let exhausted = fs.iter().find(|f| f["kind"] == "PodIPExhaustion").unwrap();
    assert!(
        exhausted["pod"].is_null() && exhausted["ip"].is_null(),
        "{exhausted:#}"
    );
}

/// `check` for this node with a CiliumNode, and optionally Subnets, Nodes and cilium-config.
fn node_check(
    cn: Value,
    subnets: Option<Value>,
    node: Option<Value>,
    config: Option<Value>,
) -> Vec<Value> {
    let sim = SimNode::kube_ovn("lnode", ROUTER);
    let files = Files::new("lnode");
    let pods = files.write("pods.json", &list(Vec::new()));
    let cns = files.write("cns.json", &list(vec![cn]));
    let mut args = vec![
        "--pods".to_owned(),
        pods.display().to_string(),
        "--ciliumnodes".to_owned(),
        cns.display().to_string(),
    ];
    for (flag, v) in [
        ("--subnets", subnets),
        ("--nodes", node.map(|n| list(vec![n]))),
        ("--cilium-config", config),
    ] {
        if let Some(v) = v {
            args.push(flag.to_owned());
            args.push(
                files
                    .write(&format!("{flag}.json"), &v)
                    .display()
                    .to_string(),
            );
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = check(&sim, &args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    findings(&out)
}

fn cilium_config(ipam: &str, v4: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cilium-config", "namespace": "kube-system"},
           "data": {"ipam": ipam, "cluster-pool-ipv4-cidr": v4, "cluster-pool-ipv4-mask-size": "24"}})
}

fn k8s_node(pod_cidr: &str, pods: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": ME, "uid": "uid-node"},
           "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
           "status": {"allocatable": {"pods": pods, "cpu": "4"}}})
}

#[test]
fn node_findings_come_from_operator_status_cilium_config_subnets_and_capacity() {
    if !can_run_netns_tests(
        "node_findings_come_from_operator_status_cilium_config_subnets_and_capacity",
    ) {
        return;
    }
    let mine = || {
        with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), None),
            &["10.244.4.0/24"],
        )
    };

    // The real operator-status object (a Cilium test fixture), as this node.
    let mut real = corpus("ciliumnode-cilium-operator-status-error.json")["items"][0].clone();
    real["metadata"]["name"] = json!(ME);
    let fs = node_check(real, None, None, None);
    assert_eq!(
        kinds(&fs),
        vec![("CiliumIPAMError".into(), "-".into())],
        "{fs:#?}"
    );
    assert!(
        fs[0]["message"]
            .as_str()
            .unwrap()
            .contains("Pod IPAM allocation failed")
    );
    assert!(
        !fs[0]["message"]
            .as_str()
            .unwrap()
            .contains("network-driver"),
        "resourceIPAMError is not pod IPAM's"
    );
    assert!(fs[0]["ip"].is_null() && fs[0]["pod"].is_null());

    // cluster-pool 100.65.0.0/16 with the node still on 10.244.4.0/24.
    let fs = node_check(
        mine(),
        None,
        None,
        Some(cilium_config("cluster-pool", "100.65.0.0/16")),
    );
    assert_eq!(
        kinds(&fs),
        vec![("IPAMMigrationStuck".into(), "-".into())],
        "{fs:#?}"
    );
    let m = fs[0]["message"].as_str().unwrap();
    assert!(
        m.contains("10.244.4.0/24") && m.contains("100.65.0.0/16") && m.contains("in this order"),
        "{m}"
    );
    for healthy in [
        cilium_config("cluster-pool", "10.244.0.0/16 10.250.0.0/16"),
        cilium_config("kubernetes", ""),
    ] {
        let fs = node_check(mine(), None, None, Some(healthy));
        assert!(fs.is_empty(), "{fs:#?}");
    }

    // The Ingress IP in 100.65.0.0/16 beside ovn-default 10.244.0.0/16 (and the join subnet).
    let subnets = list(vec![
        subnet("ovn-default", "10.244.0.0/16", &["10.244.0.1"]),
        subnet("join", "100.64.0.0/16", &[]),
    ]);
    let moved = with_pod_cidrs(
        cilium_node(ME, "100.65.4.1", Some("100.65.4.7"), None),
        &["100.65.4.0/24"],
    );
    let fs = node_check(moved, Some(subnets), None, None);
    assert_eq!(
        kinds(&fs),
        vec![("IngressIPNotMasqueraded".into(), "-".into())],
        "{fs:#?}"
    );
    assert_eq!(fs[0]["ip"], "100.65.4.7");
    assert!(
        fs[0]["message"]
            .as_str()
            .unwrap()
            .contains("ovn-default (10.244.0.0/16)")
    );
    let carved = list(vec![subnet(
        "ovn-default",
        "10.244.0.0/16",
        &["10.244.0.1", "10.244.0.0..10.244.7.255"],
    )]);
    assert!(node_check(mine(), Some(carved), None, None).is_empty());

    // A /27 node range with 110 allocatable pods; a /24 holds them.
    let small = with_pod_cidrs(
        cilium_node(ME, "10.244.4.1", None, Some("10.244.4.2")),
        &["10.244.4.0/27"],
    );
    let fs = node_check(small, None, Some(k8s_node("10.244.4.0/27", "110")), None);
    assert_eq!(
        kinds(&fs),
        vec![("PodIPCapacityShortfall".into(), "-".into())],
        "{fs:#?}"
    );
    let m = fs[0]["message"].as_str().unwrap();
    assert!(
        m.contains("accepts 110 pods")
            && m.contains("only 28 addresses")
            && m.contains("--max-pods on it to at most 28"),
        "{m}"
    );
    assert!(node_check(mine(), None, Some(k8s_node("10.244.4.0/24", "110")), None).is_empty());
}
