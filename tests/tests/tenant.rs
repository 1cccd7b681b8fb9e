//! A tenant's moves against the real agent (`--remediate evict`) and `audit`,
//! with the test API server: a tenant may create pods, Services and Events in
//! its own namespaces, nothing more. None of it may evict a pod, speak for the
//! node, name another namespace's objects in its pods' Events, or reach a
//! terminal or a note as a control sequence; the router-IP collision Cilium's
//! IPAM caused is still evicted.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use std::{process::Command, time::Duration};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, figure,
    http::sample,
    ipshadow_bin,
    lab::{INGRESS, Lab, ME, ROUTER, event, wait_for},
    node::SimNode,
    objects::{
        cilium_node, kubelet_sandbox_event, node, node_accepting, pending_pod, pod, waiting_pod,
        with_pod_cidrs, write_list,
    },
};
use serde_json::{Value, json};

const HEALTH: &str = "10.244.4.104";
/// The address kube-proxy (IPVS mode) binds on `kube-ipvs0` for the tenant's
/// Service: its `externalIPs` names a kube-system pod's IP.
const VIP: &str = "10.244.4.50";
/// A load-balancer address a tenant's Service reports, bound there too.
const LB_IP: &str = "10.244.4.51";
/// A kube-system pod's IP a forged Event names as "in use".
const SECRET_HOLDER_IP: &str = "10.244.4.60";
/// What a forged message carries: an OSC 52 clipboard write, a screen clear, a
/// bidi override, and a word to look for.
const INJECTED: &str = "\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}\u{1b}[2J\u{202e}pwned\u{202c}";

/// A pod a controller owns.
fn controlled(mut p: Value, owner: &str) -> Value {
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": owner, "uid": format!("uid-{owner}"), "controller": true, "blockOwnerDeletion": true}]);
    p
}

/// kubelet's refusal wording, with what the forger appends.
fn in_use(ip: &str) -> String {
    format!(
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for \
         sandbox \"3e42\": plugin type=\"cilium-cni\" failed (add): unable to create endpoint: \
         [PUT /endpoint/{{id}}][400] putEndpointIdInvalid \"IP ipv4:{ip} is already in use\" {INJECTED}"
    )
}

/// Whether `s` holds a C0/C1 control (other than newline and tab) or a bidi control.
fn has_controls(s: &str) -> bool {
    s.chars().any(|c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

/// Every eviction the agent asked for: the pods' names.
fn evicted(api: &ApiServer) -> Vec<String> {
    api.counts()
        .log
        .into_iter()
        .filter(|(m, u)| m == "POST" && u.ends_with("/eviction"))
        .map(|(_, u)| u)
        .collect()
}

/// The node, its Cilium addresses, a real router-IP collision (evictable) and a
/// pod behind a budget that refuses every eviction (so the agent keeps acting:
/// each of its turns is a fact to wait on), and the tenant's moves.
fn cluster(api: &ApiServer) {
    api.apply(Res::Nodes, node_accepting(ME, &["10.244.4.0/24"], 110));
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), Some(HEALTH)),
            &["10.244.4.0/24"],
        ),
    );
    // Real: Cilium's IPAM handed the router IP to a pod (its owner's name is the tenant's text).
    api.apply(
        Res::Pods,
        controlled(
            pod("tenant", "web-0", ME, &[ROUTER]),
            &format!("web-{INJECTED}"),
        ),
    );
    let mut db = controlled(pod("tenant", "db-0", ME, &[HEALTH]), "db-7c4f");
    db["metadata"]["labels"] = json!({"app": "db"});
    api.apply(Res::Pods, db);
    api.apply(
        Res::Pdbs,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "db", "namespace": "tenant"},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
               "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}}),
    );
    // A system pod whose IP the tenant's Service claims as an external IP.
    api.apply(
        Res::Pods,
        controlled(pod("kube-system", "coredns-0", ME, &[VIP]), "coredns-5d78"),
    );
    api.apply(
        Res::Services,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "grab", "namespace": "tenant"},
               "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.77", "clusterIPs": ["10.96.0.77"],
                        "externalIPs": [VIP], "ports": [{"port": 80}]}}),
    );
    api.apply(
        Res::Pods,
        controlled(
            pod("kube-system", "metrics-0", ME, &[LB_IP]),
            "metrics-6b9d",
        ),
    );
    api.apply(
        Res::Services,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "lb", "namespace": "tenant"},
               "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.78", "ports": [{"port": 80}]},
               "status": {"loadBalancer": {"ingress": [{"ip": LB_IP}]}}}),
    );
    api.apply(
        Res::Pods,
        pod("kube-system", "secret-0", ME, &[SECRET_HOLDER_IP]),
    );
    // A Pending pod whose CNI annotation alone (anyone who may edit the pod
    // writes it) names the Ingress IP; no kube-ovn record backs it.
    api.apply(
        Res::Pods,
        controlled(pending_pod("tenant", "annot-0", ME, INGRESS), "annot-rs"),
    );
    // Forged kubelet Events on the tenant's own Pending pods.
    for (name, message) in [
        ("loop-0", in_use("127.0.0.1")),
        ("router-0", in_use(ROUTER)),
        ("probe-0", in_use(SECRET_HOLDER_IP)),
        (
            "full-0",
            format!(
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup \
                 network for sandbox \"77aa\": plugin type=\"cilium-cni\" failed (add): unable to \
                 allocate IP via local cilium agent: [POST /ipam][502] postIpamFailure range is full {INJECTED}"
            ),
        ),
    ] {
        api.apply(
            Res::Pods,
            controlled(waiting_pod("tenant", name, ME), &format!("{name}-rs")),
        );
        api.apply(
            Res::Events,
            kubelet_sandbox_event("tenant", name, &message, 9),
        );
    }
}

#[test]
fn a_tenant_gets_no_pod_evicted_and_never_speaks_for_the_node() {
    if !can_run_netns_tests("a_tenant_gets_no_pod_evicted_and_never_speaks_for_the_node") {
        return;
    }
    let sim = SimNode::kube_ovn("tnt", ROUTER);
    // kube-proxy in IPVS mode binds the Service's external IP on kube-ipvs0 (here a veth).
    sim.add_vips(&[VIP, LB_IP]);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&api);
    let lab = Lab::new("tnt", &api);
    let _agent = lab.agent_with(
        &sim.node,
        ME,
        &[
            "--remediate",
            "evict",
            "--remediate-after",
            "1s",
            "--remediate-interval",
            "5s",
        ],
    );

    // The real collision is still evicted, and its note carries no control character.
    wait_for("web-0 evicted", HANG * 2, || {
        api.object(Res::Pods, "tenant", "web-0")
            .is_none()
            .then_some(())
    });
    let note = wait_for("web-0's IPShadowEvicted Event", HANG, || {
        event(&api, "tenant", "web-0", "IPShadowEvicted")
    });
    let note = note["message"].as_str().unwrap();
    assert!(
        note.contains("evicted this pod") && !has_controls(note),
        "{note:?}"
    );

    // The forged Events are read once their pods have waited 30 s: wait until
    // the agent holds them as hints, then for three more turns of the
    // remediation loop (db-0 is tried each turn, its budget refuses): a
    // candidate never tried before would have gone before db-0's retries.
    AgentProc::wait_metrics(&sim.node, Duration::from_secs(30) + HANG, |m| {
        sample(m, "ipshadow_hints", &[("kind", "RouterIPCollision")]) == Some(1.0)
            && sample(m, "ipshadow_hints", &[("kind", "DuplicatePodIP")]) == Some(1.0)
            && sample(m, "ipshadow_hints", &[("kind", "PodIPExhaustion")]) == Some(1.0)
    })
    .expect("the forged Events held as hints");
    // The tenant's Service claims coredns-0's address: a finding, named with the Service.
    let claimed = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        m.lines().any(|l| {
            l.starts_with("ipshadow_collision_info{")
                && l.contains("pod=\"coredns-0\"")
                && l.contains("trust=\"tenant-address\"")
        })
    });
    assert!(
        claimed.is_some(),
        "coredns-0 not reported as shadowed by a Service address"
    );
    let tries = |api: &ApiServer| {
        evicted(api)
            .iter()
            .filter(|u| u.contains("/pods/db-0/"))
            .count()
    };
    let before = tries(&api);
    wait_for("three more remediation turns", HANG * 2, || {
        (tries(&api) >= before + 3).then_some(())
    });
    let all = evicted(&api);
    for p in [
        "coredns-0",
        "metrics-0",
        "annot-0",
        "secret-0",
        "loop-0",
        "router-0",
        "probe-0",
        "full-0",
    ] {
        assert!(
            !all.iter().any(|u| u.contains(&format!("/{p}/"))),
            "{all:#?}"
        );
    }
    assert!(api.object(Res::Pods, "kube-system", "coredns-0").is_some());
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert!(
        m.lines().any(|l| l.starts_with("ipshadow_collision_info{")
            && l.contains("pod=\"metrics-0\"")
            && l.contains("trust=\"tenant-address\"")),
        "{m}"
    );

    // Loopback is refused outright: no finding at all.
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert!(
        !m.lines()
            .any(|l| l.starts_with("ipshadow_collision_info{") && l.contains("pod=\"loop-0\"")),
        "{m}"
    );
    // Hints are left out of the counts alerts fire on.
    assert_eq!(
        sample(&m, "ipshadow_ipam_problems", &[("kind", "PodIPExhaustion")]),
        Some(0.0)
    );
    assert_eq!(
        sample(&m, "ipshadow_ipam_problems", &[("kind", "DuplicatePodIP")]),
        Some(0.0)
    );

    // coredns-0's Event tells kube-system a Service elsewhere holds its address, not which.
    let claimed = wait_for("coredns-0's LocalAddressCollision", HANG, || {
        event(&api, "kube-system", "coredns-0", "LocalAddressCollision")
    });
    let text = claimed["message"].as_str().unwrap();
    assert!(
        text.contains("Service") && !text.contains("grab") && !text.contains("tenant"),
        "{text}"
    );
    // probe-0's Event never names the kube-system pod holding the address.
    let probe = wait_for("probe-0's DuplicatePodIP", HANG, || {
        event(&api, "tenant", "probe-0", "DuplicatePodIP")
    });
    let text = probe["message"].as_str().unwrap();
    assert!(
        !text.contains("secret-0") && !text.contains("kube-system"),
        "{text}"
    );

    // Nothing forged on the Node: no Event about exhaustion, no attacker text
    // in any Node Event or the condition; no control character in any note.
    let node_events: Vec<Value> = api
        .event_objects()
        .into_iter()
        .filter(|e| e["regarding"]["kind"] == "Node")
        .collect();
    for e in &node_events {
        let note = e["note"].as_str().unwrap_or_default();
        assert_ne!(e["reason"], "PodIPExhaustion", "{e}");
        assert!(!note.contains("pwned"), "{e}");
    }
    for e in api.event_objects() {
        if e["reportingController"] == "ipshadow.io/agent" {
            let note = e["note"].as_str().unwrap_or_default();
            assert!(!has_controls(note), "{note:?}");
        }
    }
    let conditions = api.object(Res::Nodes, "", ME).unwrap()["status"]["conditions"].clone();
    assert!(!conditions.to_string().contains("pwned"), "{conditions}");
    assert!(
        !conditions.to_string().contains("PodIPExhaustion"),
        "{conditions}"
    );
    figure(format!(
        "tenant moves: {} eviction requests, all for the router and health collisions; \
         {} Node Events, none forged",
        all.len(),
        node_events.len()
    ));
}

#[test]
fn audit_ignores_events_of_another_namespace_and_prints_no_control_character() {
    let dir = ipshadow_tests::TempDir::new("tenant-audit");
    let pods = vec![
        waiting_pod("tenant-b", "db-0", ME),
        waiting_pod("tenant-a", "web-0", ME),
    ];
    let nodes = vec![node(ME, &["10.244.4.0/24"])];
    let cilium_nodes = vec![with_pod_cidrs(
        cilium_node(ME, ROUTER, Some(INGRESS), None),
        &["10.244.4.0/24"],
    )];
    // Written in tenant-a about tenant-b's pod, which the API server allows
    // (core/v1, eventTime unset).
    let mut across = kubelet_sandbox_event("tenant-b", "db-0", &in_use("10.244.4.99"), 4);
    across["metadata"]["namespace"] = json!("tenant-a");
    let own = kubelet_sandbox_event("tenant-a", "web-0", &in_use(INGRESS), 4);
    let mut args = Vec::new();
    for (flag, name, items) in [
        ("--pods", "pods.json", pods),
        ("--nodes", "nodes.json", nodes),
        ("--ciliumnodes", "ciliumnodes.json", cilium_nodes),
        ("--events", "events.json", vec![across, own]),
    ] {
        let path = dir.join(name);
        write_list(&path, items);
        args.push(flag.to_owned());
        args.push(path.to_str().unwrap().to_owned());
    }
    let run = |output: &str| {
        let out = Command::new(ipshadow_bin())
            .arg("audit")
            .args(&args)
            .args(["-o", output])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let v: Value = serde_json::from_str(&run("json")).unwrap();
    let findings: Vec<&Value> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["findings"].as_array().unwrap())
        .collect();
    // tenant-a's own Event counts (a hint); the one about tenant-b's pod does not.
    assert!(
        findings.iter().any(|f| f["pod"]["name"] == "web-0"
            && f["kind"] == "IngressIPCollision"
            && f["trust"] == "hint"),
        "{v:#}"
    );
    assert!(findings.iter().all(|f| f["pod"]["name"] != "db-0"), "{v:#}");
    let table = run("table");
    assert!(table.contains("web-0"), "{table}");
    assert!(!has_controls(&table), "{table:?}");
}
