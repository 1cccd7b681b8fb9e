//! The fleet: many real agents (netlink-only, distinct node names, one network
//! namespace) against one test API server holding a large cluster — 5,000
//! Nodes and CiliumNodes, 50,000 pods, kube-ovn Subnets — first idle (kubelet's
//! Node status reports only), then under churn: pods created and deleted
//! anywhere, each with the Subnet status update kube-ovn makes and the
//! CiliumNode status update of its node, and collisions appearing on the
//! agents' nodes. Per agent: requests, bytes and watch events received,
//! reconciles per cluster event, Event writes, CPU, RSS; at the server:
//! watchers by kind, requests per second.

use std::time::{Duration, Instant};

use ipshadow_tests::{
    agent::AgentProc,
    apiserver::{ApiServer, RequestCounts, Res, Wire},
    http::{get, sample},
    node::SimNode,
    objects::{
        CloudNode, azure_cilium_node, cilium_node, eni_cilium_node, node, pod, subnet,
        with_pod_cidrs,
    },
    watch_list::WatchList,
};
use serde_json::{Value, json};

use crate::{cpu_seconds, median, rss_kib};

fn env(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Real objects are kilobytes, ours bytes: pods and Nodes padded to typical
/// sizes (a pod with its status ~4 KB, a Node's metadata ~2 KB). CiliumNodes
/// are shaped per IPAM mode instead ([`Shape`]).
fn padded(mut v: Value, bytes: usize) -> Value {
    v["metadata"]["annotations"]["bench.ipshadow.io/padding"] = json!("x".repeat(bytes));
    v
}

/// Node `i`'s pod CIDR, router IP and pod IP `k`.
fn cidr(i: usize) -> String {
    format!("10.{}.{}.0/24", 128 + i / 256, i % 256)
}
fn addr(i: usize, last: usize) -> String {
    format!("10.{}.{}.{last}", 128 + i / 256, i % 256)
}

/// How the cluster's CiliumNodes look: the IPAM mode decides their size.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// cluster-pool: the node's pod CIDR and `status.ipam.used`, padded to
    /// ~2.5 KB (the figures before issue 26).
    ClusterPool,
    /// ENI: `pool` pre-allocated addresses on `enis` interfaces (AWS).
    Eni { pool: usize, enis: usize },
    /// Azure: `pool` pre-allocated addresses, ARM IDs on each.
    Azure { pool: usize },
}

impl Shape {
    /// `IPSHADOW_FLEET_IPAM` (`eni`, the default; `azure`; `cluster-pool`),
    /// `IPSHADOW_FLEET_POOL` addresses per node (45: three ENIs of an
    /// m5.xlarge, 15 addresses each), `IPSHADOW_FLEET_ENIS` (3).
    fn from_env() -> Self {
        let pool = usize::try_from(env("IPSHADOW_FLEET_POOL", 45)).unwrap_or(45);
        let enis = usize::try_from(env("IPSHADOW_FLEET_ENIS", 3)).unwrap_or(3);
        match std::env::var("IPSHADOW_FLEET_IPAM").as_deref() {
            Ok("cluster-pool") => Self::ClusterPool,
            Ok("azure") => Self::Azure { pool },
            _ => Self::Eni { pool, enis },
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::ClusterPool => "cluster-pool",
            Self::Eni { .. } => "eni",
            Self::Azure { .. } => "azure",
        }
    }

    /// Node `i`'s CiliumNode with `used` pods: in the cloud modes, the router
    /// and health addresses and the pods' come from the pool, as Cilium takes them.
    fn cn(self, i: usize, used: usize) -> Value {
        let (pool, enis) = match self {
            Self::ClusterPool => return padded_cn(i, used),
            Self::Eni { pool, enis } => (pool, enis),
            Self::Azure { pool } => (pool, 1),
        };
        let name = format!("node-{i}");
        let mut addresses = vec![addr(i, 1), addr(i, 2)];
        addresses.extend((0..pool.max(used + 2) - 2).map(|k| addr(i, 10 + k)));
        let mut held = vec![
            (addr(i, 1), "router".to_owned()),
            (addr(i, 2), "health".to_owned()),
        ];
        held.extend((0..used).map(|k| (addr(i, 10 + k), format!("t/p-{i}-{k}"))));
        let n = CloudNode {
            name: &name,
            router: &addresses[0],
            health: &addresses[1],
            pool: &addresses,
            used: &held,
        };
        match self {
            Self::Azure { .. } => azure_cilium_node(&n),
            _ => eni_cilium_node(&n, enis),
        }
    }
}

fn padded_cn(i: usize, used: usize) -> Value {
    let mut c = with_pod_cidrs(
        cilium_node(&format!("node-{i}"), &addr(i, 1), None, Some(&addr(i, 2))),
        &[&cidr(i)],
    );
    c["status"] = json!({"ipam": {"used": (0..used).map(|k| (addr(i, 10 + k), json!({"owner": format!("t/p-{i}-{k}")}))).collect::<serde_json::Map<_, _>>()}});
    padded(c, 1800)
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

/// Waits until every agent holds every CiliumNode: each has its CiliumNode
/// watch open, and the agents' CPU has gone quiet (the initial events are
/// parsed); at most 15 minutes. How long since `t`.
///
/// Readiness is not enough: an agent is ready once its own pods are listed,
/// and the test API server answers a streaming list only once it has encoded
/// every initial event, so on a busy machine the CiliumNode syncs of fifty
/// agents end minutes after they are ready.
fn wait_for_sync(
    api: &ApiServer,
    agents: &[(AgentProc, std::net::SocketAddr)],
    t: Instant,
) -> Duration {
    let cpu = || -> f64 { agents.iter().map(|(p, _)| cpu_seconds(p.pid())).sum() };
    let mut last = (cpu(), api.wire().bytes);
    let end = Instant::now() + Duration::from_mins(15);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(5));
        let wire = api.wire();
        let now = (cpu(), wire.bytes);
        let open = wire.open_watches.get("ciliumnodes").copied().unwrap_or(0);
        // Fifty idle agents use ~0.01 s of CPU in 5 s, one parsing 10,000
        // CiliumNodes seconds; the server counts bytes as it encodes a
        // streaming list's initial events, before it sends any.
        let quiet = now.0 - last.0 < 0.5 && now.1 - last.1 < 1 << 20;
        if usize::try_from(open).unwrap_or(0) >= agents.len() && quiet {
            return t.elapsed();
        }
        last = now;
    }
    eprintln!("fleet: the CiliumNode syncs did not end within 15 minutes");
    t.elapsed()
}

/// Median and maximum of `values`, MiB.
#[allow(clippy::cast_precision_loss)]
fn mib_spread(values: &[u64]) -> Value {
    let mut v: Vec<f64> = values.iter().map(|k| *k as f64 / 1024.0).collect();
    let max = v.iter().copied().fold(0.0, f64::max);
    json!({"median": median(&mut v), "max": max})
}

fn kube_node(i: usize) -> Value {
    let mut n = padded(node(&format!("node-{i}"), &[&cidr(i)]), 1500);
    n["status"] = ready_status(0);
    n
}

/// kubelet's Ready condition as its status report `beat` writes it.
fn ready_status(beat: u64) -> Value {
    json!({"conditions": [{"type": "Ready", "status": "True",
        "lastHeartbeatTime": format!("2026-12-03T00:{:02}:{:02}Z", beat / 60 % 60, beat % 60)}]})
}

/// One phase's view across the fleet.
struct Snapshot {
    at: Instant,
    counts: RequestCounts,
    wire: Wire,
    reconciles: f64,
    cpu: f64,
}

fn snapshot(
    api: &ApiServer,
    sim: &SimNode,
    agents: &[(AgentProc, std::net::SocketAddr)],
) -> Snapshot {
    let _inside = sim.node.enter();
    let reconciles = agents
        .iter()
        .map(|(_, a)| {
            get(*a, "/metrics")
                .ok()
                .and_then(|(_, m)| sample(&m, "ipshadow_reconciles_total", &[("result", "ok")]))
                .unwrap_or(0.0)
        })
        .sum();
    Snapshot {
        at: Instant::now(),
        counts: api.counts(),
        wire: api.wire(),
        reconciles,
        cpu: agents.iter().map(|(p, _)| cpu_seconds(p.pid())).sum(),
    }
}

#[allow(clippy::cast_precision_loss)]
fn phase(name: &str, a: &Snapshot, b: &Snapshot, agents: usize, cluster_events: u64) -> Value {
    let minutes = (b.at - a.at).as_secs_f64() / 60.0;
    let n = agents as f64;
    let per_agent_min = |x: u64| x as f64 / n / minutes;
    let writes = (b.counts.creates + b.counts.patches) - (a.counts.creates + a.counts.patches);
    let v = json!({
        "phase": name,
        "minutes": minutes,
        "cluster_events": cluster_events,
        "requests_per_agent_per_minute": per_agent_min(b.counts.total - a.counts.total),
        "lists_per_agent_per_minute": per_agent_min(b.counts.lists - a.counts.lists),
        "watches_opened_per_agent_per_minute": per_agent_min(b.counts.watches - a.counts.watches),
        "event_writes": writes,
        "kib_received_per_agent_per_minute": per_agent_min(b.wire.bytes - a.wire.bytes) / 1024.0,
        "watch_events_per_agent_per_second": per_agent_min(b.wire.watch_events - a.wire.watch_events) / 60.0,
        "reconciles_per_agent": (b.reconciles - a.reconciles) / n,
        "reconciles_per_agent_per_cluster_event": if cluster_events == 0 { 0.0 } else { (b.reconciles - a.reconciles) / n / cluster_events as f64 },
        "cpu_percent_per_agent": (b.cpu - a.cpu) / n / (minutes * 60.0) * 100.0,
        "server_requests_per_second": (b.counts.total - a.counts.total) as f64 / (minutes * 60.0),
        "unindexed_requests": b.counts.unindexed.len() - a.counts.unindexed.len(),
        "uncached_lists": b.counts.uncached_lists.len() - a.counts.uncached_lists.len(),
        "requests_per_agent_by_kind": by_kind(&b.counts.log[a.counts.log.len()..], agents),
    });
    println!("  {name}: {v}");
    v
}

pub(crate) fn run() -> Value {
    let agents_n = usize::try_from(env("IPSHADOW_FLEET_AGENTS", 50)).unwrap_or(50);
    let nodes = usize::try_from(env("IPSHADOW_FLEET_NODES", 5000)).unwrap_or(5000);
    let pods_per_node = 10;
    let phase_secs = env("IPSHADOW_FLEET_PHASE_SECONDS", 120);
    // kubelet reports each Node's status every 5 minutes when nothing changes.
    let node_reports_per_sec = nodes as f64 / 300.0;
    let churn_pods_per_sec = env("IPSHADOW_FLEET_CHURN_PODS_PER_SECOND", 20);
    let shape = Shape::from_env();
    // `off`: a server without streaming lists (the `WatchList` gate off):
    // every agent lists each kind whole, the fallback's memory.
    let watch_list = match std::env::var("IPSHADOW_FLEET_WATCH_LIST").as_deref() {
        Ok("off") => WatchList::Off,
        _ => WatchList::On,
    };

    let sim = SimNode::kube_ovn("fleet", "10.244.4.251");
    let api = ApiServer::start_on(Some(&sim.node), "127.0.0.1:0");
    api.set_crd(Res::Subnets, true);
    api.set_watch_list(watch_list);
    let t = Instant::now();
    for s in 0..10 {
        api.apply(
            Res::Subnets,
            subnet(&format!("tenant-{s}"), &format!("10.{s}.0.0/16"), &[]),
        );
    }
    for i in 0..nodes {
        api.apply(Res::Nodes, kube_node(i));
        api.apply(Res::CiliumNodes, shape.cn(i, pods_per_node));
        for k in 0..pods_per_node {
            api.apply(
                Res::Pods,
                padded(
                    pod(
                        "t",
                        &format!("p-{i}-{k}"),
                        &format!("node-{i}"),
                        &[&addr(i, 10 + k)],
                    ),
                    3500,
                ),
            );
        }
    }
    let cn_bytes = serde_json::to_vec(&shape.cn(0, pods_per_node)).map_or(0, |b| b.len());
    eprintln!(
        "fleet: {nodes} Nodes and {} CiliumNodes of {cn_bytes} B, {} pods loaded in {:?}",
        shape.name(),
        nodes * pods_per_node,
        t.elapsed()
    );

    let dir = ipshadow_tests::TempDir::new("bench-fleet");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let t = Instant::now();
    let agents: Vec<(AgentProc, std::net::SocketAddr)> = (0..agents_n)
        .map(|i| {
            let listen = format!("127.0.0.1:{}", 20_000 + i);
            let p = AgentProc::spawn_on(
                &sim.node,
                &listen,
                &[],
                &[
                    "--node",
                    &format!("node-{i}"),
                    "--ebpf",
                    "off",
                    "--log-level",
                    "warn",
                ],
                &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
            );
            (p, listen.parse().unwrap())
        })
        .collect();
    {
        let _inside = sim.node.enter();
        for (p, a) in &agents {
            let start = Instant::now();
            while !matches!(get(*a, "/readyz"), Ok((200, _))) {
                assert!(
                    start.elapsed() < Duration::from_mins(5),
                    "agent not ready: {}",
                    p.log_text()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    let ready_in = t.elapsed();
    std::thread::sleep(Duration::from_secs(10));
    let synced_in = wait_for_sync(&api, &agents, t);
    let rss_at_start: Vec<u64> = agents.iter().map(|(p, _)| rss_kib(p.pid())).collect();
    let started = api.counts();
    let mut open_at_start = api.wire().open_watches;
    open_at_start.retain(|_, n| *n > 0);
    eprintln!(
        "fleet: {agents_n} agents ready in {ready_in:?}, synced in {synced_in:?}; idle for {phase_secs} s …"
    );
    // The initial sync's peak (every agent started at once) and the RSS after it.
    let peak_at_start: Vec<u64> = agents.iter().map(|(p, _)| peak_rss_kib(p.pid())).collect();

    // Idle: only kubelet's Node status reports.
    let s0 = snapshot(&api, &sim, &agents);
    let mut beat = 0u64;
    let mut idle_events = 0u64;
    let tick = Duration::from_millis(100);
    let per_tick = |rate: f64, k: u64| -> u64 {
        // Whole events due by tick k at `rate` per second.
        ((k + 1) as f64 * rate / 10.0) as u64 - (k as f64 * rate / 10.0) as u64
    };
    // kubelet's status report of the next Node in turn: a patch of its own
    // condition that keeps the others (the agents' PodIPsShadowed among them).
    let mut report_node = || {
        beat += 1;
        let i = usize::try_from(beat).unwrap_or(0) % nodes;
        api.report_node_status(&format!("node-{i}"), &ready_status(beat));
    };
    let mut k = 0u64;
    let end = Instant::now() + Duration::from_secs(phase_secs);
    while Instant::now() < end {
        for _ in 0..per_tick(node_reports_per_sec, k) {
            report_node();
            idle_events += 1;
        }
        k += 1;
        std::thread::sleep(tick);
    }
    let s1 = snapshot(&api, &sim, &agents);
    let rss_idle: Vec<u64> = agents.iter().map(|(p, _)| rss_kib(p.pid())).collect();

    eprintln!("fleet: churn for {phase_secs} s …");

    // Churn: pods anywhere; per pod, kube-ovn's Subnet status update and the
    // CiliumNode status update of its node; every 5 s a collision on an agent's node.
    let mut churn_events = 0u64;
    let mut created: std::collections::VecDeque<(String, usize)> =
        std::collections::VecDeque::new();
    let mut serial = 0usize;
    let end = Instant::now() + Duration::from_secs(phase_secs);
    k = 0;
    while Instant::now() < end {
        for _ in 0..per_tick(node_reports_per_sec, k) {
            report_node();
            churn_events += 1;
        }
        for _ in 0..per_tick(churn_pods_per_sec as f64, k) {
            serial += 1;
            let i = serial.wrapping_mul(7919) % nodes;
            let collision = serial.is_multiple_of(churn_pods_per_sec as usize * 5);
            let (i, ip) = if collision {
                // The next agent each time (serial itself is a multiple of the
                // period, which would put every collision on one agent).
                let i = (serial / (churn_pods_per_sec as usize * 5)) % agents_n;
                (i, addr(i, 1))
            } else {
                (i, addr(i, 100 + serial % 100))
            };
            let name = format!("churn-{serial}");
            api.apply(
                Res::Pods,
                padded(pod("t", &name, &format!("node-{i}"), &[&ip]), 3500),
            );
            let mut s = subnet("tenant-0", "10.0.0.0/16", &[]);
            s["status"] = json!({"v4usingIPs": serial, "v4availableIPs": 65_000 - serial % 60_000});
            api.apply(Res::Subnets, s);
            api.apply(Res::CiliumNodes, shape.cn(i, pods_per_node + serial % 5));
            churn_events += 3;
            created.push_back((name, i));
            if created.len() > 200 {
                let (old, _) = created.pop_front().unwrap();
                api.delete(Res::Pods, "t", &old);
                churn_events += 1;
            }
        }
        k += 1;
        std::thread::sleep(tick);
    }
    std::thread::sleep(Duration::from_secs(5));
    let s2 = snapshot(&api, &sim, &agents);

    let rss_end: Vec<u64> = agents.iter().map(|(p, _)| rss_kib(p.pid())).collect();
    let rss: Vec<f64> = rss_end.iter().map(|k| *k as f64).collect();
    let mut rss_sorted = rss.clone();
    let rss_median = median(&mut rss_sorted);
    let rss_max = rss.iter().copied().fold(0.0, f64::max);
    let peak_end: Vec<u64> = agents.iter().map(|(p, _)| peak_rss_kib(p.pid())).collect();
    let idle = phase("idle", &s0, &s1, agents_n, idle_events);
    let churn = phase("churn", &s1, &s2, agents_n, churn_events);
    let mut open_end = api.wire().open_watches;
    open_end.retain(|_, n| *n > 0);
    drop(agents);
    json!({
        "agents": agents_n,
        "cluster": {"nodes": nodes, "ciliumnodes": nodes, "pods": nodes * pods_per_node, "subnets": 10,
                    "ipam": shape.name(), "ciliumnode_bytes": cn_bytes,
                    "ciliumnodes_mib": (cn_bytes * nodes) as f64 / 1_048_576.0},
        "streaming_lists": watch_list == WatchList::On,
        "rss_mib": {
            "peak_initial_sync": mib_spread(&peak_at_start),
            "after_sync": mib_spread(&rss_at_start),
            "steady_idle": mib_spread(&rss_idle),
            "steady_after_churn": mib_spread(&rss_end),
            "peak_whole_run": mib_spread(&peak_end),
        },
        "ready_seconds": ready_in.as_secs_f64(),
        "synced_seconds": synced_in.as_secs_f64(),
        "requests_to_start_per_agent": started.total as f64 / agents_n as f64,
        "lists_to_start_per_agent": started.lists as f64 / agents_n as f64,
        "requests_to_start_by_kind": by_kind(&started.log, agents_n),
        "uncached_lists_to_start": started.uncached_lists.len(),
        "server_watchers_by_kind": open_at_start,
        "server_watchers_by_kind_at_end": open_end,
        "node_status_reports_per_second": node_reports_per_sec,
        "churn_pods_per_second": churn_pods_per_sec,
        "idle": idle,
        "churn": churn,
        "rss_kib_median": rss_median,
        "rss_kib_max": rss_max,
    })
}

/// Requests per agent by method and resource (`GET pods`, `PATCH nodes/status`
/// …): the path without its group, version, namespace and object name.
fn by_kind(log: &[(String, String)], agents: usize) -> serde_json::Value {
    let mut counts = std::collections::BTreeMap::<String, f64>::new();
    for (method, uri) in log {
        let path = uri.split('?').next().unwrap_or(uri);
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        // /api/v1/… or /apis/<group>/<version>/…; then [namespaces/<ns>/]<plural>[/<name>[/<sub>]].
        let rest = match parts.first() {
            Some(&"api") => parts.get(2..),
            Some(&"apis") => parts.get(3..),
            _ => None,
        }
        .unwrap_or_default();
        let rest = match rest {
            ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
            other => other,
        };
        let kind = match rest {
            [plural, _, sub, ..] => format!("{plural}/{sub}"),
            [plural, ..] => (*plural).to_owned(),
            [] => path.to_owned(),
        };
        let watch = uri.contains("watch=true") || uri.contains("watch=1");
        let verb = if watch { "WATCH" } else { method.as_str() };
        *counts.entry(format!("{verb} {kind}")).or_default() += 1.0 / agents as f64;
    }
    json!(counts)
}
