//! Services: the peak RSS of `ipshadow check`, and of the agent until its
//! Services lookup has answered, on a node where a local address
//! (kube-vip's, on the uplink) shadows a pod, so that `check` lists every
//! Service of the cluster: 300 Services, each with a 256 KiB annotation (75 MiB
//! of JSON, issue 38's reproduction), beside the same Services without it (the
//! floor). The binary under test and, when `IPSHADOW_BENCH_BEFORE_BIN` names
//! one, a binary from before the lean, streamed Services list, side by side,
//! interleaved over rounds; each run must report the pod's finding as the
//! Service's (trust `tenant-address`).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use ipshadow_tests::{
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    ipshadow_bin,
    node::SimNode,
    objects::{cilium_node, node, pod},
};
use serde_json::{Value, json};

const SERVICES: usize = 300;
const ANNOTATION_BYTES: usize = 256 * 1024;
const ROUNDS: usize = 3;
const ROUTER: &str = "10.244.4.251";
const VIP: &str = "10.244.4.50";

fn services(api: &ApiServer, annotation: usize) {
    let padding = "x".repeat(annotation);
    for i in 0..SERVICES {
        let external: Vec<String> = if i == SERVICES / 2 {
            vec![VIP.to_owned()]
        } else {
            vec![format!("192.0.{}.{}", i / 250, i % 250 + 1)]
        };
        api.apply(
            Res::Services,
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"namespace": "tenant", "name": format!("svc-{i}"),
                                "annotations": {"bench.example/padding": padding}},
                   "spec": {"type": "ClusterIP", "clusterIP": format!("10.96.{}.{}", i / 250, i % 250 + 1),
                            "externalIPs": external, "ports": [{"port": 80}]}}),
        );
    }
}

/// One `check` by `bin` on `sim`: its peak RSS in KiB; the finding must be the Service's.
fn check(sim: &SimNode, bin: &Path, kubeconfig: &Path) -> u64 {
    let (out, peak) = crate::audit::output_and_peak_kib(
        sim.node
            .command(bin.to_str().unwrap())
            .args([
                "check", "--node", "node-a", "--output", "json", "--ebpf", "off",
            ])
            .env("KUBECONFIG", kubeconfig),
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let trust = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["ip"] == VIP)
        .map(|f| f["trust"].clone());
    assert_eq!(
        trust,
        Some(json!("tenant-address")),
        "{} found no Service claim: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    peak
}

/// The agent (`bin`) on `sim` until its Services lookup names the pod's
/// finding the Service's: its peak RSS then, in KiB.
fn agent(sim: &SimNode, bin: &Path, kubeconfig: &Path) -> u64 {
    let listen = ipshadow_tests::agent::LISTEN;
    let mut child = sim
        .node
        .command(bin.to_str().unwrap())
        .args([
            "agent",
            "--node",
            "node-a",
            "--ebpf",
            "off",
            "--log-level",
            "warn",
        ])
        .args(["--listen", listen, "--health-listen", listen])
        .env("KUBECONFIG", kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let looked_up = AgentProc::wait_metrics(&sim.node, Duration::from_mins(2), |m| {
        m.lines().any(|l| {
            l.starts_with("ipshadow_collision_info{")
                && l.contains("pod=\"dns-0\"")
                && l.contains("trust=\"tenant-address\"")
        })
    });
    let peak = peak_rss_kib(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert!(looked_up.is_some(), "{}: no Service claim", bin.display());
    peak
}

/// Peak RSS of `pid` so far (VmHWM), KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

pub(crate) fn run() -> Value {
    let mut bins = vec![("after", ipshadow_bin())];
    if let Some(before) = std::env::var_os("IPSHADOW_BENCH_BEFORE_BIN") {
        bins.push(("before", PathBuf::from(before)));
    }
    let mut clusters = Vec::new();
    for (label, annotation) in [("annotated", ANNOTATION_BYTES), ("plain", 0)] {
        let sim = SimNode::kube_ovn(&format!("sv{}", &label[..1]), ROUTER);
        sim.node.add_veth("eth0", "eth0-peer");
        sim.node
            .ip(&["addr", "add", &format!("{VIP}/32"), "dev", "eth0"]);
        sim.node.ip(&["link", "set", "eth0", "up"]);
        let api = ApiServer::start(Some(&sim.node));
        api.apply(Res::Nodes, node("node-a", &["10.244.4.0/24"]));
        api.apply(Res::CiliumNodes, cilium_node("node-a", ROUTER, None, None));
        api.apply(Res::Pods, pod("kube-system", "dns-0", "node-a", &[VIP]));
        services(&api, annotation);
        let dir = ipshadow_tests::TempDir::new(&format!("bench-services-{label}"));
        let kubeconfig = dir.join("kubeconfig");
        api.write_kubeconfig(&kubeconfig);
        clusters.push((label, sim, api, dir, kubeconfig));
    }
    // Interleaved: every configuration once per round.
    let mut peaks: Vec<(String, Vec<u64>)> = Vec::new();
    for _ in 0..ROUNDS {
        for (bin_label, bin) in &bins {
            for (label, sim, _, _, kubeconfig) in &clusters {
                for (command, peak) in [
                    ("check", check(sim, bin, kubeconfig)),
                    ("agent", agent(sim, bin, kubeconfig)),
                ] {
                    let key = format!("{command}_{bin_label}_{label}");
                    match peaks.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, v)) => v.push(peak),
                        None => peaks.push((key, vec![peak])),
                    }
                }
            }
        }
    }
    let mut out = serde_json::Map::new();
    println!(
        "\ncheck and agent listing {SERVICES} Services ({} KiB annotation each): peak RSS, median (max) of {ROUNDS}",
        ANNOTATION_BYTES / 1024
    );
    for (key, mut v) in peaks {
        v.sort_unstable();
        let (median, max) = (v[v.len() / 2], v[v.len() - 1]);
        println!(
            "  {key:<24} {:>7.1} MiB ({:.1})",
            median as f64 / 1024.0,
            max as f64 / 1024.0
        );
        out.insert(
            key,
            json!({"peak_rss_kib": v, "median_kib": median, "max_kib": max}),
        );
    }
    json!({
        "services": SERVICES,
        "annotation_bytes": ANNOTATION_BYTES,
        "rounds": ROUNDS,
        "before_bin": std::env::var("IPSHADOW_BENCH_BEFORE_BIN").ok(),
        "peaks": out,
    })
}
