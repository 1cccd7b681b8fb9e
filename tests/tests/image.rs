//! The real image (`cargo xtask image`: the static binary on FROM scratch,
//! built here by podman without a registry) runs the agent with the chart's
//! DaemonSet settings — its capabilities, read-only root, no privilege
//! escalation, uid, env and probe ports — in a network namespace made for the
//! test, against the test API server: the agent attaches its classifier to
//! that namespace's lo, answers /readyz, reports a collision, and the chart's
//! `helm test` command passes against it. Root only; `cargo xtask test` builds
//! the image and names it in `IPSHADOW_IMAGE` (with `CONTAINERS_CONF`, podman's
//! settings for this machine: tests/podman/containers.conf).
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use ipshadow_tests::{
    HANG,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, figure, guard, helm, http,
    lab::{ME, PROGRAM, ROUTER, cozystack, poll},
    netns::attached_programs,
    node::SimNode,
    objects::pod,
};
use serde_json::{Value, json};

/// Capability bits (linux/capability.h).
const NET_ADMIN: u64 = 1 << 12;
const PERFMON: u64 = 1 << 38;
const BPF: u64 = 1 << 39;

const TEST: &str = "the_image_runs_the_agent_to_ready_with_the_daemonsets_settings";

/// The node's address on the simulated node (its `ovn0`), as `status.hostIP`.
const HOST_IP: &str = "100.64.0.2";

/// A container `podman run` started; removed (and its agent stopped) on drop.
struct Container {
    name: String,
    child: Option<std::process::Child>,
    log: tempfile::NamedTempFile,
}

impl Container {
    fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    fn inspect(&self, format: &str) -> String {
        let out = podman()
            .args(["inspect", "--format", format, &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `podman stop` (SIGTERM, as kubelet stops a pod), then the agent's exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        let out = podman()
            .args(["stop", "--time", "10", &self.name])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        self.child.take().unwrap().wait().unwrap()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = podman()
                .args(["rm", "--force", "--time", "0", &self.name])
                .output();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn podman() -> Command {
    let mut c = Command::new("podman");
    if std::env::var_os("CONTAINERS_CONF").is_none() {
        c.env(
            "CONTAINERS_CONF",
            concat!(env!("CARGO_MANIFEST_DIR"), "/podman/containers.conf"),
        );
    }
    c
}

/// The container's environment as kubelet gives it: the downward API's
/// fields, and `$(VAR)` expanded from the variables before it.
fn kubelet_env(container: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for e in container["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap().to_owned();
        let value = if let Some(v) = e["value"].as_str() {
            out.iter()
                .fold(v.to_owned(), |v, (k, x)| v.replace(&format!("$({k})"), x))
        } else {
            match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("spec.nodeName") => ME.to_owned(),
                Some("status.hostIP") => HOST_IP.to_owned(),
                other => panic!("no stand-in for {name}'s {other:?}"),
            }
        };
        out.push((name, value));
    }
    out
}

/// The `podman run` flags for a container's securityContext: every field of
/// it is mapped, or the test fails (a new setting needs its flag here).
fn security_flags(sc: &Value, dir: &std::path::Path) -> Vec<String> {
    let mut flags = Vec::new();
    for (k, v) in sc.as_object().unwrap() {
        match (k.as_str(), v) {
            ("privileged", Value::Bool(false)) => {}
            ("allowPrivilegeEscalation", Value::Bool(false)) => {
                flags.extend(["--security-opt".into(), "no-new-privileges".into()]);
            }
            ("readOnlyRootFilesystem", Value::Bool(true)) => flags.push("--read-only".into()),
            ("runAsUser", Value::Number(uid)) => flags.extend(["--user".into(), uid.to_string()]),
            ("capabilities", caps) => {
                for d in caps["drop"].as_array().unwrap() {
                    flags.extend(["--cap-drop".into(), d.as_str().unwrap().to_owned()]);
                }
                for a in caps["add"].as_array().unwrap() {
                    flags.extend(["--cap-add".into(), a.as_str().unwrap().to_owned()]);
                }
            }
            ("seccompProfile", p) if p["type"] == "RuntimeDefault" => {
                let profile = dir.join("seccomp.json");
                std::fs::write(&profile, runtime_default_seccomp().to_string()).unwrap();
                flags.extend([
                    "--security-opt".into(),
                    format!("seccomp={}", profile.display()),
                ]);
            }
            (k, v) => panic!("securityContext.{k} = {v} has no podman flag here"),
        }
    }
    flags
}

/// containerd's RuntimeDefault seccomp profile as far as the agent meets it:
/// podman's default (Debian's containers-common 0.50) allows `bpf` and
/// `perf_event_open` only with CAP_SYS_ADMIN, where containerd's also allows
/// them with CAP_BPF and CAP_PERFMON (the capabilities the DaemonSet adds). The
/// agent under podman's own default runs netlink-only ("failed to create map").
fn runtime_default_seccomp() -> Value {
    const GATED: [(&str, &str); 2] = [("bpf", "CAP_BPF"), ("perf_event_open", "CAP_PERFMON")];
    let mut p: Value = serde_json::from_str(
        &std::fs::read_to_string("/usr/share/containers/seccomp.json").unwrap(),
    )
    .unwrap();
    let rules = p["syscalls"].as_array_mut().unwrap();
    for r in rules.iter_mut() {
        if let Some(names) = r["names"].as_array_mut() {
            names.retain(|n| !GATED.iter().any(|(s, _)| n == s));
        }
    }
    rules.retain(|r| r["names"].as_array().is_none_or(|n| !n.is_empty()));
    for (syscall, cap) in GATED {
        for c in ["CAP_SYS_ADMIN", cap] {
            rules.push(
                json!({"names": [syscall], "action": "SCMP_ACT_ALLOW", "includes": {"caps": [c]}}),
            );
        }
    }
    p
}

/// Capability masks of a process (CapEff, CapBnd) and its NoNewPrivs.
fn proc_status(pid: u32) -> (u64, u64, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |f: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(f))
            .unwrap()
            .trim()
            .to_owned()
    };
    let mask = |f: &str| u64::from_str_radix(&field(f), 16).unwrap();
    (mask("CapEff:"), mask("CapBnd:"), field("NoNewPrivs:"))
}

#[test]
fn the_image_runs_the_agent_to_ready_with_the_daemonsets_settings() {
    if !can_run_netns_tests(TEST) {
        return;
    }
    let Ok(image) = std::env::var("IPSHADOW_IMAGE") else {
        guard(
            TEST,
            Some(
                "no image: `cargo xtask test` builds it and sets IPSHADOW_IMAGE \
                 (or `cargo xtask image`, then IPSHADOW_IMAGE=localhost/ipshadow:<version>)",
            ),
        );
        return;
    };
    let started = Instant::now();
    // The DaemonSet as `helm install` applies it (the same as deploy/'s).
    let rendered = helm::render(&json!({})).unwrap();
    let ds = rendered
        .objects
        .iter()
        .find(|o| o["kind"] == "DaemonSet")
        .unwrap();
    let c = &ds["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(ds["spec"]["template"]["spec"]["hostNetwork"], true);

    let sim = SimNode::kube_ovn("img", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let dir = ipshadow_tests::TempDir::new("image");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    // FROM scratch has no CA bundle: the kube client then refuses to start
    // ("No CA certificates were loaded from the system"), even for an http://
    // server. In a pod the service account's ca.crt is the CA; here the
    // kubeconfig names one (any: the test API server speaks plain HTTP).
    ipshadow_tests::lab::self_signed(&dir, "ca", "ipshadow-test-ca");
    let text = std::fs::read_to_string(&kubeconfig).unwrap().replace(
        "    server: ",
        "    certificate-authority: /etc/ipshadow-test/ca.crt\n    server: ",
    );
    std::fs::write(&kubeconfig, text).unwrap();

    // The pod's host network is the node's namespace.
    let name = format!("ipshadow-test-{}", std::process::id());
    let mut run = podman();
    run.args(["run", "--rm", "--name", &name])
        .arg(format!("--network=ns:/var/run/netns/{}", sim.node.name))
        .args(security_flags(&c["securityContext"], &dir))
        .arg("--volume")
        .arg(format!("{}:/etc/ipshadow-test:ro", dir.display()))
        .args(["--env", "KUBECONFIG=/etc/ipshadow-test/kubeconfig"]);
    let env = kubelet_env(c);
    for (k, v) in &env {
        run.arg("--env").arg(format!("{k}={v}"));
    }
    run.arg(&image);
    run.args(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    );
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = run
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("podman: {e} (cargo xtask setup installs it)"));
    let container = Container {
        name,
        child: Some(child),
        log,
    };

    // Ready: what kubelet's readiness probe asks, where it asks.
    let probe = &c["readinessProbe"]["httpGet"];
    let readyz: std::net::SocketAddr =
        format!("{}:{}", probe["host"].as_str().unwrap(), probe["port"])
            .parse()
            .unwrap();
    let path = probe["path"].as_str().unwrap();
    let start = Instant::now();
    let mut answer = Err(String::new());
    let ready = poll(HANG, || {
        answer = {
            let _inside = sim.node.enter();
            http::get(readyz, path)
        };
        matches!(answer, Ok((200, _))).then_some(())
    });
    assert!(
        ready.is_some(),
        "{readyz}{path} not ready within {HANG:?}: {answer:?}\n{}",
        container.log_text()
    );
    let ready_after = start.elapsed();

    // The classifier is on the test namespace's lo, and the host traffic to
    // the shadowed pod is counted: /metrics on the node's address.
    assert_eq!(
        attached_programs(&sim.node, "lo", PROGRAM),
        1,
        "{}",
        container.log_text()
    );
    let metrics: std::net::SocketAddr = format!("{HOST_IP}:{}", c["ports"][0]["containerPort"])
        .parse()
        .unwrap();
    let mut body = Err(String::new());
    let counted = poll(HANG, || {
        body = {
            let _inside = sim.node.enter();
            let _ = std::net::TcpStream::connect_timeout(
                &format!("{ROUTER}:5432").parse().unwrap(),
                Duration::from_secs(1),
            );
            http::get(metrics, "/metrics")
        };
        let Ok((200, m)) = &body else { return None };
        (http::sample(m, "ipshadow_ebpf_attached", &[]) == Some(1.0)
            && m.contains("ipshadow_refused_connections_total{")
            && http::sample(m, "ipshadow_collision_info", &[("ip", ROUTER)]) == Some(1.0))
        .then_some(())
    });
    assert!(
        counted.is_some(),
        "no counted collision on {metrics}: {body:?}\n{}",
        container.log_text()
    );
    // The chart's default: an open scrape of the node's address names no pod.
    assert!(
        body.as_ref().is_ok_and(|(_, m)| !m.contains("postgres-0")),
        "the pod named in an unauthenticated scrape: {body:?}"
    );

    // What the container runs with: the manifest's capabilities at most, no
    // new privileges, uid 0, a read-only root.
    let pid: u32 = container.inspect("{{.State.Pid}}").parse().unwrap();
    let (eff, bnd, nnp) = proc_status(pid);
    assert_eq!(bnd, NET_ADMIN | PERFMON | BPF, "bounding set {bnd:#x}");
    assert_eq!(eff & !bnd, 0, "effective {eff:#x}");
    assert_eq!(nnp, "1");
    let uid = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Uid:")
                .map(|u| u.split_whitespace().next().unwrap().to_owned())
        })
        .unwrap();
    assert_eq!(uid, c["securityContext"]["runAsUser"].to_string());
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root = mountinfo
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("/"))
        .unwrap();
    assert!(
        root.split_whitespace()
            .nth(5)
            .unwrap()
            .split(',')
            .any(|o| o == "ro"),
        "root not read-only: {root}"
    );
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(exe, std::path::Path::new("/ipshadow"));

    // `helm test`: the hook pod's own command, as its user, in the node's
    // network (the pod runs with hostNetwork), against this agent.
    let hook = &rendered.hooks[0]["spec"];
    let tc = &hook["containers"][0];
    let cmd: Vec<&str> = tc["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let uid = hook["securityContext"]["runAsUser"].to_string();
    let helm_test = sim
        .node
        .command("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "--",
        ])
        .args(&cmd)
        .env("NODE_NAME", ME)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&helm_test.stdout);
    assert!(
        helm_test.status.success() && said.contains(&format!("agent on {ME} ready")),
        "helm test's command failed: {helm_test:?}"
    );

    // Stopped as kubelet stops it: the agent exits cleanly and its
    // classifier leaves lo with it.
    let log = container.log_text();
    let status = container.stop();
    assert!(status.success(), "{status:?}\n{log}");
    assert_eq!(attached_programs(&sim.node, "lo", PROGRAM), 0);
    assert!(!log.contains("\"level\":\"ERROR\""), "{log}");
    figure(format!(
        "image {image}: ready in {:.1} s with CapBnd {bnd:#x}, CapEff {eff:#x}, read-only root; helm test passed; whole test {:.1} s",
        ready_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    ));
}
