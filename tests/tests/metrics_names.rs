//! `--metrics-names`: what an open /metrics shows about tenants. The agent
//! listens on the node's address, which every pod reaches; by default its
//! series name no pod, namespace or Service there, and still carry every
//! finding (by address and kind) and its traffic. A real Prometheus scraping
//! as the ServiceMonitor does (`honorLabels`, the target's own `namespace` and
//! `pod`) does not pin the agent's pod on a finding. Names for authenticated
//! scrapes: tests/tests/metrics_auth.rs.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use std::{collections::BTreeSet, process::Command};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, figure,
    http::get,
    lab::{Lab, ME, OTHER_INGRESS, ROUTER, cozystack},
    netns::NetNs,
    node::SimNode,
    objects::pod,
};
use serde_json::{Value, json};

/// The address kube-proxy (IPVS mode) binds for a tenant's Service, which a
/// system pod holds.
const VIP: &str = "10.244.4.50";
/// A pod's address the node routes into a blackhole.
const LOST: &str = "10.244.0.99";
const PROMETHEUS: &str = "127.0.0.1:9791";

/// Every name a tenant chose in [`cluster`]: pods, namespaces, the Service.
const TENANT_NAMES: [&str; 11] = [
    "tenant-a",
    "postgres-0",
    "tenant-b",
    "cache-0",
    "tenant-c",
    "grab-svc",
    "kube-system",
    "coredns-0",
    "tenant-d",
    "lost-0",
    "postgres-1",
];

/// Tenants' pods on this node's router IP (two: one series alike once the
/// names are gone), on another node's Ingress IP, on an address a tenant's
/// Service claims, and behind a blackholed route.
fn cluster(sim: &SimNode, api: &ApiServer) {
    sim.add_vips(&[VIP]);
    sim.node
        .ip(&["route", "add", "blackhole", &format!("{LOST}/32")]);
    cozystack(api);
    api.apply(Res::Pods, pod("tenant-a", "postgres-0", ME, &[ROUTER]));
    api.apply(Res::Pods, pod("tenant-a", "postgres-1", ME, &[ROUTER]));
    api.apply(Res::Pods, pod("tenant-b", "cache-0", ME, &[OTHER_INGRESS]));
    api.apply(Res::Pods, pod("kube-system", "coredns-0", ME, &[VIP]));
    api.apply(
        Res::Services,
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "grab-svc", "namespace": "tenant-c"},
               "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.77", "clusterIPs": ["10.96.0.77"],
                        "externalIPs": [VIP], "ports": [{"port": 80}]}}),
    );
    api.apply(Res::Pods, pod("tenant-d", "lost-0", ME, &[LOST]));
}

/// `(kind, ip)` of each `ipshadow_collision_info` series.
fn findings(metrics: &str) -> BTreeSet<(String, String)> {
    let label = |l: &str, name: &str| {
        let start = l.find(&format!("{name}=\""))? + name.len() + 2;
        Some(l[start..].split('"').next()?.to_owned())
    };
    metrics
        .lines()
        .filter(|l| l.starts_with("ipshadow_collision_info{"))
        .filter_map(|l| Some((label(l, "kind")?, label(l, "ip")?)))
        .collect()
}

/// Host traffic to the router IP, refused by the node's own stack.
fn knock(ns: &NetNs, times: usize) {
    let _inside = ns.enter();
    for _ in 0..times {
        let _ = std::net::TcpStream::connect_timeout(
            &format!("{ROUTER}:5432").parse().unwrap(),
            std::time::Duration::from_secs(1),
        );
    }
}

/// The agent's /metrics once it shows every finding of [`cluster`] and the
/// traffic [`knock`] sent.
fn settled(sim: &SimNode, agent: &AgentProc) -> String {
    let want: BTreeSet<(String, String)> = [
        ("RouterIPCollision", ROUTER),
        ("IngressIPCollision", OTHER_INGRESS),
        ("LocalAddressCollision", VIP),
        ("HostRouteBlackhole", LOST),
    ]
    .map(|(k, ip)| (k.to_owned(), ip.to_owned()))
    .into();
    AgentProc::wait_metrics(&sim.node, HANG, |m| {
        want.is_subset(&findings(m))
            && ipshadow_tests::http::sample(
                m,
                "ipshadow_refused_connections_total",
                &[("ip", ROUTER)],
            )
            .is_some_and(|n| n >= 1.0)
    })
    .and_then(|_| AgentProc::get(&sim.node, "/metrics").ok())
    .map_or_else(
        || panic!("not every finding in /metrics; log:\n{}", agent.log_text()),
        |(_, m)| m,
    )
}

/// `promtool check metrics` of `body`: its complaints, if any.
fn promtool(body: &str, dir: &std::path::Path) -> Result<(), String> {
    let file = dir.join("metrics.txt");
    std::fs::write(&file, body).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("promtool check metrics < {}", file.display()))
        .output()
        .unwrap();
    out.status.success().then_some(()).ok_or_else(|| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The `ipshadow_collision_info` series a real Prometheus stored from the
/// agent, scraped as the ServiceMonitor does: `honor_labels`, and the
/// target's own `namespace` and `pod` (the agent's pod).
fn as_prometheus_stores(ns: &NetNs, dir: &std::path::Path) -> Vec<Value> {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s}}\n\
             scrape_configs:\n\
             - job_name: ipshadow\n  honor_labels: true\n  \
             static_configs: [{{targets: ['{}'], labels: {{namespace: ipshadow-system, \
             pod: ipshadow-x7k2p, node: node-a}}}}]\n",
            AgentProc::addr()
        ),
    )
    .unwrap();
    let mut prometheus = ns
        .command("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={PROMETHEUS}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let series = ipshadow_tests::lab::poll(HANG, || {
        let _inside = ns.enter();
        let (code, body) = get(
            PROMETHEUS.parse().unwrap(),
            "/api/v1/query?query=ipshadow_collision_info",
        )
        .ok()?;
        let v: Value = serde_json::from_str(&body).ok()?;
        let result = v["data"]["result"].as_array()?;
        (code == 200 && !result.is_empty()).then(|| result.clone())
    });
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    series.expect("Prometheus never stored ipshadow_collision_info")
}

#[test]
fn by_default_an_open_scrape_names_no_tenant_and_keeps_every_finding() {
    if !can_run_netns_tests("by_default_an_open_scrape_names_no_tenant_and_keeps_every_finding") {
        return;
    }
    let sim = SimNode::kube_ovn("mnames", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&sim, &api);
    let lab = Lab::new("mnames", &api);
    let kubeconfig = lab.kubeconfig.to_str().unwrap().to_owned();
    let env = [("KUBECONFIG", kubeconfig.as_str())];

    // What the node shows with the names (the harness's --metrics-names always).
    let named = lab.agent(&sim.node, ME);
    named.wait_ready(&sim.node);
    knock(&sim.node, 3);
    let with_names = settled(&sim, &named);
    for name in ["postgres-0", "postgres-1", "cache-0", "coredns-0", "lost-0"] {
        assert!(
            with_names.contains(&format!("pod=\"{name}\"")),
            "{name} not in\n{with_names}"
        );
    }
    let (status, _) = named.terminate();
    assert!(status.success());

    // The agent as shipped: the same findings and traffic, no tenant's name.
    let agent = AgentProc::spawn_as_shipped(&sim.node, &["--node", ME], &env);
    agent.wait_ready(&sim.node);
    knock(&sim.node, 3);
    let body = settled(&sim, &agent);
    // As a label's value (trust="tenant-address" is no tenant's name).
    for name in TENANT_NAMES {
        assert!(
            !body.contains(&format!("\"{name}\"")),
            "{name} in an open scrape:\n{body}"
        );
    }
    assert_eq!(findings(&body), findings(&with_names), "{body}");
    // The two pods on the router IP are one series, at 1; the counts are the pods'.
    let router: Vec<&str> = body
        .lines()
        .filter(|l| {
            l.starts_with("ipshadow_collision_info{") && l.contains(&format!("ip=\"{ROUTER}\""))
        })
        .collect();
    assert_eq!(router.len(), 1, "{router:#?}");
    assert!(router[0].ends_with(" 1"), "{}", router[0]);
    assert_eq!(
        ipshadow_tests::http::sample(
            &body,
            "ipshadow_collisions",
            &[("kind", "RouterIPCollision"), ("scope", "same-node")]
        ),
        Some(2.0),
        "{body}"
    );
    promtool(&body, &lab.dir).unwrap_or_else(|e| panic!("promtool: {e}\n{body}"));
    let stored = as_prometheus_stores(&sim.node, &lab.dir);
    for s in &stored {
        let labels = &s["metric"];
        assert!(
            labels["pod"].is_null() && labels["namespace"].is_null(),
            "a finding stored with a pod or namespace: {labels}"
        );
        assert_eq!(labels["node"], "node-a", "{labels}");
    }
    let log = agent.log_text();
    assert!(
        log.contains("/metrics shows no pod's namespace or name"),
        "{log}"
    );
    figure(format!(
        "open /metrics by default: {} findings by address and kind, as with names; \
         no pod, namespace or Service name; promtool clean; {} series stored without the agent's pod",
        findings(&body).len(),
        stored.len()
    ));
}

#[test]
fn never_shows_names_and_always_shows_them_to_anyone() {
    if !can_run_netns_tests("never_shows_names_and_always_shows_them_to_anyone") {
        return;
    }
    let sim = SimNode::kube_ovn("mnever", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cluster(&sim, &api);
    let lab = Lab::new("mnever", &api);
    for (names, shown) in [("never", false), ("always", true)] {
        let agent = lab.agent_with(&sim.node, ME, &["--metrics-names", names]);
        agent.wait_ready(&sim.node);
        knock(&sim.node, 3);
        let body = settled(&sim, &agent);
        assert_eq!(
            body.contains("pod=\"postgres-0\""),
            shown,
            "--metrics-names {names}:\n{body}"
        );
        promtool(&body, &lab.dir).unwrap_or_else(|e| panic!("{names}: promtool: {e}\n{body}"));
        let (status, _) = agent.terminate();
        assert!(status.success());
    }
}
