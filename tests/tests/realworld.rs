//! Real objects from public sources (`tests/corpus/realworld`, copied from
//! shared/realworld with its PROVENANCE.md): a pod on any address a real
//! CiliumNode (or Node annotation) publishes is found once by the binary, with
//! its source. Reading the corpus needs no root: agent/tests/realworld.rs.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
};

use ipshadow_tests::{
    can_run_netns_tests, ipshadow_bin,
    netns::NetNs,
    objects::{list, pod},
};
use serde_json::{Value, json};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/realworld")
}

fn file(name: &str) -> PathBuf {
    corpus().join(name)
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// What a CiliumNode publishes of Cilium's own addresses, read here without the
/// agent's code: (ip, role, source) — the expectation the agent must meet.
fn published(cn: &Value) -> Vec<(IpAddr, &'static str, &'static str)> {
    let mut out: Vec<(IpAddr, &'static str, &'static str)> = Vec::new();
    let mut push = |ip: &str, role, source| {
        let ip: IpAddr = ip.parse().unwrap();
        if !out.iter().any(|(i, r, _)| *i == ip && *r == role) {
            out.push((ip, role, source));
        }
    };
    for a in cn["spec"]["addresses"].as_array().into_iter().flatten() {
        if a["type"] == "CiliumInternalIP" {
            push(
                a["ip"].as_str().unwrap(),
                "router",
                "ciliumnode.spec.addresses",
            );
        }
    }
    for (section, role) in [("ingress", "ingress"), ("health", "health")] {
        for family in ["ipv4", "ipv6"] {
            if let Some(ip) = cn["spec"][section][family].as_str() {
                push(
                    ip,
                    role,
                    if role == "ingress" {
                        "ciliumnode.spec.ingress"
                    } else {
                        "ciliumnode.spec.health"
                    },
                );
            }
        }
    }
    for (ip, used) in cn["status"]["ipam"]["used"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if let Some(role @ ("router" | "health" | "ingress")) = used["owner"].as_str() {
            let role = match role {
                "router" => "router",
                "health" => "health",
                _ => "ingress",
            };
            push(ip, role, "ciliumnode.status.ipam.used");
        }
    }
    out
}

fn kind_of(role: &str) -> &'static str {
    match role {
        "router" => "RouterIPCollision",
        "health" => "HealthIPCollision",
        _ => "IngressIPCollision",
    }
}

/// `check` in a fresh namespace as `--node node`, with `args`.
fn check(ns: &NetNs, node: &str, args: &[&str]) -> Vec<Value> {
    let out = ns
        .command(ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", node, "--output", "json", "--ebpf", "off"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.code() == Some(1) || out.status.code() == Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["findings"].as_array().unwrap().clone()
}

const REAL: [&str; 3] = [
    "ciliumnode-cilium-docs-crd-mode-status-used.json",
    "ciliumnode-ddiiwoong-blog-kops-eni-partial.json",
    "ciliumnode-cilium-controlplane-dualstack-kind-v1.27.json",
];

#[test]
fn a_pod_elsewhere_on_any_address_a_real_ciliumnode_publishes_is_found_once_with_its_source() {
    if !can_run_netns_tests(
        "a_pod_elsewhere_on_any_address_a_real_ciliumnode_publishes_is_found_once_with_its_source",
    ) {
        return;
    }
    let ns = NetNs::new("rwcn");
    let dir = ipshadow_tests::TempDir::new("realworld");
    let mut checked = 0;
    for name in REAL {
        let cns = read(&file(name));
        for cn in cns["items"].as_array().unwrap() {
            let owner = cn["metadata"]["name"].as_str().unwrap();
            let expected = published(cn);
            assert!(!expected.is_empty(), "{name} {owner} publishes nothing");
            let pods: Vec<Value> = expected
                .iter()
                .enumerate()
                .map(|(i, (ip, _, _))| {
                    pod(
                        "t",
                        &format!("p{i}"),
                        "elsewhere",
                        &[ip.to_string().as_str()],
                    )
                })
                .collect();
            let pods_file = dir.join("pods.json");
            std::fs::write(&pods_file, serde_json::to_vec(&list(pods)).unwrap()).unwrap();
            // From the owner's side (it learns who holds its address) and the pod's.
            for node in [owner, "elsewhere"] {
                let found = check(
                    &ns,
                    node,
                    &[
                        "--pods",
                        pods_file.to_str().unwrap(),
                        "--ciliumnodes",
                        file(name).to_str().unwrap(),
                    ],
                );
                for (i, (ip, role, source)) in expected.iter().enumerate() {
                    let mine: Vec<&Value> = found
                        .iter()
                        .filter(|f| f["pod"]["name"] == format!("p{i}"))
                        .collect();
                    assert_eq!(mine.len(), 1, "{name} {owner} {ip} from {node}: {found:#?}");
                    let f = mine[0];
                    assert_eq!(f["kind"], kind_of(role), "{f:#}");
                    assert_eq!(f["scope"], "cross-node", "{f:#}");
                    assert_eq!(f["owner"]["node"], owner, "{f:#}");
                    assert_eq!(f["owner"]["source"], *source, "{f:#}");
                    checked += 1;
                }
            }
        }
    }
    ipshadow_tests::figure(format!(
        "real CiliumNodes: {checked} (address, point of view) pairs found once with their source"
    ));
}

#[test]
fn node_annotations_alone_new_and_legacy_names_find_the_same_pods() {
    if !can_run_netns_tests("node_annotations_alone_new_and_legacy_names_find_the_same_pods") {
        return;
    }
    let ns = NetNs::new("rwann");
    let dir = ipshadow_tests::TempDir::new("realworld-ann");
    // The dual-stack kind nodes' addresses, as Cilium's --annotate-k8s-node writes them.
    let cns = read(&file(
        "ciliumnode-cilium-controlplane-dualstack-kind-v1.27.json",
    ));
    for (prefix, source) in [
        ("network.cilium.io/", "node.annotations"),
        ("io.cilium.network.", "node.annotations.legacy"),
    ] {
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        let mut expected = Vec::new();
        for cn in cns["items"].as_array().unwrap() {
            let name = cn["metadata"]["name"].as_str().unwrap();
            let mut annotations = serde_json::Map::new();
            for (ip, role, _) in published(cn) {
                let family = if ip.is_ipv4() { "ipv4" } else { "ipv6" };
                let suffix = match role {
                    "router" => "cilium-host",
                    "health" => "health-ip",
                    _ => "Ingress-ip",
                };
                annotations.insert(
                    format!("{prefix}{family}-{suffix}"),
                    Value::from(ip.to_string()),
                );
                let i = pods.len();
                pods.push(pod(
                    "t",
                    &format!("p{i}"),
                    "elsewhere",
                    &[ip.to_string().as_str()],
                ));
                expected.push((format!("p{i}"), name.to_owned(), kind_of(role)));
            }
            nodes.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}));
        }
        let pods_file = dir.join("pods.json");
        let nodes_file = dir.join("nodes.json");
        std::fs::write(&pods_file, serde_json::to_vec(&list(pods)).unwrap()).unwrap();
        std::fs::write(&nodes_file, serde_json::to_vec(&list(nodes)).unwrap()).unwrap();
        let found = check(
            &ns,
            "elsewhere",
            &[
                "--pods",
                pods_file.to_str().unwrap(),
                "--nodes",
                nodes_file.to_str().unwrap(),
            ],
        );
        assert_eq!(found.len(), expected.len(), "{prefix}: {found:#?}");
        for (pod, owner, kind) in &expected {
            let f = found
                .iter()
                .find(|f| f["pod"]["name"] == *pod.as_str())
                .unwrap();
            assert_eq!(
                (
                    f["kind"].as_str().unwrap(),
                    f["owner"]["node"].as_str().unwrap()
                ),
                (*kind, owner.as_str())
            );
            assert_eq!(f["owner"]["source"], source, "{f:#}");
            assert_eq!(f["scope"], "cross-node");
        }
    }
}
