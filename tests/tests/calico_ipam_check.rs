//! `ipshadow check --ipamblocks --ippools` on a node laid out as Calico in
//! VXLAN mode lays it (a real `vxlan` device named `vxlan.calico`, holding
//! calico#9086's node's tunnel address): against an IPAMBlock that gives that
//! address to a pod, the node's device is a stale tunnel address and the pod on
//! it a tunnel collision, both with Calico's fix only; against a block that
//! allocates it to the node's `vxlan-tunnel-addr-<node>` handle, nothing.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::path::Path;

use ipshadow_tests::{
    can_run_netns_tests, ipshadow_bin,
    netns::NetNs,
    objects::{pod, write_list},
};
use serde_json::{Value, json};

fn calico_9086() -> (String, String) {
    let v =
        ipshadow_tests::objects::realworld("calico/node-calicoctl-issue9086-vxlan-partial.json");
    (
        v["metadata"]["name"].as_str().unwrap().to_owned(),
        v["spec"]["ipv4VXLANTunnelAddr"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

/// The block holding `tunnel` at ordinal 0, allocated to `attribute`.
fn block(tunnel: &str, node: &str, attribute: &Value) -> Value {
    let mut allocations = vec![Value::Null; 64];
    allocations[0] = json!(0);
    json!({"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMBlock",
           "metadata": {"name": format!("{}-26", tunnel.replace('.', "-"))},
           "spec": {"cidr": format!("{tunnel}/26"), "affinity": format!("host:{node}"),
                    "allocations": allocations, "attributes": [attribute]}})
}

/// (kind, pod, device, source) of each finding, and the exit code.
fn check(ns: &NetNs, node: &str, dir: &Path, attribute: &Value) -> (Vec<[String; 4]>, i32) {
    let (_, tunnel) = calico_9086();
    let files = [
        ("pods", vec![pod("tenant", "victim", node, &[&tunnel])]),
        (
            "nodes",
            vec![
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node,
                "annotations": {"projectcalico.org/IPv4VXLANTunnelAddr": tunnel}}}),
            ],
        ),
        ("ipamblocks", vec![block(&tunnel, node, attribute)]),
        (
            "ippools",
            vec![
                json!({"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
                "metadata": {"name": "default-ipv4-ippool"},
                "spec": {"cidr": "10.100.0.0/16", "blockSize": 26, "vxlanMode": "Always"}}),
            ],
        ),
    ];
    let mut args = vec![];
    for (flag, items) in files {
        let path = dir.join(format!("{flag}.json"));
        write_list(&path, items);
        args.extend([format!("--{flag}"), path.to_str().unwrap().to_owned()]);
    }
    let out = ns
        .command(ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", node, "--output", "json", "--ebpf", "off"])
        .args(&args)
        .output()
        .unwrap();
    let v = ipshadow_tests::json_stdout(&out);
    let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut got: Vec<[String; 4]> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let m = f["message"].as_str().unwrap();
            assert!(m.contains("calicoctl ipam check"), "{m}");
            assert!(
                !m.to_lowercase().contains("cilium") && !m.contains("kube-ovn"),
                "{m}"
            );
            [
                s(&f["kind"]),
                s(&f["pod"]["name"]),
                s(&f["owner"]["device"]),
                s(&f["owner"]["source"]),
            ]
        })
        .collect();
    got.sort();
    (got, out.status.code().unwrap())
}

#[test]
fn a_tunnel_address_ipam_gave_a_pod_is_stale_on_the_node_and_a_collision_for_the_pod() {
    let name = "a_tunnel_address_ipam_gave_a_pod_is_stale_on_the_node_and_a_collision_for_the_pod";
    if !can_run_netns_tests(name) {
        return;
    }
    let (node, tunnel) = calico_9086();
    let ns = NetNs::new("calico-ipam");
    ns.add_calico_vxlan(&tunnel);
    let dir = ipshadow_tests::TempDir::new("calico-ipam-check");

    let to_pod = json!({"handle_id": "k8s-pod-network.4bcae222a79b7ef46f048e435d5ab62d",
        "secondary": {"namespace": "tenant", "pod": "victim", "node": node}});
    let (got, code) = check(&ns, &node, &dir, &to_pod);
    // The collision's owner as the cluster names it, with the kernel's device;
    // the stale address as the kernel holds it.
    let row = |k: &str, p: &str, source: &str| [k, p, "vxlan.calico", source].map(str::to_owned);
    let collision = || row("TunnelIPCollision", "victim", "node.annotations.calico");
    assert_eq!(
        got,
        [collision(), row("UnallocatedTunnelAddress", "-", "kernel"),]
    );
    assert_eq!(code, 1);

    // Allocated to this node's VXLAN handle: the tunnel is sound; the pod on it
    // is still a collision (Calico gave one address twice), nothing else.
    let to_tunnel = json!({"handle_id": format!("vxlan-tunnel-addr-{node}"),
        "secondary": {"node": node, "type": "vxlanTunnelAddress"}});
    let (got, _) = check(&ns, &node, &dir, &to_tunnel);
    assert_eq!(got, [collision()]);
}
