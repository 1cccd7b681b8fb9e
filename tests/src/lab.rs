//! A small cluster for agent tests: the cozystack addresses, a kubeconfig
//! pointing at the test API server, and waits on Events.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    netns::NetNs,
    objects::{cilium_node, node, with_pod_cidrs},
};

/// The node the agent under test runs as.
pub const ME: &str = "node-a";
/// The classifier's name on `lo`.
pub const PROGRAM: &str = "ipshadow_lo";
pub const OTHER: &str = "node-b";
pub const ROUTER: &str = "10.244.4.251";
pub const INGRESS: &str = "10.244.4.12";
pub const OTHER_ROUTER: &str = "10.244.1.182";
pub const OTHER_INGRESS: &str = "10.244.1.12";

pub struct Lab {
    pub dir: crate::TempDir,
    pub kubeconfig: PathBuf,
}

impl Lab {
    pub fn new(tag: &str, api: &ApiServer) -> Self {
        let dir = crate::TempDir::new(&format!("kube-{tag}"));
        let kubeconfig = dir.join("kubeconfig");
        api.write_kubeconfig(&kubeconfig);
        Self { dir, kubeconfig }
    }

    pub fn agent(&self, ns: &NetNs, node: &str) -> AgentProc {
        self.agent_with(ns, node, &[])
    }

    /// The agent with extra flags.
    pub fn agent_with(&self, ns: &NetNs, node: &str, args: &[&str]) -> AgentProc {
        let mut all = vec!["--node", node];
        all.extend_from_slice(args);
        AgentProc::spawn_env(
            ns,
            &all,
            &[("KUBECONFIG", self.kubeconfig.to_str().unwrap())],
        )
    }
}

/// The cozystack cluster as the API server holds it.
pub fn cozystack(api: &ApiServer) {
    api.apply(Res::Nodes, node(ME, &["10.244.4.0/24"]));
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), None),
            &["10.244.4.0/24"],
        ),
    );
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node(OTHER, OTHER_ROUTER, Some(OTHER_INGRESS), None),
            &["10.244.1.0/24"],
        ),
    );
}

/// Polls `f` every 50 ms until it gives a value; `None` once `timeout` (a
/// bound for a hang, not a timing) has passed without one.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() >= timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Like [`poll`], failing the test with `what` on a hang.
pub fn wait_for<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    poll(timeout, f).unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

pub fn event(api: &ApiServer, ns: &str, name: &str, reason: &str) -> Option<Value> {
    api.core_events_for(ns, name)
        .into_iter()
        .find(|e| e["reason"] == reason)
}

/// Event objects of one series: (regarding name, reason).
pub fn series_objects(api: &ApiServer, name: &str, reason: &str) -> Vec<Value> {
    api.event_objects()
        .into_iter()
        .filter(|e| e["regarding"]["name"] == name && e["reason"] == reason)
        .collect()
}

/// Asserts one Event object for each (pod name, reason) series: repeats,
/// restarts and faults continued a series rather than starting another.
pub fn assert_one_event_each(api: &ApiServer, series: &[(&str, &str)]) {
    for (name, reason) in series {
        let n = series_objects(api, name, reason).len();
        assert_eq!(n, 1, "{n} Event objects for {name}/{reason}");
    }
}

/// A self-signed certificate for `name` and its key, as `(cert, key)` in `dir`.
pub fn self_signed(
    dir: &std::path::Path,
    tag: &str,
    name: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (
        dir.join(format!("{tag}.crt")),
        dir.join(format!("{tag}.key")),
    );
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", &format!("/CN={name}")])
        .args(["-addext", &format!("subjectAltName=DNS:{name}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}
