//! API load: the requests and watches one agent opens against the API server
//! while idle and during a pod churn, for a small and a large cluster. Constant
//! in cluster size is the point: the agent never lists the world per change.

use std::time::{Duration, Instant};

use ipshadow_tests::{
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    node::SimNode,
    objects::{cilium_node, node, pod},
};
use serde_json::{Value, json};

const ROUTER: &str = "10.244.4.251";
/// The 5-minute idle period (both clusters are measured at once).
const IDLE_SECONDS: u64 = 300;
const CHURN: usize = 1000;
const CHURN_PACE: Duration = Duration::from_millis(20);

fn one(size: &str, other_nodes: usize, other_pods: usize) -> Value {
    let sim = SimNode::kube_ovn(&format!("api{}", &size[..1]), ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    api.apply(Res::Nodes, node("node-a", &["10.244.4.0/24"]));
    api.apply(
        Res::CiliumNodes,
        cilium_node("node-a", ROUTER, Some("10.244.4.12"), None),
    );
    for i in 0..other_nodes {
        let r = format!("10.200.{}.{}", i / 250, i % 250 + 1);
        api.apply(
            Res::CiliumNodes,
            cilium_node(&format!("node-{i}"), &r, None, None),
        );
    }
    for i in 0..other_pods {
        let ip = format!("10.245.{}.{}", i / 250, i % 250 + 1);
        api.apply(
            Res::Pods,
            pod(
                "t",
                &format!("far-{i}"),
                &format!("node-{}", i % other_nodes.max(1)),
                &[ip.as_str()],
            ),
        );
    }
    for i in 0..50 {
        let ip = format!("10.244.100.{}", i + 1);
        api.apply(
            Res::Pods,
            pod("t", &format!("here-{i}"), "node-a", &[ip.as_str()]),
        );
    }
    let dir = ipshadow_tests::TempDir::new(&format!("bench-api-{size}"));
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let agent = AgentProc::spawn_env(
        &sim.node,
        &["--node", "node-a", "--log-level", "warn"],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    agent.wait_ready(&sim.node);
    std::thread::sleep(Duration::from_secs(2));
    let start = api.counts();
    std::thread::sleep(Duration::from_secs(IDLE_SECONDS));
    let idle = api.counts();
    // Churn: pods come and go on this node, IPs reused, some on the router IP,
    // paced (20 ms per creation and deletion) so that the agent sees them one by
    // one, as a real churn would show them, rather than all in one update.
    let t = Instant::now();
    for i in 0..CHURN / 2 {
        let ip = if i % 10 == 0 {
            ROUTER.to_owned()
        } else {
            format!("10.244.101.{}", i % 20 + 1)
        };
        api.apply(
            Res::Pods,
            pod("t", &format!("churn-{i}"), "node-a", &[ip.as_str()]),
        );
        if i >= 10 {
            api.delete(Res::Pods, "t", &format!("churn-{}", i - 10));
        }
        std::thread::sleep(CHURN_PACE);
    }
    let churn_secs = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(3));
    let after = api.counts();
    drop(agent);
    let watches_at_start = start.watches;
    json!({
        "other_nodes": other_nodes,
        "other_pods": other_pods,
        "watches_opened_to_start": watches_at_start,
        "lists_to_start": start.lists,
        "idle_seconds": IDLE_SECONDS,
        "requests_while_idle": idle.total - start.total,
        "idle_requests_by_kind": {
            "watches": idle.watches - start.watches,
            "lists": idle.lists - start.lists,
            "gets": idle.gets - start.gets,
            "event_writes": (idle.creates + idle.patches) - (start.creates + start.patches),
        },
        "churn_operations": CHURN,
        "churn_seconds": churn_secs,
        "requests_during_churn": after.total - idle.total,
        "event_writes_during_churn": (after.creates + after.patches) - (idle.creates + idle.patches),
        "lists_during_churn": after.lists - idle.lists,
        "idle_watches": idle.watches - start.watches,
    })
}

pub(crate) fn run() -> Value {
    // Side by side, each in its own namespaces with its own API server.
    let small = std::thread::spawn(|| one("small", 10, 100));
    let large = one("large", 1000, 5000);
    let small = small.join().unwrap();
    println!("\nAPI load of one agent                       small cluster   large cluster");
    for (label, key) in [
        ("watches opened at start", "watches_opened_to_start"),
        ("lists at start", "lists_to_start"),
        ("requests in 5 min idle", "requests_while_idle"),
        ("  of them watches (re-opened)", "idle_watches"),
        (
            "requests during 1,000-op pod churn",
            "requests_during_churn",
        ),
        ("  of them Event writes", "event_writes_during_churn"),
        ("  of them lists", "lists_during_churn"),
    ] {
        println!("  {label:<40} {:>14} {:>15}", small[key], large[key]);
    }
    println!("  (small: 10 nodes, 100 pods elsewhere; large: 1,000 nodes, 5,000 pods elsewhere)");
    json!({"small": small, "large": large})
}
