//! Calico's tunnel addresses, from real objects (tests/corpus/realworld/calico,
//! PROVENANCE.md): a pod on one is found from its own node (the kernel's
//! device) and from another (the Node annotations calico-node writes), with
//! Calico's fix and no other CNI's advice.
//!
//! The real objects are calicoctl's `projectcalico.org/v3` Nodes; in the
//! Kubernetes datastore calico-node keeps the same values in the Node's
//! `projectcalico.org/*` annotations, which is what the agent reads. The node is
//! laid out with a real `vxlan` device named `vxlan.calico`; this kernel has no
//! `ipip` device type, so a veth named `tunl0` stands in for IPIP's.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; an end-to-end scenario reads top to bottom"
)]

use std::path::Path;

use ipshadow_tests::{
    can_run_netns_tests, ipshadow_bin,
    netns::NetNs,
    objects::{list, pod},
};
use serde_json::{Map, Value, json};

fn real(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus/realworld/calico")
        .join(name);
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    // calicoctl prints one object, or a list of them.
    if v["items"].is_array() {
        v["items"][0].clone()
    } else {
        v
    }
}

/// A calicoctl Node's tunnel addresses as the annotations of its Kubernetes Node.
fn annotations(spec: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for (field, key) in [
        (&spec["bgp"]["ipv4IPIPTunnelAddr"], "IPv4IPIPTunnelAddr"),
        (&spec["ipv4VXLANTunnelAddr"], "IPv4VXLANTunnelAddr"),
        (
            &spec["wireguard"]["interfaceIPv4Address"],
            "IPv4WireguardInterfaceAddr",
        ),
    ] {
        if let Some(ip) = field.as_str() {
            out.insert(format!("projectcalico.org/{key}"), Value::from(ip));
        }
    }
    out
}

fn node(name: &str, annotations: &Map<String, Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}})
}

#[test]
fn a_pod_on_a_calico_tunnel_address_is_found_from_both_nodes_with_calicos_fix_only() {
    if !can_run_netns_tests(
        "a_pod_on_a_calico_tunnel_address_is_found_from_both_nodes_with_calicos_fix_only",
    ) {
        return;
    }
    // calico#9086's node: VXLAN; calico#5705's: IPIP and WireGuard on one address.
    let vxlan = real("node-calicoctl-issue9086-vxlan-partial.json");
    let ipip = real("node-calicoctl-issue5705-ipip-and-wireguard-same-addr-partial.json");
    let here = vxlan["metadata"]["name"].as_str().unwrap();
    let there = ipip["metadata"]["name"].as_str().unwrap();
    let my_tunnel = vxlan["spec"]["ipv4VXLANTunnelAddr"].as_str().unwrap();
    let their_tunnel = ipip["spec"]["bgp"]["ipv4IPIPTunnelAddr"].as_str().unwrap();

    let ns = NetNs::new("calico");
    ns.ip(&[
        "link",
        "add",
        "vxlan.calico",
        "type",
        "vxlan",
        "id",
        "4096",
        "dstport",
        "4789",
    ]);
    ns.ip(&[
        "addr",
        "add",
        &format!("{my_tunnel}/32"),
        "dev",
        "vxlan.calico",
    ]);
    ns.ip(&["link", "set", "vxlan.calico", "up"]);
    // IPIP's device on this node too, as the kernel alone shows it (no annotation).
    ns.add_veth("tunl0", "tunl0-peer");
    ns.ip(&["addr", "add", "10.100.219.65/32", "dev", "tunl0"]);
    ns.ip(&["link", "set", "tunl0", "up"]);

    // Calico's per-pod routes via each pod's cali veth.
    for (veth, ip) in [
        ("cali0c1a2b3c4d5", "10.100.219.70"),
        ("cali9f8e7d6c5b4", their_tunnel),
    ] {
        ns.add_veth(veth, &format!("{}p", &veth[..8]));
        ns.ip(&["link", "set", veth, "up"]);
        ns.ip(&["route", "add", &format!("{ip}/32"), "dev", veth]);
    }

    let dir = ipshadow_tests::TempDir::new("calico");
    let pods = dir.join("pods.json");
    let nodes = dir.join("nodes.json");
    std::fs::write(
        &pods,
        serde_json::to_vec(&list(vec![
            pod("tenant", "on-my-vxlan", here, &[my_tunnel]),
            pod("tenant", "on-my-tunl0", here, &["10.100.219.65"]),
            pod("tenant", "on-their-ipip", here, &[their_tunnel]),
            pod("tenant", "elsewhere-on-mine", there, &[my_tunnel]),
            pod("tenant", "clean", here, &["10.100.219.70"]),
        ]))
        .unwrap(),
    )
    .unwrap();
    std::fs::write(
        &nodes,
        serde_json::to_vec(&list(vec![
            node(here, &annotations(&vxlan["spec"])),
            node(there, &annotations(&ipip["spec"])),
        ]))
        .unwrap(),
    )
    .unwrap();
    let out = ns
        .command(ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", here, "--output", "json", "--ebpf", "off"])
        .args(["--pods", pods.to_str().unwrap()])
        .args(["--nodes", nodes.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut got: Vec<(String, String, String, String, String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            // The Event note's words are checked for every kind in the agent's catalog test.
            let text = f["message"].as_str().unwrap();
            assert!(text.contains("calicoctl ipam check"), "{f:#}");
            assert!(!text.to_lowercase().contains("cilium"), "{f:#}");
            assert!(!text.contains("kube-ovn"), "{f:#}");
            (
                f["pod"]["name"].as_str().unwrap().to_owned(),
                f["kind"].as_str().unwrap().to_owned(),
                f["scope"].as_str().unwrap().to_owned(),
                f["owner"]["node"].as_str().unwrap().to_owned(),
                f["owner"]["device"].as_str().unwrap_or("-").to_owned(),
                f["owner"]["source"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    let row = |pod: &str, scope: &str, owner: &str, device: &str, source: &str| {
        (
            pod.to_owned(),
            "TunnelIPCollision".to_owned(),
            scope.to_owned(),
            owner.to_owned(),
            device.to_owned(),
            source.to_owned(),
        )
    };
    let mut want = vec![
        row(
            "elsewhere-on-mine",
            "cross-node",
            here,
            "vxlan.calico",
            "node.annotations.calico",
        ),
        row("on-my-tunl0", "same-node", here, "tunl0", "kernel"),
        row(
            "on-my-vxlan",
            "same-node",
            here,
            "vxlan.calico",
            "node.annotations.calico",
        ),
        row(
            "on-their-ipip",
            "cross-node",
            there,
            "-",
            "node.annotations.calico",
        ),
    ];
    want.sort();
    assert_eq!(got, want);
}
