//! `ipshadow audit` of a Calico cluster (no Cilium, no kube-ovn): the
//! IPAMBlocks and IPPools listed from the test API server, or read from
//! `--ipamblocks`/`--ippools` files, give the same findings — a pod on a
//! block's tunnel allocation on both sides, a Node announcing a tunnel
//! address its block left unallocated — with Calico's fix and no other CNI's.
//! Blocks in the shape of the real ones in tests/corpus/realworld/calico.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{
    collections::BTreeSet,
    process::{Command, Output},
};

use ipshadow_tests::{
    apiserver::{ApiServer, Res},
    ipshadow_bin,
    objects::{node, pod, write_list},
};
use serde_json::{Value, json};

const A: &str = "worker-a";
const B: &str = "worker-b";

/// A block of `node` with `allocations` as `[ordinal, attribute]` pairs over 64 ordinals.
fn block(cidr: &str, node: &str, allocated: &[(usize, Value)]) -> Value {
    let mut allocations = vec![Value::Null; 64];
    let mut attributes = Vec::new();
    for (i, (ordinal, attribute)) in allocated.iter().enumerate() {
        allocations[*ordinal] = json!(i);
        attributes.push(attribute.clone());
    }
    json!({
        "apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMBlock",
        "metadata": {"name": cidr.replace(['.', '/'], "-"),
                     "annotations": {"projectcalico.org/metadata": "{\"creationTimestamp\":null}"}},
        "spec": {"cidr": cidr, "affinity": format!("host:{node}"), "allocations": allocations,
                 "attributes": attributes, "deleted": false, "strictAffinity": false,
                 "sequenceNumber": 1_690_113_884_806_720_496_u64, "unallocated": []}
    })
}

fn tunnel(node: &str) -> Value {
    json!({"handle_id": format!("ipip-tunnel-addr-{node}"),
           "secondary": {"node": node, "type": "ipipTunnelAddress"}})
}

fn pod_attr(namespace: &str, name: &str, node: &str) -> Value {
    json!({"handle_id": "k8s-pod-network.ecddecbd8bb0be0bbadc17c37b4ea684badc89bf88daae1920ffbbbd3363ec21",
           "secondary": {"namespace": namespace, "pod": name, "node": node,
                         "timestamp": "2022-07-26 17:15:08.73997821 +0000 UTC"}})
}

fn calico_node(name: &str, tunnel_addr: &str) -> Value {
    let mut n = node(name, &[]);
    n["metadata"]["annotations"] = json!({
        "projectcalico.org/IPv4IPIPTunnelAddr": tunnel_addr,
        "projectcalico.org/IPv4Address": "192.168.1.10/24",
    });
    n
}

struct Cluster {
    nodes: Vec<Value>,
    pods: Vec<Value>,
    blocks: Vec<Value>,
    pools: Vec<Value>,
}

/// worker-a's `tunl0` holds 100.66.141.153 (calico#3589: the 26th address of
/// its block) and a pod on each node holds it too; worker-b announces
/// 100.66.142.1, which its block leaves unallocated.
fn cluster() -> Cluster {
    Cluster {
        nodes: vec![
            calico_node(A, "100.66.141.153"),
            calico_node(B, "100.66.142.1"),
        ],
        pods: vec![
            pod("tenant", "crashing-0", A, &["100.66.141.153"]),
            pod("tenant", "web-0", A, &["100.66.141.130"]),
            pod("tenant", "remote-0", B, &["100.66.141.153"]),
            pod("tenant", "api-0", B, &["100.66.142.2"]),
        ],
        blocks: vec![
            block(
                "100.66.141.128/26",
                A,
                &[(2, pod_attr("tenant", "web-0", A)), (25, tunnel(A))],
            ),
            block("100.66.142.0/26", B, &[(2, pod_attr("tenant", "api-0", B))]),
        ],
        pools: vec![json!({
            "apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
            "metadata": {"name": "default-ipv4-ippool"},
            "spec": {"cidr": "100.66.0.0/16", "blockSize": 26, "ipipMode": "Always",
                     "natOutgoing": true, "nodeSelector": "all()"}
        })],
    }
}

fn audit(args: &[&str]) -> Output {
    Command::new(ipshadow_bin())
        .arg("audit")
        .args(args)
        .output()
        .unwrap()
}

/// (node, kind, scope, ip, pod, owner node, owner source) of every finding.
fn rows(v: &Value) -> BTreeSet<[String; 7]> {
    let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut out = BTreeSet::new();
    for n in v["nodes"].as_array().unwrap() {
        for f in n["findings"].as_array().unwrap() {
            out.insert([
                s(&n["node"]),
                s(&f["kind"]),
                s(&f["scope"]),
                s(&f["ip"]),
                s(&f["pod"]["name"]),
                s(&f["owner"]["node"]),
                s(&f["owner"]["source"]),
            ]);
        }
    }
    out
}

fn want() -> BTreeSet<[String; 7]> {
    let r = |x: [&str; 7]| x.map(str::to_owned);
    [
        // The annotation and the block agree: the annotation is the better source.
        r([
            A,
            "TunnelIPCollision",
            "same-node",
            "100.66.141.153",
            "crashing-0",
            A,
            "node.annotations.calico",
        ]),
        r([
            B,
            "TunnelIPCollision",
            "cross-node",
            "100.66.141.153",
            "remote-0",
            A,
            "node.annotations.calico",
        ]),
        r([
            B,
            "UnallocatedTunnelAddress",
            "same-node",
            "100.66.142.1",
            "-",
            B,
            "node.annotations.calico",
        ]),
        // Two pods on one address as well: the audit's own cross-check.
        r([
            B,
            "DuplicatePodIP",
            "cross-node",
            "100.66.141.153",
            "remote-0",
            A,
            "pod.status.podIPs",
        ]),
    ]
    .into_iter()
    .collect()
}

/// Every finding's message: Calico's fix, no other CNI's words.
fn assert_calicos_words(v: &Value) {
    for n in v["nodes"].as_array().unwrap() {
        for f in n["findings"].as_array().unwrap() {
            let m = f["message"].as_str().unwrap();
            for foreign in ["Cilium", "cilium", "kube-ovn", "Subnet"] {
                assert!(!m.contains(foreign), "{foreign:?} in {m}");
            }
            if f["kind"] != "DuplicatePodIP" {
                assert!(m.contains("calicoctl ipam check"), "{m}");
            }
            if f["kind"] == "UnallocatedTunnelAddress" {
                assert!(
                    m.contains("unallocated in IPAM block 100-66-142-0-26"),
                    "{m}"
                );
                assert!(m.contains("restart calico-node on worker-b"), "{m}");
            }
        }
    }
}

#[test]
fn an_audit_reads_calicos_ipam_from_the_api_server_and_from_files_alike() {
    let c = cluster();
    let api = ApiServer::start(None);
    api.set_crd(Res::CiliumNodes, false);
    api.set_crd(Res::IpamBlocks, true);
    api.apply_all(&[
        (Res::Nodes, &c.nodes[..]),
        (Res::Pods, &c.pods[..]),
        (Res::IpamBlocks, &c.blocks[..]),
        (Res::IpPools, &c.pools[..]),
    ]);
    let dir = ipshadow_tests::TempDir::new("audit-calico");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let out = audit(&["--kubeconfig", kubeconfig.to_str().unwrap(), "-o", "json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_api = ipshadow_tests::json_stdout(&out);
    assert_eq!(rows(&from_api), want());
    assert_calicos_words(&from_api);
    let log = api.counts().log;
    for plural in ["ipamblocks", "ippools"] {
        assert!(
            log.iter().any(|(m, u)| m == "GET"
                && u.starts_with(&format!("/apis/crd.projectcalico.org/v1/{plural}?"))),
            "{log:#?}"
        );
    }
    assert!(log.iter().all(|(_, u)| !u.contains("watch=")), "{log:#?}");

    let mut args = Vec::new();
    for (flag, items) in [
        ("--pods", &c.pods),
        ("--nodes", &c.nodes),
        ("--ipamblocks", &c.blocks),
        ("--ippools", &c.pools),
    ] {
        let path = dir.join(format!("{}.json", flag.trim_start_matches('-')));
        write_list(&path, items);
        args.extend([flag.to_owned(), path.to_str().unwrap().to_owned()]);
    }
    args.extend(["-o".to_owned(), "json".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let from_files = ipshadow_tests::json_stdout(&audit(&args));
    assert_eq!(rows(&from_files), want());
}

#[test]
fn without_annotations_the_block_alone_names_the_tunnel_and_without_the_crd_nothing_is_said() {
    let c = cluster();
    let dir = ipshadow_tests::TempDir::new("audit-calico-blocks");
    let bare: Vec<Value> = [A, B].iter().map(|n| node(n, &[])).collect();
    let mut args = Vec::new();
    for (flag, items) in [
        ("--pods", &c.pods),
        ("--nodes", &bare),
        ("--ipamblocks", &c.blocks),
    ] {
        let path = dir.join(format!("{}.json", flag.trim_start_matches('-')));
        write_list(&path, items);
        args.extend([flag.to_owned(), path.to_str().unwrap().to_owned()]);
    }
    args.extend(["-o".to_owned(), "json".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let got = rows(&ipshadow_tests::json_stdout(&audit(&args)));
    let tunnel: BTreeSet<_> = got
        .iter()
        .filter(|r| r[1] == "TunnelIPCollision")
        .map(|r| (r[0].as_str(), r[2].as_str(), r[4].as_str(), r[6].as_str()))
        .collect();
    assert_eq!(
        tunnel,
        [
            (A, "same-node", "crashing-0", "ipamblock.calico"),
            (B, "cross-node", "remote-0", "ipamblock.calico"),
        ]
        .into_iter()
        .collect()
    );
    assert!(
        got.iter().all(|r| r[1] != "UnallocatedTunnelAddress"),
        "{got:?}"
    );

    // No Calico CRD on the API server: the lists 404 and the audit goes on.
    let api = ApiServer::start(None);
    for o in &c.pods {
        api.apply(Res::Pods, o.clone());
    }
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let out = audit(&["--kubeconfig", kubeconfig.to_str().unwrap(), "-o", "json"]);
    let kinds: BTreeSet<String> = rows(&ipshadow_tests::json_stdout(&out))
        .into_iter()
        .map(|r| r[1].clone())
        .collect();
    assert_eq!(
        kinds,
        ["DuplicatePodIP".to_owned()].into_iter().collect(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // It asked (and was told 404), and still reports the rest: exit 1.
    let log = api.counts().log;
    assert!(
        log.iter()
            .any(|(m, u)| m == "GET" && u.starts_with("/apis/crd.projectcalico.org/v1/ipamblocks")),
        "{log:?}"
    );
    assert_eq!(out.status.code(), Some(1));
}
