//! Reaction time: from a collision appearing to the finding in /metrics and the
//! Event at the API server, beside the raw latency of the same netlink
//! notification seen by a bare subscriber in the same run.

use std::{
    sync::mpsc,
    time::{Duration, Instant},
};

use futures::StreamExt as _;
use ipshadow_tests::{
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    http::sample,
    netns::NetNs,
    node::SimNode,
    objects::{node, pod, write_list},
};
use netlink_packet_core::NetlinkPayload;
use netlink_packet_route::{RouteNetlinkMessage, address::AddressAttribute};
use serde_json::{Value, json};

use crate::percentile;

const ROUTER: &str = "10.244.4.251";
const TRIALS: usize = 100;

fn summary(v: &[f64]) -> Value {
    json!({"p50_ms": percentile(v, 0.5), "p99_ms": percentile(v, 0.99), "max_ms": percentile(v, 1.0), "trials": v.len()})
}

/// A bare rtnetlink subscriber in `ns`: sends the arrival time of every new
/// address notification for `ip`.
fn subscriber(ns: &NetNs, ip: &'static str) -> mpsc::Receiver<Instant> {
    let (tx, rx) = mpsc::channel();
    let name = ns.name.clone();
    std::thread::spawn(move || {
        let _inside = ipshadow_tests::netns::enter_named(&name);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (conn, _h, mut msgs) =
                rtnetlink::new_multicast_connection(&[rtnetlink::MulticastGroup::Ipv4Ifaddr])
                    .unwrap();
            tokio::spawn(conn);
            let want: std::net::IpAddr = ip.parse().unwrap();
            while let Some((m, _)) = msgs.next().await {
                if let NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewAddress(a)) = m.payload
                    && a.attributes
                        .iter()
                        .any(|x| matches!(x, AddressAttribute::Address(i) if *i == want))
                    && tx.send(Instant::now()).is_err()
                {
                    return;
                }
            }
        });
    });
    std::thread::sleep(Duration::from_millis(200));
    rx
}

fn wait_metrics(ns: &NetNs, f: impl Fn(&str) -> bool) -> Instant {
    let start = Instant::now();
    loop {
        if let Ok((200, m)) = AgentProc::get(ns, "/metrics")
            && f(&m)
        {
            return Instant::now();
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no reaction within 5 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub(crate) fn run() -> Value {
    let router = |m: &str| {
        sample(
            m,
            "ipshadow_collisions",
            &[("kind", "RouterIPCollision"), ("scope", "same-node")],
        )
    };

    // (a) An address appears on cilium_host while the pod exists.
    let sim = SimNode::kube_ovn("react", ROUTER);
    sim.node
        .ip(&["addr", "del", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
    let dir = ipshadow_tests::TempDir::new("bench-react");
    let pods = dir.join("pods.json");
    write_list(&pods, vec![pod("t", "pg", "node-a", &[ROUTER])]);
    let agent = AgentProc::spawn(
        &sim.node,
        &[
            "--node",
            "node-a",
            "--pods",
            pods.to_str().unwrap(),
            "--log-level",
            "warn",
        ],
    );
    agent.wait_ready(&sim.node);
    let notes = subscriber(&sim.node, ROUTER);
    let (mut to_metrics, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..TRIALS {
        let t0 = Instant::now();
        sim.node
            .ip(&["addr", "add", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
        let tn = notes
            .recv_timeout(Duration::from_secs(2))
            .expect("the subscriber saw the address");
        let tm = wait_metrics(&sim.node, |m| router(m) == Some(1.0));
        to_metrics.push(tm.saturating_duration_since(tn).as_secs_f64() * 1e3);
        raw.push(tn.saturating_duration_since(t0).as_secs_f64() * 1e3);
        sim.node
            .ip(&["addr", "del", &format!("{ROUTER}/32"), "dev", "cilium_host"]);
        wait_metrics(&sim.node, |m| router(m) == Some(0.0));
    }
    drop(agent);

    // (b) A pod with a colliding IP appears in the API.
    let sim2 = SimNode::kube_ovn("react2", ROUTER);
    let api = ApiServer::start(Some(&sim2.node));
    api.apply(Res::Nodes, node("node-a", &["10.244.4.0/24"]));
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let agent = AgentProc::spawn_env(
        &sim2.node,
        &["--node", "node-a", "--log-level", "warn"],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    agent.wait_ready(&sim2.node);
    let (mut pod_metrics, mut pod_event) = (Vec::new(), Vec::new());
    for i in 0..TRIALS {
        let name = format!("pg-{i}");
        let t0 = Instant::now();
        api.apply(Res::Pods, pod("t", &name, "node-a", &[ROUTER]));
        let tm = wait_metrics(&sim2.node, |m| {
            sample(m, "ipshadow_collision_info", &[("pod", &name)]) == Some(1.0)
        });
        let start = Instant::now();
        while !api
            .event_objects()
            .iter()
            .any(|e| e["regarding"]["name"] == name.as_str())
        {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "no Event for {name}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let te = Instant::now();
        pod_metrics.push(tm.duration_since(t0).as_secs_f64() * 1e3);
        pod_event.push(te.duration_since(t0).as_secs_f64() * 1e3);
        api.delete(Res::Pods, "t", &name);
        wait_metrics(&sim2.node, |m| {
            sample(m, "ipshadow_collision_info", &[("pod", &name)]).is_none()
        });
    }
    drop(agent);

    let r = json!({
        "address_added": {
            "bare_subscriber_notified_after_ip_addr_add": summary(&raw),
            "finding_in_metrics_after_the_notification": summary(&to_metrics),
        },
        "pod_added_to_api": {
            "finding_in_metrics": summary(&pod_metrics),
            "event_at_api_server": summary(&pod_event),
        },
    });
    println!("\nreaction time, {TRIALS} trials each (ms)               p50      p99      max");
    for (label, v) in [
        ("ip addr add -> bare netlink subscriber", &raw),
        ("notification -> finding in /metrics", &to_metrics),
        ("pod in API -> finding in /metrics", &pod_metrics),
        ("pod in API -> Event at the API server", &pod_event),
    ] {
        println!(
            "  {label:<44} {:>7.2}  {:>7.2}  {:>7.2}",
            percentile(v, 0.5),
            percentile(v, 0.99),
            percentile(v, 1.0)
        );
    }
    r
}
