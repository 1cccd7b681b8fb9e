//! `ipshadow agent` on a simulated node: event-driven findings in /metrics,
//! health endpoints, a real Prometheus scrape, clean shutdown.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{process::Command, time::Duration};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    can_run_netns_tests, figure,
    http::sample,
    lab::{ME, PROGRAM, ROUTER},
    netns::{NetNs, attached_programs},
    node::SimNode,
    objects::{cilium_node, pod, write_list},
};
use serde_json::Value;

fn dir(tag: &str) -> ipshadow_tests::TempDir {
    ipshadow_tests::TempDir::new(&format!("agent-{tag}"))
}

fn router_collisions(metrics: &str) -> Option<f64> {
    sample(
        metrics,
        "ipshadow_collisions",
        &[("kind", "RouterIPCollision"), ("scope", "same-node")],
    )
}

/// A kube-ovn node with `pods` in a file, the router IP not yet on cilium_host
/// (no CiliumNode: only the kernel can tell), and the agent on it, ready.
fn node_without_router_ip(
    tag: &str,
    pods: Vec<Value>,
) -> (SimNode, ipshadow_tests::TempDir, AgentProc) {
    let sim = SimNode::kube_ovn(tag, ROUTER);
    sim.node
        .ip(&["addr", "del", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
    let d = dir(tag);
    let file = d.join("pods.json");
    write_list(&file, pods);
    let agent = AgentProc::spawn(&sim.node, &["--node", ME, "--pods", file.to_str().unwrap()]);
    agent.wait_ready(&sim.node);
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert_eq!(router_collisions(&m), Some(0.0), "{m}");
    (sim, d, agent)
}

fn router_ip(sim: &SimNode, action: &str) {
    sim.node.ip(&[
        "addr",
        action,
        &format!("{ROUTER}/32"),
        "dev",
        "cilium_host",
    ]);
}

#[test]
fn an_address_appearing_on_cilium_host_becomes_a_finding() {
    if !can_run_netns_tests("an_address_appearing_on_cilium_host_becomes_a_finding") {
        return;
    }
    let (sim, _d, agent) =
        node_without_router_ip("agadd", vec![pod("tenant", "postgres-0", ME, &[ROUTER])]);
    router_ip(&sim, "add");
    let took = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(
            m,
            "ipshadow_collision_info",
            &[
                ("pod", "postgres-0"),
                ("device", "cilium_host"),
                ("role", "router"),
            ],
        ) == Some(1.0)
    });
    let took = took.unwrap_or_else(|| panic!("no finding; log:\n{}", agent.log_text()));
    figure(format!("address added -> finding in /metrics: {took:?}"));
}

#[test]
fn a_finding_clears_when_its_address_goes() {
    if !can_run_netns_tests("a_finding_clears_when_its_address_goes") {
        return;
    }
    let (sim, _d, agent) =
        node_without_router_ip("agdel", vec![pod("tenant", "postgres-0", ME, &[ROUTER])]);
    router_ip(&sim, "add");
    assert!(
        AgentProc::wait_metrics(&sim.node, HANG, |m| router_collisions(m) == Some(1.0)).is_some(),
        "no finding; log:\n{}",
        agent.log_text()
    );
    router_ip(&sim, "del");
    let cleared = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        router_collisions(m) == Some(0.0) && !m.contains("ipshadow_collision_info{")
    });
    assert!(
        cleared.is_some(),
        "finding did not clear; log:\n{}",
        agent.log_text()
    );
}

#[test]
fn a_pod_written_to_the_file_becomes_a_finding() {
    if !can_run_netns_tests("a_pod_written_to_the_file_becomes_a_finding") {
        return;
    }
    let (sim, d, agent) = node_without_router_ip("agpod", vec![]);
    router_ip(&sim, "add");
    write_list(
        &d.join("pods.json"),
        vec![pod("tenant", "postgres-1", ME, &[ROUTER])],
    );
    let took = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(m, "ipshadow_collision_info", &[("pod", "postgres-1")]) == Some(1.0)
    });
    let took = took.unwrap_or_else(|| panic!("no finding; log:\n{}", agent.log_text()));
    figure(format!("pod added -> finding in /metrics: {took:?}"));
}

#[test]
fn sigterm_stops_the_agent_cleanly_and_detaches_the_program() {
    if !can_run_netns_tests("sigterm_stops_the_agent_cleanly_and_detaches_the_program") {
        return;
    }
    let (sim, _d, agent) =
        node_without_router_ip("agterm", vec![pod("tenant", "postgres-0", ME, &[ROUTER])]);
    assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 1);
    let (status, waited) = agent.terminate();
    assert!(status.success(), "{status:?}");
    assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 0);
    figure(format!("SIGTERM -> exit: {waited:?}"));
}

#[test]
fn readyz_waits_for_the_first_reconcile_and_healthz_for_the_loop() {
    if !can_run_netns_tests("readyz_waits_for_the_first_reconcile_and_healthz_for_the_loop") {
        return;
    }
    let ns = NetNs::new("agrdy");
    let d = dir("rdy");
    let pods = d.join("pods.json");
    // The pods file does not exist yet: the agent cannot reconcile.
    let agent = AgentProc::spawn(
        &ns,
        &[
            "--node",
            ME,
            "--pods",
            pods.to_str().unwrap(),
            "--ebpf",
            "off",
        ],
    );
    let mut healthy = false;
    let start = std::time::Instant::now();
    while start.elapsed() < HANG {
        if let Ok((code, _)) = AgentProc::get(&ns, "/healthz") {
            healthy = code == 200;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(healthy, "log:\n{}", agent.log_text());
    assert_eq!(AgentProc::get(&ns, "/readyz").unwrap().0, 503);
    // The loop answers while the file is being read (on a blocking thread): the
    // source is reported down once that read fails.
    let down = AgentProc::wait_metrics(&ns, HANG, |m| {
        sample(m, "ipshadow_source_up", &[("source", "pods")]) == Some(0.0)
    });
    assert!(down.is_some(), "log:\n{}", agent.log_text());
    assert_eq!(AgentProc::get(&ns, "/readyz").unwrap().0, 503);
    let (_, m) = AgentProc::get(&ns, "/metrics").unwrap();
    assert_eq!(sample(&m, "ipshadow_ebpf_attached", &[]), Some(0.0), "{m}");

    write_list(&pods, vec![pod("tenant", "web", ME, &["10.244.0.35"])]);
    agent.wait_ready(&ns);
    let (_, m) = AgentProc::get(&ns, "/metrics").unwrap();
    assert_eq!(
        sample(&m, "ipshadow_source_up", &[("source", "pods")]),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "ipshadow_source_up", &[("source", "netlink")]),
        Some(1.0),
        "{m}"
    );
    let (status, _) = agent.terminate();
    assert!(status.success());
}

#[test]
fn prometheus_accepts_and_scrapes_the_metrics() {
    if !can_run_netns_tests("prometheus_accepts_and_scrapes_the_metrics") {
        return;
    }
    let sim = SimNode::kube_ovn("agprom", ROUTER);
    let d = dir("prom");
    let pods = d.join("pods.json");
    let cns = d.join("cns.json");
    write_list(&pods, vec![pod("tenant", "postgres-0", ME, &[ROUTER])]);
    write_list(
        &cns,
        vec![cilium_node(ME, ROUTER, Some("10.244.4.12"), None)],
    );
    let agent = AgentProc::spawn(
        &sim.node,
        &[
            "--node",
            ME,
            "--pods",
            pods.to_str().unwrap(),
            "--ciliumnodes",
            cns.to_str().unwrap(),
        ],
    );
    agent.wait_ready(&sim.node);
    // Traffic, so the eBPF counter series exist with values.
    {
        let _inside = sim.node.enter();
        for _ in 0..3 {
            let _ = std::net::TcpStream::connect_timeout(
                &format!("{ROUTER}:5432").parse().unwrap(),
                Duration::from_secs(1),
            );
        }
    }
    assert!(
        AgentProc::wait_metrics(&sim.node, HANG, |m| {
            sample(
                m,
                "ipshadow_refused_connections_total",
                &[("pod", "postgres-0")],
            ) == Some(3.0)
        })
        .is_some(),
        "log:\n{}",
        agent.log_text()
    );

    // promtool lints the exposition as Prometheus would parse it.
    let (_, body) = AgentProc::get(&sim.node, "/metrics").unwrap();
    let metrics_file = d.join("metrics.txt");
    std::fs::write(&metrics_file, &body).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "promtool check metrics < {}",
            metrics_file.display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // A real Prometheus server in the node's namespace scrapes the agent.
    let config = d.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ipshadow\n    static_configs:\n      - targets: ['{}']\n",
            AgentProc::addr()
        ),
    )
    .unwrap();
    let tsdb = d.join("tsdb");
    let mut prom = sim
        .node
        .command("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", tsdb.display()))
        .arg("--web.listen-address=127.0.0.1:19090")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let query = "/api/v1/query?query=ipshadow_collisions%7Bkind%3D%22RouterIPCollision%22%2Cscope%3D%22same-node%22%7D";
    let mut got = None;
    for _ in 0..300 {
        std::thread::sleep(Duration::from_millis(100));
        let r = {
            let _inside = sim.node.enter();
            ipshadow_tests::http::get("127.0.0.1:19090".parse().unwrap(), query)
        };
        if let Ok((200, body)) = r {
            let v: Value = serde_json::from_str(&body).unwrap();
            if let Some(first) = v["data"]["result"].as_array().and_then(|r| r.first()) {
                got = Some(first["value"][1].as_str().unwrap().to_owned());
                break;
            }
        }
    }
    let _ = prom.kill();
    let _ = prom.wait();
    assert_eq!(
        got.as_deref(),
        Some("1"),
        "Prometheus never returned the series; agent log:\n{}",
        agent.log_text()
    );
}
