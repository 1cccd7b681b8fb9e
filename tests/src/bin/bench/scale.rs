//! Scale: a node with 500 pods (kube-ovn style: one subnet route, no per-pod
//! routes) and a cluster of 5,000 CiliumNodes. The reconcile in-process (time
//! and heap allocations), batched FIB lookups against one `ip route get` process
//! per IP, and the real agent's RSS and idle CPU. Then how long `/healthz`
//! takes while a 100,000-pod file is read again, against the probe's timeout
//! (the test of that, tests/tests/reliability.rs, asserts the answers alone).

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use ipshadow::{
    kube::{SourceArgs, sources::FileSources},
    netlink::Netlink,
    reconcile::{NodeArgs, ReadArgs, Reconciler},
};
use ipshadow_tests::{
    agent::AgentProc,
    http::sample,
    node::SimNode,
    objects::{cilium_node, pod, write_list},
};
use serde_json::{Value, json};

use crate::{ALLOCATIONS, median, percentile};

const PODS: usize = 500;
const CILIUM_NODES: usize = 5000;
const ROUTER: &str = "10.244.4.251";

fn pod_ip(i: usize) -> String {
    format!("10.244.{}.{}", 10 + i / 250, i % 250 + 1)
}

pub(crate) fn run() -> Value {
    let sim = SimNode::kube_ovn("scale", ROUTER);
    let dir = ipshadow_tests::TempDir::new("bench-scale");
    let mut pods: Vec<Value> = (0..PODS)
        .map(|i| pod("t", &format!("pod-{i}"), "node-a", &[pod_ip(i).as_str()]))
        .collect();
    pods.push(pod("t", "pg", "node-a", &[ROUTER]));
    let mut cns = vec![cilium_node("node-a", ROUTER, Some("10.244.4.12"), None)];
    cns.extend((1..CILIUM_NODES).map(|i| {
        let r = format!("10.200.{}.{}", i / 250, i % 250 + 1);
        let g = format!("10.201.{}.{}", i / 250, i % 250 + 1);
        cilium_node(&format!("node-{i}"), &r, Some(&g), None)
    }));
    let pods_file = dir.join("pods.json");
    let cns_file = dir.join("cns.json");
    write_list(&pods_file, pods);
    write_list(&cns_file, cns);

    // In-process: the same reconcile the agent runs, inside the node's namespace.
    let (times, allocs, batched) = {
        let _inside = sim.node.enter();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let args = NodeArgs {
                node: Some("node-a".into()),
                read: ReadArgs {
                    router_device: "cilium_host".into(),
                    pod_ip_annotations: vec!["ovn.kubernetes.io/ip_address".into()],
                },
            };
            let sources = SourceArgs {
                pods: Some(pods_file.clone()),
                ciliumnodes: Some(cns_file.clone()),
                subnets: None,
                nodes: None,
                events: None,
                cilium_config: None,
                endpointslices: None,
                webhooks: None,
                apiservices: None,
                services: None,
                cilium_namespace: "kube-system".into(),
                sync_timeout_seconds: 30,
            };
            let mut files = FileSources::new(&sources, &args.read.pod_ip_annotations).unwrap();
            assert!(files.refresh().is_empty());
            let r = Reconciler::new(&args).unwrap();
            for _ in 0..5 {
                let done = r.reconcile(files.state()).await.unwrap();
                assert_eq!(done.findings.len(), 1);
            }
            let mut times = Vec::new();
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            for _ in 0..50 {
                let t = Instant::now();
                let done = r.reconcile(files.state()).await.unwrap();
                times.push(t.elapsed().as_secs_f64() * 1e3);
                std::hint::black_box(done);
            }
            let allocs = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 50.0;
            let ips: Vec<std::net::IpAddr> =
                (0..PODS).map(|i| pod_ip(i).parse().unwrap()).collect();
            let nl = Netlink::connect().unwrap();
            let mut batched = Vec::new();
            for _ in 0..10 {
                let t = Instant::now();
                assert_eq!(nl.lookup(&ips).await.len(), PODS);
                batched.push(t.elapsed().as_secs_f64() * 1e3);
            }
            (times, allocs, median(&mut batched))
        })
    };
    let t = Instant::now();
    for i in 0..PODS {
        let out = sim
            .node
            .command("ip")
            .args(["route", "get", &pod_ip(i)])
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    let processes = t.elapsed().as_secs_f64() * 1e3;

    // The real agent with the same inputs: memory, and CPU while idle.
    let (cpu, rss) = crate::agent_at_rest(&sim.node, &pods_file, &cns_file, Duration::from_mins(1));

    let p99 = percentile(&times, 0.99);
    let med = percentile(&times, 0.5);
    println!("\nscale: {PODS} pods on the node, {CILIUM_NODES} CiliumNodes");
    println!(
        "  full reconcile (netlink dumps, {PODS} FIB lookups, detect): median {med:.2} ms, p99 {p99:.2} ms"
    );
    println!("  heap allocations per reconcile of an unchanged inventory: {allocs:.0}");
    println!(
        "  {PODS} FIB lookups: {batched:.2} ms batched on a socket of their own vs {processes:.0} ms as {PODS} `ip route get` processes (x{:.0})",
        processes / batched
    );
    println!(
        "  agent RSS {:.1} MiB; idle CPU over 60 s: {:.3} s = {:.3} % of one core",
        rss as f64 / 1024.0,
        cpu,
        cpu / 60.0 * 100.0
    );
    let healthz = healthz_while_a_large_file_is_read();
    json!({
        "healthz_while_100k_pods_read": healthz,
        "pods": PODS,
        "cilium_nodes": CILIUM_NODES,
        "reconcile_ms_median": med,
        "reconcile_ms_p99": p99,
        "allocations_per_reconcile": allocs,
        "fib_lookups_batched_ms": batched,
        "fib_lookups_ip_route_get_processes_ms": processes,
        "fib_speedup": processes / batched,
        "agent_rss_kib": rss,
        "agent_idle_cpu_percent_of_one_core": cpu / 60.0 * 100.0,
    })
}

/// deploy/base/daemonset.yaml's livenessProbe `timeoutSeconds`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The agent reading a file of 100,000 pods (elsewhere) is given it again with
/// one more (on the router IP): every `/healthz` answer's time until that pod
/// shows in `/metrics`, and how long the read took.
fn healthz_while_a_large_file_is_read() -> Value {
    const MANY: u32 = 100_000;
    let sim = SimNode::kube_ovn("scaleh", ROUTER);
    let dir = ipshadow_tests::TempDir::new("bench-healthz");
    let pods_file = dir.join("pods.json");
    let many = || -> Vec<Value> {
        (0..MANY)
            .map(|i| {
                let ip = format!("10.{}.{}.{}", 100 + i / 65_536, (i / 256) % 256, i % 256);
                pod("tenant", &format!("p-{i}"), "node-z", &[ip.as_str()])
            })
            .collect()
    };
    write_list(&pods_file, many());
    let agent = AgentProc::spawn(
        &sim.node,
        &["--node", "node-a", "--pods", pods_file.to_str().unwrap()],
    );
    agent.wait_ready(&sim.node);
    let mut changed = many();
    changed.push(pod("tenant", "pg", "node-a", &[ROUTER]));
    write_list(&pods_file, changed);
    let start = Instant::now();
    let mut times = Vec::new();
    let mut failed = 0u32;
    loop {
        let asked = Instant::now();
        let ok = matches!(AgentProc::get(&sim.node, "/healthz"), Ok((200, _)));
        times.push(asked.elapsed().as_secs_f64() * 1e3);
        failed += u32::from(!ok);
        let read = AgentProc::get(&sim.node, "/metrics").is_ok_and(|(_, m)| {
            sample(&m, "ipshadow_collision_info", &[("pod", "pg")]) == Some(1.0)
        });
        if read || start.elapsed() > Duration::from_mins(5) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let read_s = start.elapsed().as_secs_f64();
    let slowest = times.iter().copied().fold(0.0, f64::max);
    let probe_ms = PROBE_TIMEOUT.as_secs_f64() * 1e3;
    println!(
        "  /healthz while a {MANY}-pod file is read again ({read_s:.1} s): {} answers, {failed} failed, \
         median {:.1} ms, slowest {slowest:.1} ms (probe timeout {probe_ms:.0} ms)",
        times.len(),
        percentile(&times, 0.5)
    );
    json!({
        "file_pods": MANY,
        "read_seconds": read_s,
        "answers": times.len(),
        "failed": failed,
        "median_ms": percentile(&times, 0.5),
        "slowest_ms": slowest,
        "probe_timeout_ms": probe_ms,
        "within_probe_timeout": failed == 0 && slowest < probe_ms,
    })
}
