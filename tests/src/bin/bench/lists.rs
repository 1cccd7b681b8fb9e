//! Lists of huge objects: the peak RSS of `ipshadow check` and of the agent
//! on a node with a pod waiting for an address whose 50 sandbox Events carry
//! 1.4 MB messages each (70 MB in the one list a pod's refusals are read
//! with), beside the same with one 400-byte Event. With `IPSHADOW_BEFORE_BIN`
//! (a build of an earlier commit) the same runs of that binary too,
//! interleaved round by round: before and after side by side in one run.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use ipshadow_tests::{
    apiserver::{ApiServer, Res},
    ipshadow_bin,
    lab::{INGRESS, Lab, ME, ROUTER, event},
    node::SimNode,
    objects::{cilium_node, kubelet_sandbox_event, node_accepting, waiting_pod, with_pod_cidrs},
};
use serde_json::{Value, json};

use crate::audit::output_and_peak_kib;

/// Events of the waiting pod: as many as one list of its refusals reads.
const EVENTS: usize = 50;
/// `check` runs per binary and size (the median's peak is reported).
const ROUNDS: usize = 3;
const LISTEN: &str = "127.0.0.1:19464";

fn in_use(ip: &str) -> String {
    format!(
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for \
         sandbox \"3e42\": plugin type=\"cilium-cni\" failed (add): unable to create endpoint: \
         [PUT /endpoint/{{id}}][400] putEndpointIdInvalid \"IP ipv4:{ip} is already in use\""
    )
}

/// The node's cluster with `events` sandbox Events of `bytes` each.
fn cluster(api: &ApiServer, events: usize, bytes: usize) {
    api.apply(Res::Nodes, node_accepting(ME, &["10.244.4.0/24"], 110));
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), None),
            &["10.244.4.0/24"],
        ),
    );
    api.apply(Res::Pods, waiting_pod("tenant", "gateway-0", ME));
    let refusal = in_use(INGRESS);
    let pad = "stderr: plugin output line that goes on; ";
    let message = format!(
        "{refusal} {}",
        pad.repeat(bytes.saturating_sub(refusal.len()) / pad.len())
    );
    for i in 0..events {
        let mut e = kubelet_sandbox_event("tenant", "gateway-0", &message, 3);
        e["metadata"]["name"] = json!(format!("gateway-0.{i:03}"));
        api.apply(Res::Events, e);
    }
}

/// `check`'s peak RSS (KiB) with `bin`; it must find the refusal.
fn check_peak(sim: &SimNode, lab: &Lab, bin: &Path) -> u64 {
    let mut cmd = sim.node.command(bin.to_str().unwrap());
    cmd.args(["check", "--node", ME, "--output", "json", "--ebpf", "off"])
        .env("KUBECONFIG", &lab.kubeconfig);
    let (out, peak) = output_and_peak_kib(&mut cmd);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let found = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|f| f["kind"] == "IngressIPCollision" && f["pod"]["name"] == "gateway-0");
    assert!(
        found,
        "{}: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    peak
}

/// The agent's peak RSS (KiB) with `bin`, once it has read the refusals and
/// written their Event (the read is the peak: the Events are not read again
/// for a minute).
fn agent_peak(sim: &SimNode, api: &ApiServer, lab: &Lab, bin: &Path) -> u64 {
    let mut child = sim
        .node
        .command(bin.to_str().unwrap())
        .args([
            "agent",
            "--node",
            ME,
            "--listen",
            LISTEN,
            "--health-listen",
            LISTEN,
        ])
        .args(["--ebpf", "off", "--log-level", "warn"])
        .env("KUBECONFIG", &lab.kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let start = Instant::now();
    // The pod is read once it has waited 30 s without an address.
    while event(api, "tenant", "gateway-0", "IngressIPCollision").is_none() {
        assert!(
            start.elapsed() < Duration::from_mins(3),
            "{}: no IngressIPCollision Event",
            bin.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let peak = std::fs::read_to_string(&status)
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let _ = child.kill();
    let _ = child.wait();
    peak
}

/// Every figure of one cluster (`events` of `bytes`) for each binary.
fn measure(events: usize, bytes: usize, bins: &[(&str, PathBuf)]) -> Value {
    let sim = SimNode::kube_ovn("lists", ROUTER);
    let mut checks: Vec<Vec<u64>> = vec![Vec::new(); bins.len()];
    let mut agents = Vec::new();
    {
        let api = ApiServer::start(Some(&sim.node));
        cluster(&api, events, bytes);
        let lab = Lab::new("lists", &api);
        for _ in 0..ROUNDS {
            for (i, (_, bin)) in bins.iter().enumerate() {
                checks[i].push(check_peak(&sim, &lab, bin));
            }
        }
        for (_, bin) in bins {
            // Each agent on a fresh server: its Event series is the agent's own.
            let api = ApiServer::start(Some(&sim.node));
            cluster(&api, events, bytes);
            let lab = Lab::new("lists-agent", &api);
            agents.push(agent_peak(&sim, &api, &lab, bin));
        }
    }
    let mut out = serde_json::Map::new();
    for (i, (name, bin)) in bins.iter().enumerate() {
        let mut c = checks[i].clone();
        c.sort_unstable();
        let mib = |k: u64| k as f64 / 1024.0;
        println!(
            "{events} Events of {bytes} bytes, {name:>6}: check peak {:.1} MiB (runs {:?} KiB), agent peak {:.1} MiB",
            mib(c[c.len() / 2]),
            checks[i],
            mib(agents[i]),
        );
        out.insert(
            (*name).to_owned(),
            json!({
                "binary": bin.display().to_string(),
                "check_peak_rss_kib": c[c.len() / 2],
                "check_peak_rss_kib_runs": checks[i],
                "agent_peak_rss_kib": agents[i],
            }),
        );
    }
    json!({"events": events, "message_bytes": bytes, "by_binary": out})
}

pub(crate) fn run() -> Value {
    let mut bins = vec![("after", ipshadow_bin())];
    if let Some(before) = std::env::var_os("IPSHADOW_BEFORE_BIN") {
        bins.insert(0, ("before", PathBuf::from(before)));
    }
    println!(
        "\nlists of huge objects: peak RSS of check and the agent ({ROUNDS} check runs each, median)"
    );
    let huge = measure(EVENTS, 1_400_000, &bins);
    let small = measure(1, 400, &bins);
    json!({
        "rounds": ROUNDS,
        "huge_events": huge,
        "one_small_event": small,
        "before_commit": std::env::var("IPSHADOW_BEFORE_COMMIT").ok(),
    })
}
