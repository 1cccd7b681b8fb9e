//! `cargo xtask demo`: node-a of the cozystack cluster, simulated in network
//! namespaces (kube-ovn's flat pod CIDR routed via ovn0, chained Cilium's router
//! IP on cilium_host), with the test API server standing in for the cluster, the
//! real `ipshadow agent`, and a kubelet-like prober. It shows what an operator
//! would see: the probes failing, the findings, the eBPF evidence, the Events as
//! `kubectl describe` prints them, and the metrics. Everything it creates is
//! removed at the end, on Ctrl-C, and on the next run if it was killed.
//!
//! `--non-interactive` (or CI=true) skips the pauses; the test suite runs it so.
#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    clippy::too_many_lines,
    reason = "a demo: one story told top to bottom, printed"
)]

use std::{
    io::IsTerminal as _,
    net::{SocketAddr, TcpListener, TcpStream},
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use ipshadow_tests::{
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    http::sample,
    lab::{INGRESS, ME, ROUTER},
    netns::{NetNs, delete_leftovers},
    node::SimNode,
    objects::{cilium_config, kube_ovn_ip, pending_pod, pod, subnet},
};

const TAG: &str = "demo";
const WEB: &str = "10.244.0.35";

struct Ui {
    interactive: bool,
}

impl Ui {
    fn step(&self, title: &str) {
        if std::io::stdout().is_terminal() {
            println!("\n\x1b[1m== {title}\x1b[0m");
        } else {
            println!("\n== {title}");
        }
        if self.interactive {
            std::thread::sleep(Duration::from_millis(800));
        }
    }
}

/// A TCP server in a pod namespace: the pod is healthy and listening.
fn serve(ns_name: &str, port: u16) {
    let name = ns_name.to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _inside = ipshadow_tests::netns::enter_named(&name);
        let l = TcpListener::bind(("0.0.0.0", port)).unwrap();
        tx.send(()).unwrap();
        for conn in l.incoming() {
            drop(conn);
        }
    });
    rx.recv().unwrap();
}

/// One kubelet-like TCP probe from the node's host.
fn probe(node: &NetNs, ip: &str, port: u16) -> String {
    let _inside = node.enter();
    let addr: SocketAddr = format!("{ip}:{port}").parse().unwrap();
    match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
        Ok(_) => "ok".to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused".to_owned()
        }
        Err(e) => e.to_string(),
    }
}

fn kubectl(node: &NetNs, kubeconfig: &Path, args: &[&str]) -> String {
    let out = node
        .command("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s
}

/// The Events section of `kubectl describe`.
fn events_section(describe: &str) -> String {
    describe
        .split_once("Events:")
        .map_or_else(|| describe.to_owned(), |(_, e)| format!("Events:{e}"))
}

fn wait(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn main() -> ExitCode {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("the demo creates network namespaces and loads eBPF: run it as root");
        return ExitCode::from(2);
    }
    let interactive =
        !std::env::args().any(|a| a == "--non-interactive") && std::env::var("CI").is_err();
    let ui = Ui { interactive };
    let stale = delete_leftovers(TAG);
    if stale > 0 {
        println!("removed {stale} namespaces left by an interrupted demo");
    }
    if let Err(e) = ctrlc::set_handler(|| {
        let n = delete_leftovers(TAG);
        eprintln!(
            "\ninterrupted: removed {n} demo namespaces (and with them every veth and tc program)"
        );
        std::process::exit(130);
    }) {
        eprintln!(
            "warning: no Ctrl-C handler ({e}); an interrupted demo is cleaned up by the next run"
        );
    }
    let ok = run(&ui);
    let left = delete_leftovers(TAG);
    println!("\ncleaned up: {left} namespaces left over after the agent stopped (expected 0)");
    if ok && left == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run(ui: &Ui) -> bool {
    ui.step("node-a: kube-ovn routes the whole pod CIDR via ovn0; Cilium put its router IP on cilium_host");
    let mut sim = SimNode::kube_ovn(TAG, ROUTER);
    let web = sim.add_pod(WEB).name.clone();
    let pg = sim.add_pod(ROUTER).name.clone();
    serve(&web, 80);
    serve(&pg, 5432);
    sim.node
        .ip(&["route", "add", "blackhole", "10.244.0.99/32"]);
    let show = |args: &[&str]| {
        let out = sim.node.command("ip").args(args).output().unwrap();
        print!(
            "$ ip {}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
    };
    show(&["-4", "addr", "show", "dev", "cilium_host"]);
    show(&["route", "show", "10.244.0.0/16"]);
    show(&["route", "get", ROUTER]);

    ui.step("the cluster (test API server): kube-ovn gave pods addresses Cilium holds");
    let api = ApiServer::start(Some(&sim.node));
    // node-a and node-b as in the field report (addresses in ipshadow_tests::lab).
    ipshadow_tests::lab::cozystack(&api);
    api.set_crd(Res::Subnets, true);
    api.apply(
        Res::Subnets,
        subnet("ovn-default", "10.244.0.0/16", &["10.244.0.1"]),
    );
    let pods = [
        ("tenant-a", "web-0", WEB, "healthy"),
        (
            "tenant-a",
            "postgres-0",
            ROUTER,
            "silent: node-a's router IP",
        ),
        (
            "tenant-a",
            "gateway-0",
            INGRESS,
            "loud: node-a's Ingress IP, sandbox refused, still Pending",
        ),
        (
            "tenant-b",
            "webhook-0",
            "10.244.1.182",
            "node-b's router IP",
        ),
        ("tenant-b", "cache-0", "10.244.1.12", "node-b's Ingress IP"),
        (
            "tenant-b",
            "stale-0",
            "10.244.0.99",
            "a stale blackhole route on node-a",
        ),
    ];
    for (ns, name, ip, what) in pods {
        let obj = if name == "gateway-0" {
            // kube-ovn records every allocation in an IP object tenants cannot write.
            api.apply(Res::KubeOvnIps, kube_ovn_ip(ns, name, ME, ip));
            pending_pod(ns, name, ME, ip)
        } else {
            pod(ns, name, ME, &[ip])
        };
        api.apply(Res::Pods, obj);
        println!("  pod {ns}/{name:<11} {ip:<13} {what}");
    }
    let dir = ipshadow_tests::TempDir::new("demo");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);

    ui.step("the real agent starts on node-a (eBPF classifier on lo, watches, Events)");
    let agent = AgentProc::spawn_env(
        &sim.node,
        &["--node", ME, "--log-level", "info"],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    agent.wait_ready(&sim.node);
    println!(
        "  ready; metrics at http://{}/metrics inside {} (ip netns exec {} curl -s http://{}/metrics)",
        AgentProc::addr(),
        sim.node.name,
        sim.node.name,
        AgentProc::addr()
    );

    ui.step("the kubelet probes its pods from node-a's host");
    for round in 1..=5 {
        println!(
            "  probe {round}: web-0 {WEB}:80 -> {:<20} postgres-0 {ROUTER}:5432 -> {}",
            probe(&sim.node, WEB, 80),
            probe(&sim.node, ROUTER, 5432)
        );
    }
    println!(
        "  (postgres-0 is listening on 5432 in its own namespace; the probe never reaches it)"
    );

    ui.step("what ipshadow reports: Events as `kubectl describe` shows them");
    let want = [
        ("tenant-a", "postgres-0", "RouterIPCollision"),
        ("tenant-a", "postgres-0", "HostTrafficBlackholed"),
        ("tenant-a", "gateway-0", "IngressIPCollision"),
        ("tenant-b", "webhook-0", "RouterIPCollision"),
        ("tenant-b", "cache-0", "IngressIPCollision"),
        ("tenant-b", "stale-0", "HostRouteBlackhole"),
        ("default", ME, "AllocatorOverlap"),
    ];
    let all = wait(Duration::from_secs(40), || {
        want.iter().all(|(ns, name, reason)| {
            api.core_events_for(ns, name)
                .iter()
                .any(|e| e["reason"] == *reason)
        })
    });
    for (ns, name) in [("tenant-a", "postgres-0"), ("tenant-a", "gateway-0")] {
        println!("$ kubectl describe pod -n {ns} {name}   # Events section");
        println!(
            "{}",
            events_section(&kubectl(
                &sim.node,
                &kubeconfig,
                &["describe", "pod", "-n", ns, name]
            ))
        );
    }
    // The notes' size, which README ("Events") bounds and the demo test checks.
    for e in api.event_objects() {
        let note = e["note"].as_str().unwrap_or_default();
        let (prose, fix) = note.split_once(" Fix: ").unwrap_or((note, ""));
        // What breaks behind the pod leads the prose, once known.
        let lead = if prose.starts_with("Critical: ") || prose.starts_with("High: ") {
            prose.find(". ").map_or(0, |end| end + 2)
        } else {
            0
        };
        println!(
            "note bytes: {} {} prose {} lead {lead} fix {}",
            e["reason"].as_str().unwrap_or_default(),
            note.len(),
            prose.len(),
            fix.len() + " Fix: ".len() * usize::from(!fix.is_empty())
        );
    }
    println!("$ kubectl get events -A -o custom-columns=…");
    println!(
        "{}",
        kubectl(
            &sim.node,
            &kubeconfig,
            &[
                "get",
                "events",
                "-A",
                "-o",
                "custom-columns=NAMESPACE:.metadata.namespace,OBJECT:.involvedObject.name,TYPE:.type,REASON:.reason,COUNT:.count"
            ]
        )
    );

    ui.step("the evidence in /metrics");
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    for l in m.lines().filter(|l| {
        (l.starts_with("ipshadow_collision_info")
            || l.starts_with("ipshadow_refused")
            || l.starts_with("ipshadow_blackholed_tcp"))
            || l.starts_with("ipshadow_allocator_overlaps")
            || l.starts_with("ipshadow_ebpf_attached")
    }) {
        println!("  {l}");
    }
    let refused = sample(
        &m,
        "ipshadow_refused_connections_total",
        &[("pod", "postgres-0")],
    )
    .unwrap_or(0.0);

    ui.step("the fix, as the Events say: a Cilium pool cut from the end of ovn-default's block, excluded there");
    println!(
        "  Cilium: ipam.mode=cluster-pool from 10.244.248.0/21 (a /29 per node); kube-ovn: \n  kubectl patch subnet ovn-default --type merge -p '{{\"spec\":{{\"excludeIps\":[\"10.244.0.1\",\"10.244.248.0..10.244.255.255\"]}}}}'"
    );
    println!(
        "  (not a prefix outside ovn-default: kube-ovn masquerades host traffic only from its\n  overlay subnets, and Gateway API across nodes breaks); then delete the colliding pods."
    );

    ui.step("switching Cilium to cluster-pool is not enough on a running node (seeds/001)");
    api.apply(
        Res::ConfigMaps,
        cilium_config("cluster-pool", "10.244.248.0/21"),
    );
    println!(
        "  cilium-config: ipam=cluster-pool, cluster-pool-ipv4-cidr=10.244.248.0/21; CiliumNode {ME} still has spec.ipam.podCIDRs 10.244.4.0/24"
    );
    let stuck = wait(Duration::from_secs(20), || {
        api.core_events_for("default", ME)
            .iter()
            .any(|e| e["reason"] == "IPAMMigrationStuck")
    });
    println!("$ kubectl describe node {ME}   # Events section");
    println!(
        "{}",
        events_section(&kubectl(&sim.node, &kubeconfig, &["describe", "node", ME]))
    );
    let all = all && stuck;

    if !all {
        println!("agent log:\n{}", agent.log_text());
    }
    let (status, took) = agent.terminate();
    println!("\nagent stopped on SIGTERM in {took:?} ({status}); eBPF detached");
    drop(api);
    drop(sim);
    let ok = all && refused >= 5.0 && status.success();
    if !all {
        println!("missing Events: some mode was not reported");
    }
    println!(
        "demo {}: {} refused probes counted by eBPF",
        if ok { "complete" } else { "FAILED" },
        refused
    );
    ok
}
