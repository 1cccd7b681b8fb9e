//! `ipshadow check --watch-seconds`: eBPF evidence on findings, restarts after
//! `kill -9`, and netlink-only operation when eBPF is off or cannot load.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{
    io::{BufRead as _, BufReader},
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use ipshadow_tests::{
    attach_modes, can_run_netns_tests, ipshadow_bin,
    lab::{ME, PROGRAM, ROUTER},
    netns::{NetNs, attached_programs},
    node::SimNode,
    objects::{cilium_node, list, pod, write_list},
};

/// A pods file and a CiliumNodes file for one pod on the router IP.
fn inputs(tag: &str) -> (ipshadow_tests::TempDir, PathBuf, PathBuf) {
    let dir = ipshadow_tests::TempDir::new(&format!("watch-{tag}"));
    let pods = dir.join("pods.json");
    let cns = dir.join("cns.json");
    let p = list(vec![
        pod("tenant", "postgres-0", ME, &[ROUTER]),
        pod("tenant", "web-0", ME, &["10.244.0.35"]),
    ]);
    std::fs::write(&pods, serde_json::to_vec(&p).unwrap()).unwrap();
    write_list(&cns, vec![cilium_node(ME, ROUTER, None, None)]);
    (dir, pods, cns)
}

fn check_cmd(ns: &NetNs, pods: &PathBuf, cns: &PathBuf, extra: &[&str]) -> Command {
    let mut cmd = ns.command(ipshadow_bin().to_str().unwrap());
    cmd.args(["check", "--node", ME, "--output", "json", "--pods"])
        .arg(pods)
        .arg("--ciliumnodes")
        .arg(cns)
        .args(extra);
    cmd
}

/// Starts `cmd` and returns once its log says the observer is attached, with the log lines so far.
// The caller waits for the child; on the panic paths the test process ends anyway.
#[allow(clippy::zombie_processes)]
fn spawn_until_attached(mut cmd: Command) -> (Child, Vec<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|e| {
                panic!("no 'observer attached' log ({e}); stderr so far: {seen:#?}")
            });
        let done = line.contains("observer attached");
        seen.push(line);
        if done {
            return (child, seen);
        }
    }
}

fn probe(ns: &NetNs, n: usize, port: u16) {
    let _inside = ns.enter();
    let addr = SocketAddr::new(ROUTER.parse().unwrap(), port);
    for _ in 0..n {
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    }
}

#[test]
fn watched_findings_carry_the_probes_as_evidence() {
    if !can_run_netns_tests("watched_findings_carry_the_probes_as_evidence") {
        return;
    }
    let mut sim = SimNode::kube_ovn("wev", ROUTER);
    sim.add_pod("10.244.0.35");
    let (_dir, pods, cns) = inputs("ev");
    let (child, _stderr) =
        spawn_until_attached(check_cmd(&sim.node, &pods, &cns, &["--watch-seconds", "3"]));
    // The kubelet's probes to postgres-0 on 5432, as in the field report.
    probe(&sim.node, 20, 5432);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = ipshadow_tests::json_stdout(&out);
    let f = &v["findings"][0];
    assert_eq!(f["kind"], "RouterIPCollision");
    let e = &f["evidence"];
    assert_eq!(e["tcp_syns"], 20, "{e:#}");
    assert_eq!(e["refused_connections"], 20, "{e:#}");
    assert_eq!(e["destination_ports"], serde_json::json!([5432]), "{e:#}");
    assert_eq!(e["samples"][0]["dport"], 5432);
    assert_eq!(e["samples"][0]["tcp_flags"], "SYN");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("(port 5432) delivered locally, 20 TCP connection attempts, 20 refused by the local stack"),
        "{msg}"
    );
    // Detached on exit.
    assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 0);
}

#[test]
fn a_restart_after_kill_9_leaves_exactly_one_program_on_lo() {
    if !can_run_netns_tests("a_restart_after_kill_9_leaves_exactly_one_program_on_lo") {
        return;
    }
    let sim = SimNode::kube_ovn("wk9", ROUTER);
    let (_dir, pods, cns) = inputs("k9");
    for mode in attach_modes("a_restart_after_kill_9_leaves_exactly_one_program_on_lo") {
        let args = ["--watch-seconds", "60", "--tc-attach", mode];
        let (mut first, _) = spawn_until_attached(check_cmd(&sim.node, &pods, &cns, &args));
        assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 1, "{mode}");
        first.kill().unwrap(); // SIGKILL: no chance to detach
        first.wait().unwrap();
        // A legacy tc filter outlives its process; a TCX link does not.
        let left = attached_programs(&sim.node, "lo", PROGRAM);
        assert_eq!(left, usize::from(mode == "netlink"), "{mode}");

        let (mut second, stderr) = spawn_until_attached(check_cmd(&sim.node, &pods, &cns, &args));
        assert_eq!(
            attached_programs(&sim.node, "lo", PROGRAM),
            1,
            "{mode}: restart stacked programs"
        );
        second.kill().unwrap();
        second.wait().unwrap();
        if mode == "netlink" {
            assert!(
                stderr.iter().any(|l| l.contains("removed tc filters")),
                "{stderr:#?}"
            );
            // Leave the namespace clean for the TCX round.
            let (third, _) =
                spawn_until_attached(check_cmd(&sim.node, &pods, &cns, &["--watch-seconds", "1"]));
            third.wait_with_output().unwrap();
        }
        assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 0, "{mode}");
    }
}

#[test]
fn without_ebpf_detection_is_unchanged() {
    if !can_run_netns_tests("without_ebpf_detection_is_unchanged") {
        return;
    }
    let sim = SimNode::kube_ovn("woff", ROUTER);
    let (_dir, pods, cns) = inputs("off");
    let plain = check_cmd(&sim.node, &pods, &cns, &[]).output().unwrap();
    let plain = ipshadow_tests::json_stdout(&plain);
    assert_eq!(plain["findings"].as_array().unwrap().len(), 1);

    let off = check_cmd(
        &sim.node,
        &pods,
        &cns,
        &["--watch-seconds", "1", "--ebpf", "off"],
    )
    .output()
    .unwrap();
    assert_eq!(off.status.code(), Some(1));
    assert_eq!(ipshadow_tests::json_stdout(&off), plain);

    // A real load failure: the same binary without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN.
    let dropped = |ebpf: &str| {
        let mut cmd = sim.node.command("capsh");
        cmd.arg("--drop=cap_bpf,cap_perfmon,cap_sys_admin").arg("--").arg("-c").arg(format!(
            "exec {} check --node {ME} --output json --pods {} --ciliumnodes {} --watch-seconds 1 --ebpf {ebpf}",
            ipshadow_bin().display(),
            pods.display(),
            cns.display()
        ));
        cmd.output().unwrap()
    };
    let auto = dropped("auto");
    assert_eq!(
        auto.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&auto.stderr)
    );
    assert_eq!(ipshadow_tests::json_stdout(&auto), plain);
    let err = String::from_utf8_lossy(&auto.stderr);
    assert_eq!(err.matches("eBPF unavailable").count(), 1, "{err}");
    assert!(err.contains("CAP_BPF"), "{err}");

    let required = dropped("required");
    assert_eq!(required.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&required.stderr).contains("--ebpf=required"));
}

#[test]
fn a_running_agents_filter_survives_a_check_that_would_attach_beside_it() {
    if !can_run_netns_tests("a_running_agents_filter_survives_a_check") {
        return;
    }
    let sim = SimNode::kube_ovn("wlive", ROUTER);
    let (_dir, pods, cns) = inputs("live");
    for mode in attach_modes("a_running_agents_filter_survives_a_check") {
        let agent = ipshadow_tests::agent::AgentProc::spawn(
            &sim.node,
            &[
                "--node",
                ME,
                "--pods",
                pods.to_str().unwrap(),
                "--ciliumnodes",
                cns.to_str().unwrap(),
                "--tc-attach",
                mode,
            ],
        );
        agent.wait_ready(&sim.node);
        assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 1, "{mode}");
        let out = check_cmd(
            &sim.node,
            &pods,
            &cns,
            &["--watch-seconds", "5", "--tc-attach", "netlink"],
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // check says why it watches nothing, still reports the findings, and leaves the agent's filter.
        assert!(
            stderr.contains("does not attach over it"),
            "{mode}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(1), "{mode}: {stderr}");
        assert_eq!(
            ipshadow_tests::json_stdout(&out)["findings"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            attached_programs(&sim.node, "lo", PROGRAM),
            1,
            "{mode}: the agent's filter is gone"
        );
        // And it still sees the host's traffic.
        probe(&sim.node, 3, 5432);
        let counted =
            ipshadow_tests::agent::AgentProc::wait_metrics(&sim.node, ipshadow_tests::HANG, |m| {
                ipshadow_tests::http::sample(
                    m,
                    "ipshadow_refused_connections_total",
                    &[("pod", "postgres-0")],
                )
                .is_some_and(|n| n >= 3.0)
            });
        assert!(
            counted.is_some(),
            "{mode}: the agent's classifier stopped counting"
        );
        let (status, _) = agent.terminate();
        assert!(status.success());
        assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 0, "{mode}");
    }
}
