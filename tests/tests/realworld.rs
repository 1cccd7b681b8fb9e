//! Real objects from public sources (`tests/corpus/realworld`, copied from
//! shared/realworld with its PROVENANCE.md): every one is read, only the two
//! published malformed Subnets warn, and a pod on any address a real
//! CiliumNode (or Node annotation) publishes is found once, with its source.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use ipshadow::{
    detect::{FindingKind, detect},
    inventory::{CiliumNode, HostNetwork, Invalid, Inventory, Subnet},
    kube::files,
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

#[test]
fn every_real_object_is_read_and_only_the_two_malformed_subnets_warn() {
    let mut problems: Vec<Invalid> = Vec::new();
    let mut read_objects = 0;
    let mut names: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    let keys = vec!["ovn.kubernetes.io/ip_address".to_owned()];
    for path in &names {
        let name = path.file_name().unwrap().to_str().unwrap();
        read_objects += if name.starts_with("ciliumnode-") {
            files::cilium_nodes(path, &mut problems).unwrap().len()
        } else if name.starts_with("subnet-") {
            files::subnets(path, &mut problems).unwrap().len()
        } else if name.starts_with("pod-") {
            files::pods(path, &keys, &mut problems).unwrap().len()
        } else {
            assert_eq!(
                name, "event-messages-sandbox-failures.json",
                "a file nobody reads"
            );
            0
        };
    }
    let got: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with("subnets subnet-secondary: spec.cidrBlock is missing"),
        "{got:#?}"
    );
    assert!(
        got[1]
            .starts_with("subnets service-subnet-dual: spec.cidrBlock is missing or not a string"),
        "{got:#?}"
    );
    // 19 CiliumNodes + 14 usable Subnets + 18 Pods.
    assert_eq!(read_objects, 19 + 14 + 18);
}

#[test]
fn secondary_network_subnets_are_read_as_such() {
    let mut problems = Vec::new();
    for (name, primary) in [
        ("subnet-kubeovn-docs-ovn-default-kubectl-get.json", true),
        ("subnet-kubeovn-docs-kubevirt-dhcp-dual-240e.json", true),
        ("subnet-kubeovn-docs-macvlan-provider.json", false),
        ("subnet-kubeovn-docs-attachnet-ovn-provider.json", false),
        ("subnet-kubeovn-e2e-nonprimary-vpc-simple.json", false),
    ] {
        let s = files::subnets(&file(name), &mut problems).unwrap();
        assert_eq!(s[0].primary, primary, "{name}");
    }
    assert!(problems.is_empty(), "{problems:?}");
}

/// Detection from `node`'s point of view with these CiliumNodes and Subnets and no pods.
fn overlaps(
    node: &str,
    cns: Vec<CiliumNode>,
    subnets: Vec<Subnet>,
) -> Vec<ipshadow::detect::Finding> {
    let inv = Inventory {
        node: node.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(HostNetwork::default()),
        cilium_nodes: Arc::new(cns),
        subnets: Arc::new(subnets),
        ..Inventory::default()
    };
    detect(&inv)
        .into_iter()
        .filter(|f| f.kind == FindingKind::AllocatorOverlap)
        .collect()
}

#[test]
fn a_multi_pool_cidr_inside_a_primary_subnet_is_an_overlap_and_a_secondary_one_is_not() {
    let mut problems = Vec::new();
    let cns = files::cilium_nodes(
        &file("ciliumnode-cilium-operator-multipool-after-migration.json"),
        &mut problems,
    )
    .unwrap();
    assert_eq!(cns[0].pool_cidrs.len(), 2, "{cns:?}");
    let subnet = |provider: Option<&str>, exclude: &[&str]| {
        let mut spec = json!({"cidrBlock": "10.244.0.0/16,fd00::/120", "excludeIps": exclude});
        if let Some(p) = provider {
            spec["provider"] = Value::from(p);
        }
        let mut problems = Vec::new();
        let s = ipshadow::kube::objects::subnet(
            &json!({"metadata": {"name": "pods"}, "spec": spec}),
            &mut problems,
        )
        .unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        s
    };
    let found = overlaps("node-a", cns.clone(), vec![subnet(None, &[])]);
    assert!(
        found.iter().any(|f| f.ip_text().starts_with("10.244.1.")),
        "{found:#?}"
    );
    assert!(
        overlaps(
            "node-a",
            cns.clone(),
            vec![subnet(Some("macvlan.default"), &[])]
        )
        .is_empty()
    );
    assert!(
        overlaps(
            "node-a",
            cns.clone(),
            vec![subnet(Some("attach.default.ovn"), &[])]
        )
        .is_empty()
    );
    // The fixed layout: every pool CIDR excluded.
    let fixed = subnet(None, &["10.244.1.0..10.244.2.255", "fd00::..fd00::1f"]);
    assert!(overlaps("node-a", cns, vec![fixed]).is_empty());
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn crd_style_pod_cidrs_claim_no_overlap() {
    // ENI: podCIDRs 100.96.2.0/24 is filled but meaningless (cilium/cilium#9409).
    let mut problems = Vec::new();
    let cns = files::cilium_nodes(
        &file("ciliumnode-ddiiwoong-blog-kops-eni-partial.json"),
        &mut problems,
    )
    .unwrap();
    assert!(cns[0].pod_cidrs.is_empty(), "{:?}", cns[0]);
    let s = ipshadow::kube::objects::subnet(
        &json!({"metadata": {"name": "pods"}, "spec": {"cidrBlock": "100.96.0.0/16"}}),
        &mut problems,
    )
    .unwrap();
    assert!(overlaps(&cns[0].name, cns.clone(), vec![s]).is_empty());
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
