//! Pod namespaces (issue 24): what reading the pods' namespaces from the
//! node's namespace costs. A node with 110 (kubelet's default max-pods) and
//! with 1,000 pods, each behind a veth with its address inside: a full read
//! (every namespace, as at the agent's start), one pass of a resync (at most
//! `STALE_PER_PASS` namespaces), a read with nothing changed (what a
//! reconcile on a host change adds to the link dump it makes anyway), and one
//! host-wide address dump (a baseline every reconcile pays), interleaved over
//! rounds, as ratios. Then
//! the real agent's idle CPU on the 110-pod node.

use std::{fmt::Write as _, time::Instant};

use ipshadow::netlink::peers::{Peers, STALE_PER_PASS};
use ipshadow_tests::{
    TempDir,
    netns::NetNs,
    objects::{pod, write_list},
};
use serde_json::{Value, json};

use crate::median;

const ROUNDS: usize = 15;

fn pod_ip(i: usize) -> String {
    format!("10.252.{}.{}", i / 200, i % 200 + 2)
}

/// A node namespace with `pods` pod namespaces, each behind a veth `v<i>`
/// holding its address on `eth0`, with a per-pod host route.
fn node_with(pods: usize) -> (NetNs, Vec<NetNs>) {
    let node = NetNs::new("bns");
    let pod_ns: Vec<NetNs> = (0..pods).map(|_| NetNs::new("bnsp")).collect();
    let mut batch = String::new();
    for (i, p) in pod_ns.iter().enumerate() {
        let _ = write!(
            batch,
            "link add v{i} type veth peer name eth0 netns {}\nlink set v{i} up\nroute add {}/32 dev v{i}\n",
            p.name,
            pod_ip(i)
        );
    }
    node.ip_batch(&batch);
    for (i, p) in pod_ns.iter().enumerate() {
        p.ip_batch(&format!(
            "addr add {}/24 dev eth0\nlink set eth0 up\n",
            pod_ip(i)
        ));
    }
    (node, pod_ns)
}

/// Milliseconds (medians): full reads, resync passes, unchanged reads, host
/// address dumps.
fn measure(node: &NetNs, pods: usize) -> [f64; 4] {
    let _in = node.enter();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (conn, handle, _) = rtnetlink::new_connection().unwrap();
        drop(tokio::spawn(conn));
        let mut v: [Vec<f64>; 4] = Default::default();
        let [full, resync, unchanged, host] = &mut v;
        for _ in 0..ROUNDS {
            // A fresh reader, as at the agent's start: every namespace.
            let peers = Peers::connect().unwrap();
            let ifaces = peers.host_ifaces().await.unwrap();
            let t = Instant::now();
            let read = peers.read_behind(ifaces).await;
            full.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!((read.namespaces.len(), read.reread), (pods, pods));

            // One pass of a resync: a slice of them.
            peers.expire();
            let ifaces = peers.host_ifaces().await.unwrap();
            let t = Instant::now();
            let read = peers.read_behind(ifaces).await;
            resync.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(read.reread, pods.min(STALE_PER_PASS));
            while peers.read().await.unwrap().stale_left > 0 {}

            // A reconcile on a host change: the host link dump it makes anyway, then
            // the namespaces behind it, none changed.
            let ifaces = peers.host_ifaces().await.unwrap();
            let t = Instant::now();
            let read = peers.read_behind(ifaces).await;
            unchanged.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!((read.namespaces.len(), read.reread), (pods, 0));

            let t = Instant::now();
            let n = futures::TryStreamExt::try_collect::<Vec<_>>(handle.address().get().execute())
                .await
                .unwrap()
                .len();
            host.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(n > pods, "the host's veths have link-local addresses: {n}");
        }
        v.map(|mut m| median(&mut m))
    })
}

pub(crate) fn run() -> Value {
    let mut rows = serde_json::Map::new();
    println!("\npod namespaces: read from the node's namespace by nsid ({ROUNDS} rounds, medians)");
    for pods in [110, 1000] {
        let (node, pod_ns) = node_with(pods);
        let [full, resync, unchanged, host] = measure(&node, pods);
        println!(
            "  {pods:>5} namespaces: full read {full:.2} ms, one resync pass {resync:.2} ms, \
             nothing changed {unchanged:.2} ms, one host address dump {host:.2} ms \
             (full / dump x{:.0}, resync pass / dump x{:.0}, unchanged / dump x{:.1})",
            full / host,
            resync / host,
            unchanged / host
        );
        let idle = (pods == 110).then(|| idle_cpu(&node, pods));
        if let Some(cpu) = idle {
            println!("  agent idle over 60 s with {pods} pods unchanged: {cpu:.3} s of CPU");
        }
        rows.insert(
            pods.to_string(),
            json!({
                "namespaces": pods,
                "full_read_ms": full,
                "resync_pass_ms": resync,
                "resync_pass_namespaces": pods.min(STALE_PER_PASS),
                "unchanged_read_ms": unchanged,
                "host_address_dump_ms": host,
                "full_to_dump_ratio": full / host,
                "resync_pass_to_dump_ratio": resync / host,
                "unchanged_to_dump_ratio": unchanged / host,
                "agent_idle_cpu_seconds_over_60s": idle,
            }),
        );
        drop(pod_ns);
    }
    json!({ "bench": "namespaces", "rounds": ROUNDS, "nodes": rows })
}

/// The agent's CPU seconds over 60 s on `node`, its pods unchanged.
fn idle_cpu(node: &NetNs, pods: usize) -> f64 {
    let dir = TempDir::new("bench-namespaces");
    let pods_file = dir.join("pods.json");
    let cns_file = dir.join("cns.json");
    let ips: Vec<String> = (0..pods).map(pod_ip).collect();
    write_list(
        &pods_file,
        ips.iter()
            .enumerate()
            .map(|(i, ip)| pod("t", &format!("pod-{i}"), "node-a", &[ip.as_str()]))
            .collect::<Vec<_>>(),
    );
    write_list(&cns_file, Vec::new());
    let (cpu, _rss) = crate::agent_at_rest(
        node,
        &pods_file,
        &cns_file,
        std::time::Duration::from_mins(1),
    );
    cpu
}
