//! A Service's address written as kube-proxy reads it but not canonically —
//! IPv4-mapped IPv6 (`::ffff:10.244.4.51`), leading zeros (`010.244.004.052`),
//! or past the 16th entry of `externalIPs` or of the load balancer's ingress —
//! claims the address as the canonical form does, in `check`, in the agent
//! (`--remediate evict`: the pod it shadows is never evicted) and in `audit`.
//! A Service holding an address no one can read leaves every unclaimed
//! collision `unchecked`, never `cluster`.
//!
//! kube-vip's layout: the Services' addresses on the node's uplink (`eth0`),
//! not on a device that holds Services' addresses only (there, trust is
//! tenant-address whatever the Services say), so trust rests on the Services'
//! read alone. Each test failed with the binary before the shared parser (run
//! with `IPSHADOW_BIN` pointing at it).
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use std::process::Command;

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests,
    http::sample,
    ipshadow_bin,
    lab::{INGRESS, Lab, ME, ROUTER, wait_for},
    node::SimNode,
    objects::{cilium_node, node_accepting, pod, with_pod_cidrs},
};
use serde_json::{Value, json};

const HEALTH: &str = "10.244.4.104";

/// (pod, its address, its Service's name): each Service claims the pod's
/// address, written another way. `free-0`'s address no Service claims.
const PODS: [(&str, &str, &str); 6] = [
    ("canon-0", "10.244.4.50", "canon"),
    ("mapped-0", "10.244.4.51", "mapped"),
    ("zeros-0", "10.244.4.52", "zeros"),
    ("ext17-0", "10.244.4.53", "ext17"),
    ("ing17-0", "10.244.4.54", "ing17"),
    ("free-0", "10.244.4.55", "-"),
];

fn service(name: &str, external: &[String], ingress: &[String]) -> Value {
    let ingress: Vec<Value> = ingress.iter().map(|ip| json!({"ip": ip})).collect();
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"namespace": "tenant", "name": name,
                        "annotations": {"note": "x".repeat(2048)}},
           "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.77", "clusterIPs": ["10.96.0.77"],
                    "externalIPs": external, "ports": [{"port": 80}]},
           "status": {"loadBalancer": {"ingress": ingress}}})
}

/// The tenant's Services: one per way of writing a pod's address.
fn claims() -> Vec<Value> {
    let others =
        |prefix: &str| -> Vec<String> { (1..=16).map(|i| format!("{prefix}.{i}")).collect() };
    let with = |mut v: Vec<String>, ip: &str| {
        v.push(ip.to_owned());
        v
    };
    vec![
        service("canon", &["10.244.4.50".into()], &[]),
        service("mapped", &["::ffff:10.244.4.51".into()], &[]),
        service("zeros", &["010.244.004.052".into()], &[]),
        service("ext17", &with(others("192.0.2"), "10.244.4.53"), &[]),
        service("ing17", &[], &with(others("198.51.100"), "10.244.4.54")),
    ]
}

/// A Service whose external IP is no address to anyone.
fn odd() -> Value {
    service("odd", &["10.244.4.5x".into()], &[])
}

/// A system pod its controller recreates (an eviction candidate if trusted).
fn controlled(mut p: Value, owner: &str) -> Value {
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": owner, "uid": format!("uid-{owner}"), "controller": true}]);
    p
}

/// The node and its pods; each pod's address on the node's uplink, as kube-vip puts them.
fn cluster(sim: &SimNode, api: &ApiServer) {
    api.apply(Res::Nodes, node_accepting(ME, &["10.244.4.0/24"], 110));
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), Some(HEALTH)),
            &["10.244.4.0/24"],
        ),
    );
    sim.node.add_veth("eth0", "eth0-peer");
    for (name, ip, _) in PODS {
        sim.node
            .ip(&["addr", "add", &format!("{ip}/32"), "dev", "eth0"]);
        api.apply(
            Res::Pods,
            controlled(pod("kube-system", name, ME, &[ip]), &format!("{name}-rs")),
        );
    }
    sim.node.ip(&["link", "set", "eth0", "up"]);
}

/// `check` against `api` on `sim`'s node: its JSON, and its stderr.
fn check(sim: &SimNode, lab: &Lab) -> (Value, String) {
    let out = sim
        .node
        .command(ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", ME, "--output", "json", "--ebpf", "off"])
        .env("KUBECONFIG", &lab.kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    (ipshadow_tests::json_stdout(&out), stderr)
}

/// (kind, scope, trust, device, source) of the finding on `pod`, and its message.
fn shape(v: &Value, pod: &str) -> ((String, String, String, String, String), String) {
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pod"]["name"] == pod)
        .unwrap_or_else(|| panic!("no finding for {pod}: {v:#}"));
    let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    (
        (
            s(&f["kind"]),
            s(&f["scope"]),
            s(&f["trust"]),
            s(&f["owner"]["device"]),
            s(&f["owner"]["source"]),
        ),
        s(&f["message"]),
    )
}

#[test]
fn check_reads_a_services_address_however_written_and_an_unreadable_one_keeps_it_unchecked() {
    if !can_run_netns_tests("check_reads_a_services_address_however_written") {
        return;
    }
    let sim = SimNode::kube_ovn("svck", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&sim, &api);
    for s in claims() {
        api.apply(Res::Services, s);
    }
    let lab = Lab::new("svck", &api);
    let (v, _) = check(&sim, &lab);
    let (canon, _) = shape(&v, "canon-0");
    assert_eq!(
        canon,
        (
            "LocalAddressCollision".into(),
            "same-node".into(),
            "tenant-address".into(),
            "eth0".into(),
            "kernel".into()
        ),
        "{v:#}"
    );
    for (pod, _, svc) in &PODS[1..5] {
        let (got, message) = shape(&v, pod);
        assert_eq!(got, canon, "{pod}: {v:#}");
        assert!(
            message.contains(&format!("Service tenant/{svc}")),
            "{pod}: {message}"
        );
    }
    // The Services were read whole and none claims free-0's address.
    assert_eq!(shape(&v, "free-0").0.2, "cluster", "{v:#}");

    // A Service holding an address no one can read: nobody can say that no
    // Service claims free-0's address.
    api.apply(Res::Services, odd());
    let (v, stderr) = check(&sim, &lab);
    assert_eq!(shape(&v, "free-0").0.2, "unchecked", "{v:#}");
    for (pod, _, _) in &PODS[..5] {
        assert_eq!(shape(&v, pod).0, canon, "{pod}: {v:#}");
    }
    assert!(
        stderr.contains("tenant/odd") && stderr.contains("10.244.4.5x"),
        "{stderr}"
    );
}

/// Every eviction the agent asked for.
fn evicted(api: &ApiServer) -> Vec<String> {
    api.counts()
        .log
        .into_iter()
        .filter(|(m, u)| m == "POST" && u.ends_with("/eviction"))
        .map(|(_, u)| u)
        .collect()
}

#[test]
fn the_agent_evicts_no_pod_a_services_address_shadows_however_written() {
    if !can_run_netns_tests("the_agent_evicts_no_pod_a_services_address_shadows_however_written") {
        return;
    }
    let sim = SimNode::kube_ovn("svag", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&sim, &api);
    for s in claims().into_iter().chain([odd()]) {
        api.apply(Res::Services, s);
    }
    // A real collision (Cilium's IPAM gave the router IP away), evicted; a pod
    // behind a budget that refuses every eviction, tried each turn: the turns
    // are the facts to wait on.
    api.apply(
        Res::Pods,
        controlled(pod("tenant", "web-0", ME, &[ROUTER]), "web-rs"),
    );
    let mut db = controlled(pod("tenant", "db-0", ME, &[HEALTH]), "db-rs");
    db["metadata"]["labels"] = json!({"app": "db"});
    api.apply(Res::Pods, db);
    api.apply(
        Res::Pdbs,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "db", "namespace": "tenant"},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
               "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1}}),
    );
    let lab = Lab::new("svag", &api);
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
    wait_for("web-0 evicted", HANG * 2, || {
        api.object(Res::Pods, "tenant", "web-0")
            .is_none()
            .then_some(())
    });
    let trust_of = |m: &str, pod: &str| {
        m.lines()
            .find(|l| {
                l.starts_with("ipshadow_collision_info{") && l.contains(&format!("pod=\"{pod}\""))
            })
            .and_then(|l| l.split("trust=\"").nth(1)?.split('"').next())
            .map(str::to_owned)
    };
    let seen = AgentProc::wait_metrics(&sim.node, HANG * 2, |m| {
        PODS[..5]
            .iter()
            .all(|(p, _, _)| trust_of(m, p).as_deref() == Some("tenant-address"))
            && trust_of(m, "free-0").as_deref() == Some("unchecked")
            && sample(
                m,
                "ipshadow_invalid_objects_total",
                &[("resource", "services")],
            )
            .is_some_and(|n| n >= 1.0)
    });
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert!(
        seen.is_some(),
        "{:?}\n{m}",
        PODS.map(|(p, _, _)| (p, trust_of(&m, p)))
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
    for (p, _, _) in PODS {
        assert!(
            !all.iter().any(|u| u.contains(&format!("/{p}/"))),
            "{all:#?}"
        );
        assert!(api.object(Res::Pods, "kube-system", p).is_some(), "{p}");
    }
}

#[test]
fn audit_finds_each_pod_a_services_address_shadows_however_written() {
    let api = ApiServer::start(None);
    api.apply(Res::Nodes, node_accepting(ME, &["10.244.4.0/24"], 110));
    for (name, ip, _) in PODS {
        api.apply(Res::Pods, pod("kube-system", name, ME, &[ip]));
    }
    for s in claims().into_iter().chain([odd()]) {
        api.apply(Res::Services, s);
    }
    let lab = Lab::new("svau", &api);
    let out = Command::new(ipshadow_bin())
        .args(["audit", "-o", "json", "--kubeconfig"])
        .arg(&lab.kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let v = ipshadow_tests::json_stdout(&out);
    let mut got: Vec<(String, String)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["findings"].as_array().unwrap())
        .filter(|f| f["kind"] == "LocalAddressCollision")
        .map(|f| {
            let m = f["message"].as_str().unwrap();
            let svc = PODS
                .iter()
                .find(|(_, _, s)| m.contains(&format!("Service tenant/{s} ")))
                .map_or("?", |(_, _, s)| s);
            (
                f["pod"]["name"].as_str().unwrap().to_owned(),
                svc.to_owned(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String)> = PODS[..5]
        .iter()
        .map(|(p, _, s)| ((*p).to_owned(), (*s).to_owned()))
        .collect();
    want.sort();
    assert_eq!(got, want, "{v:#}");
    assert!(stderr.contains("tenant/odd"), "{stderr}");
    // One list of the Services, from the watch cache (the address plan takes
    // the `kubernetes` Service from that list too).
    let lists = api
        .counts()
        .log
        .iter()
        .filter(|(_, u)| u.contains("/services"))
        .count();
    assert_eq!(lists, 1);
}
