//! `ipshadow check` on nodes laid out by the real `ptp` CNI plugin (one veth
//! and one /32 per pod, the pod's address inside its own namespace), each
//! scenario made the way it happens on a node: a route replaced onto another
//! veth, an address changed inside a namespace, a DEL that never ran.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::process::Output;

use ipshadow_tests::{
    can_run_netns_tests,
    check::{Files, find},
    cni, guard, ipshadow_bin, kernel_at_least,
    lab::ME,
    netns::NetNs,
    objects::{list, pod},
};
use serde_json::Value;

/// A node with `n` pods laid out by `ptp` over 10.250.1.0/24.
struct PtpNode {
    node: NetNs,
    pods: Vec<NetNs>,
    net: cni::Network,
    /// Each pod's (address, host veth), in order.
    laid: Vec<(String, String)>,
}

impl PtpNode {
    /// `None` (and the test recorded as skipped) where the test cannot run.
    fn new(test: &str, tag: &str, n: usize) -> Option<Self> {
        if !can_run_netns_tests(test) || !kernel_at_least(4, 20, test, "IFA_TARGET_NETNSID dumps") {
            return None;
        }
        if let Some(why) = cni::missing() {
            guard(test, Some(&why));
            return None;
        }
        let node = NetNs::new(&format!("{tag}n"));
        let pods: Vec<NetNs> = (0..n).map(|_| NetNs::new(&format!("{tag}p"))).collect();
        let net = cni::Network::ptp(&node, tag, "10.250.1.0/24");
        let laid = pods
            .iter()
            .enumerate()
            .map(|(i, p)| net.add(&format!("{tag}-c{i}"), p))
            .collect();
        Some(Self {
            node,
            pods,
            net,
            laid,
        })
    }

    fn ip(&self, i: usize) -> &str {
        &self.laid[i].0
    }

    fn veth(&self, i: usize) -> &str {
        &self.laid[i].1
    }

    /// `check` with the API's pods: `names[i]` at pod `i`'s address, Running on this node.
    fn check(&self, names: &[&str], output: &str) -> Output {
        let files = Files::new("cni-ptp");
        let pods: Vec<Value> = names
            .iter()
            .enumerate()
            .map(|(i, n)| pod("tenant", n, ME, &[self.ip(i)]))
            .collect();
        let path = files.write("pods.json", &list(pods));
        self.node
            .command(ipshadow_bin().to_str().unwrap())
            .args(["check", "--node", ME, "--output", output, "--pods"])
            .arg(path)
            .output()
            .unwrap()
    }

    fn json(&self, names: &[&str]) -> (Option<i32>, Value) {
        let out = self.check(names, "json");
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), v)
    }
}

impl Drop for PtpNode {
    fn drop(&mut self) {
        // As the runtime tears sandboxes down; a pod already torn down is fine.
        for (i, p) in self.pods.iter().enumerate() {
            let _ = self.net.call(
                "DEL",
                &format!("{}-c{i}", self.net.conf["name"].as_str().unwrap()),
                p,
            );
        }
    }
}

fn kinds(v: &Value) -> Vec<&str> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect()
}

#[test]
fn a_healthy_ptp_node_has_no_findings_and_a_full_truth_table() {
    let Some(n) = PtpNode::new(
        "a_healthy_ptp_node_has_no_findings_and_a_full_truth_table",
        "ph",
        3,
    ) else {
        return;
    };
    let (code, v) = n.json(&["a", "b", "c"]);
    assert_eq!((code, kinds(&v)), (Some(0), vec![]), "{v:#}");
    let t = &v["truth_table"];
    assert_eq!(
        (t["namespaces"].as_u64(), t["interfaces"].as_u64()),
        (Some(3), Some(3))
    );
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{t:#}");
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let row = rows.iter().find(|r| r["ip"] == n.ip(i)).unwrap();
        assert_eq!(row["holders"][0]["iface"], n.veth(i));
        assert_eq!(row["holders"][0]["peer"], "eth0");
        assert_eq!(row["route"]["iface"], n.veth(i));
        assert_eq!(row["pods"][0]["pod"], format!("tenant/{name}"));
    }
    let table = String::from_utf8(n.check(&["a", "b", "c"], "table").stdout).unwrap();
    assert!(
        table.contains("kernel truth: 3 pod namespace(s) behind 3 host interface(s)"),
        "{table}"
    );
    let nsid = &rows.iter().find(|r| r["ip"] == n.ip(0)).unwrap()["holders"][0]["nsid"];
    assert!(
        table.contains(&format!("{} {nsid} eth0", n.veth(0))),
        "{table}"
    );
}

#[test]
fn a_route_replaced_onto_another_veth_sends_the_pod_to_another_pod() {
    let Some(n) = PtpNode::new(
        "a_route_replaced_onto_another_veth_sends_the_pod_to_another_pod",
        "pr",
        2,
    ) else {
        return;
    };
    let dst = format!("{}/32", n.ip(0));
    n.node.ip(&["route", "replace", &dst, "dev", n.veth(1)]);
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["PodRouteMisdirected"]),
        "{v:#}"
    );
    let fs = v["findings"].as_array().unwrap().clone();
    let f = find(&fs, n.ip(0));
    assert_eq!(f["pod"]["name"], "a");
    assert_eq!(f["owner"]["device"], n.veth(1));
    assert_eq!(f["owner"]["role"], "pod");
    assert_eq!(f["holder"]["name"], "b", "the pod the traffic reaches");
    assert_eq!(
        f["kernel"]["holders"][0]["iface"],
        n.veth(0),
        "who really holds it"
    );
    assert_eq!(f["trust"], "kernel");
    let m = f["message"].as_str().unwrap();
    assert!(m.contains(n.veth(1)) && m.contains("tenant/b"), "{m}");
}

#[test]
fn an_address_changed_inside_a_namespace_leaves_the_pod_unreached() {
    let Some(n) = PtpNode::new(
        "an_address_changed_inside_a_namespace_leaves_the_pod_unreached",
        "pa",
        2,
    ) else {
        return;
    };
    n.pods[1].ip(&["addr", "del", &format!("{}/24", n.ip(1)), "dev", "eth0"]);
    n.pods[1].ip(&["addr", "add", "10.250.1.200/24", "dev", "eth0"]);
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["PodRouteMisdirected"]),
        "{v:#}"
    );
    let fs = v["findings"].as_array().unwrap().clone();
    let f = find(&fs, n.ip(1));
    assert_eq!(f["pod"]["name"], "b");
    assert_eq!(f["owner"]["device"], n.veth(1));
    assert!(f["kernel"]["holders"].as_array().unwrap().is_empty());
}

#[test]
fn a_del_that_never_ran_leaves_a_leaked_sandbox_on_the_node() {
    let Some(n) = PtpNode::new(
        "a_del_that_never_ran_leaves_a_leaked_sandbox_on_the_node",
        "pl",
        3,
    ) else {
        return;
    };
    // Pod c is gone from the API; its sandbox was never torn down (no DEL).
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["LeakedSandboxAddress"]),
        "{v:#}"
    );
    let fs = v["findings"].as_array().unwrap().clone();
    let f = find(&fs, n.ip(2));
    assert!(f["pod"].is_null());
    assert_eq!(f["owner"]["device"], n.veth(2));
    assert_eq!(f["kernel"]["reached"]["peer"], "eth0");
    // The runtime's DEL clears it.
    n.net.del("pl-c2", &n.pods[2]);
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!((code, kinds(&v)), (Some(0), vec![]), "{v:#}");
}
