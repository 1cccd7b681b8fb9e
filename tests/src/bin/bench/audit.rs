//! Audit: `ipshadow audit` (the release binary, from files) over 5,000 nodes
//! and 150,000 pods, 30 per node, with a collision on every 100th node and a
//! duplicate pair on every 250th: its wall time and peak RSS, beside
//! `ipshadow check` of one node on the same files (the per-node floor).

use std::{
    process::Command,
    time::{Duration, Instant},
};

use ipshadow_tests::{
    ipshadow_bin,
    objects::{cilium_node, node, pod, with_pod_cidrs, write_list},
};
use serde_json::{Value, json};

const NODES: usize = 5_000;
const PODS_PER_NODE: usize = 30;

fn node_name(i: usize) -> String {
    format!("node-{i:04}")
}

/// Node `i`'s pod range: 10.<64 + i / 256>.<i % 256>.0/24.
fn address(i: usize, host: usize) -> String {
    format!("10.{}.{}.{host}", 64 + i / 256, i % 256)
}

/// Runs `cmd`, polling its peak RSS (VmHWM) every 5 ms: rusage of a child of
/// this large process would count the parent's memory it shared before exec.
pub(crate) fn output_and_peak_kib(cmd: &mut Command) -> (std::process::Output, u64) {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    let status = format!("/proc/{}/status", child.id());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(kib) = std::fs::read_to_string(&status).ok().and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("VmHWM:"))
                        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                }) {
                    peak = peak.max(kib);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting: {e}"));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (out, poller.join().unwrap_or(0))
}

pub(crate) fn run() -> Value {
    let dir = ipshadow_tests::TempDir::new("bench-audit");
    let mut pods = Vec::with_capacity(NODES * PODS_PER_NODE);
    let (mut nodes, mut cns) = (Vec::with_capacity(NODES), Vec::with_capacity(NODES));
    let mut collisions = 0;
    for i in 0..NODES {
        let name = node_name(i);
        let cidr = format!("{}/24", address(i, 0));
        nodes.push(node(&name, &[&cidr]));
        cns.push(with_pod_cidrs(
            cilium_node(
                &name,
                &address(i, 1),
                Some(&address(i, 2)),
                Some(&address(i, 3)),
            ),
            &[&cidr],
        ));
        for j in 0..PODS_PER_NODE {
            // Every 100th node: its first pod holds the next node's router IP.
            let ip = if j == 0 && i % 100 == 0 {
                collisions += 1;
                address((i + 1) % NODES, 1)
            } else if j == 1 && i % 250 == 0 {
                collisions += 1;
                address((i + 1) % NODES, 20)
            } else {
                address(i, 10 + j)
            };
            pods.push(pod("bench", &format!("p-{i}-{j}"), &name, &[&ip]));
        }
    }
    let files = [
        ("--pods", dir.join("pods.json"), pods),
        ("--nodes", dir.join("nodes.json"), nodes),
        ("--ciliumnodes", dir.join("ciliumnodes.json"), cns),
    ];
    let mut args: Vec<String> = Vec::new();
    let mut bytes = 0;
    for (flag, path, items) in files {
        write_list(&path, items);
        bytes += std::fs::metadata(&path).map_or(0, |m| m.len());
        args.push(flag.to_owned());
        args.push(path.to_str().unwrap_or_default().to_owned());
    }
    let run_one = |sub: &str, extra: &[&str]| -> (Duration, Value, u64) {
        let start = Instant::now();
        let (out, peak) = output_and_peak_kib(
            Command::new(ipshadow_bin())
                .arg(sub)
                .args(&args)
                .args(extra)
                .args(["-o", "json"]),
        );
        let took = start.elapsed();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            took,
            serde_json::from_slice(&out.stdout).unwrap_or_default(),
            peak,
        )
    };
    let (check_time, _, check_rss) = run_one("check", &["--node", &node_name(0), "--ebpf", "off"]);
    let mut times = Vec::new();
    let (mut found, mut audit_rss) = (Value::Null, 0);
    for _ in 0..3 {
        let (t, v, rss) = run_one("audit", &[]);
        times.push(t);
        found = v;
        audit_rss = audit_rss.max(rss);
    }
    times.sort();
    let findings = found["findings"].as_u64().unwrap_or(0);
    assert_eq!(
        findings, collisions,
        "the audit found {findings} findings for {collisions} collisions"
    );
    let median = times[1];
    println!(
        "audit: {NODES} nodes, {} pods ({:.0} MB of JSON): {:.2} s (median of 3), peak RSS {:.0} MiB; \
         check of one node on the same files {:.2} s, {:.0} MiB ({:.1}x), {collisions} findings",
        NODES * PODS_PER_NODE,
        bytes as f64 / 1e6,
        median.as_secs_f64(),
        audit_rss as f64 / 1024.0,
        check_time.as_secs_f64(),
        check_rss as f64 / 1024.0,
        median.as_secs_f64() / check_time.as_secs_f64(),
    );
    json!({
        "nodes": NODES,
        "pods": NODES * PODS_PER_NODE,
        "input_bytes": bytes,
        "audit_seconds": times.iter().map(Duration::as_secs_f64).collect::<Vec<_>>(),
        "audit_median_seconds": median.as_secs_f64(),
        "peak_rss_kib": audit_rss,
        "check_one_node_seconds": check_time.as_secs_f64(),
        "check_one_node_peak_rss_kib": check_rss,
        "audit_to_check_ratio": median.as_secs_f64() / check_time.as_secs_f64(),
        "findings": findings,
    })
}
