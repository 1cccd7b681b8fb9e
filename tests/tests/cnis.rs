//! Other CNIs' node-held addresses, from real objects
//! (tests/corpus/realworld/<cni>, PROVENANCE.md): a pod on one is found from
//! its own node (the kernel's device) and from another (the Node annotations
//! the CNI writes), with that CNI's fix and no other CNI's advice.
//!
//! Calico: the real objects are calicoctl's `projectcalico.org/v3` Nodes; in the
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
    HANG,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, ipshadow_bin,
    lab::{self, Lab, ME, OTHER},
    netns::NetNs,
    objects::{self, list, pod},
};
use serde_json::{Map, Value, json};

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
    let vxlan = objects::realworld("calico/node-calicoctl-issue9086-vxlan-partial.json");
    let ipip = objects::realworld(
        "calico/node-calicoctl-issue5705-ipip-and-wireguard-same-addr-partial.json",
    );
    let here = vxlan["metadata"]["name"].as_str().unwrap();
    let there = ipip["metadata"]["name"].as_str().unwrap();
    let my_tunnel = vxlan["spec"]["ipv4VXLANTunnelAddr"].as_str().unwrap();
    let their_tunnel = ipip["spec"]["bgp"]["ipv4IPIPTunnelAddr"].as_str().unwrap();

    let ns = NetNs::new("calico");
    ns.add_calico_vxlan(my_tunnel);
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
    let got = findings(&ns, here, &pods, &nodes, |text| {
        assert!(text.contains("calicoctl ipam check"), "{text}");
        assert!(!text.to_lowercase().contains("cilium"), "{text}");
        assert!(!text.contains("kube-ovn"), "{text}");
    });
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

/// (pod, kind, scope, owner node, device or "-", source) of each finding of
/// `check` on `node` in `ns`, sorted; each message is shown to `words`.
fn findings(
    ns: &NetNs,
    node: &str,
    pods: &Path,
    nodes: &Path,
    words: impl Fn(&str),
) -> Vec<(String, String, String, String, String, String)> {
    let out = ns
        .command(ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", node, "--output", "json", "--ebpf", "off"])
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
    let mut got: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            // The Event note's words are checked for every kind in the agent's catalog test.
            words(f["message"].as_str().unwrap());
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
    got
}

#[test]
fn a_pod_on_ovn_kubernetes_management_port_or_gateway_is_found_from_both_nodes() {
    if !can_run_netns_tests(
        "a_pod_on_ovn_kubernetes_management_port_or_gateway_is_found_from_both_nodes",
    ) {
        return;
    }
    // OKEP-5521's kind worker (list form) and an OpenShift master (list form);
    // the string form of older releases is read the same (agent/src/cni/ovn_kubernetes/node_subnets.rs).
    let worker =
        objects::realworld("ovn-kubernetes/node-okep5521-kind-ovn-worker-interconnect.json");
    let masters = objects::realworld(
        "ovn-kubernetes/node-openshift-enhancements-vsphere-bm-lrp-ifaddrs.json",
    );
    let here = worker["metadata"]["name"].as_str().unwrap();
    let there = masters["metadata"]["name"].as_str().unwrap();
    let subnets = |n: &Value| -> String {
        let a = n["metadata"]["annotations"]["k8s.ovn.org/node-subnets"]
            .as_str()
            .unwrap();
        serde_json::from_str::<Value>(a).unwrap()["default"][0]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(subnets(&worker), "10.244.2.0/24");
    assert_eq!(subnets(&masters), "10.129.0.0/23");

    // ovn-k8s-mp0 is an OVS internal port; a veth of that name stands in.
    let ns = NetNs::new("ovnk");
    // The cluster network via the node switch's gateway, as ovn-kubernetes routes it.
    ns.add_ovn_management_port("10.244.2.2/24", Some(("10.128.0.0/14", "10.244.2.1")));
    let dir = ipshadow_tests::TempDir::new("ovnk");
    let pods = dir.join("pods.json");
    let nodes = dir.join("nodes.json");
    let mut node_objects = Vec::new();
    for n in [&worker, &masters] {
        let mut n = n.clone();
        // Only what the agent reads of a Node: its name and annotations.
        n["spec"] = json!({});
        n["status"] = json!({});
        node_objects.push(n);
    }
    std::fs::write(&nodes, serde_json::to_vec(&list(node_objects)).unwrap()).unwrap();
    std::fs::write(
        &pods,
        serde_json::to_vec(&list(vec![
            pod("tenant", "on-my-mp0", here, &["10.244.2.2"]),
            pod("tenant", "on-their-mp0", here, &["10.129.0.2"]),
            pod("tenant", "elsewhere-on-my-gateway", there, &["10.244.2.1"]),
            pod("tenant", "clean", here, &["10.244.2.9"]),
            // The join and transit addresses: OVN's router ports, not the host's.
            pod("tenant", "on-my-join", here, &["100.64.0.3"]),
            pod("tenant", "on-their-join", here, &["100.64.0.4"]),
            pod("tenant", "elsewhere-on-my-transit", there, &["100.88.0.3"]),
        ]))
        .unwrap(),
    )
    .unwrap();
    let got = findings(&ns, here, &pods, &nodes, |text| {
        assert!(
            text.contains("ovn-kubernetes keeps the first two addresses")
                || text.contains("--gateway-v4-join-subnet"),
            "{text}"
        );
        for foreign in ["cilium", "calico", "kube-ovn"] {
            assert!(!text.to_lowercase().contains(foreign), "{foreign}: {text}");
        }
    });
    let row = |pod: &str, scope: &str, owner: &str, device: &str, source: &str| {
        (
            pod.to_owned(),
            "GatewayIPCollision".to_owned(),
            scope.to_owned(),
            owner.to_owned(),
            device.to_owned(),
            source.to_owned(),
        )
    };
    let ovn = "node.annotations.ovn-kubernetes";
    // The worker publishes no join address: derived from its node-id (3) in
    // the default join subnet; the master's is its lrp-ifaddrs annotation.
    let (node_id, join, transit) = (
        "node.annotations.ovn-kubernetes.node-id",
        "node.annotations.ovn-kubernetes.join",
        "node.annotations.ovn-kubernetes.transit",
    );
    let mut want = vec![
        row("on-my-join", "same-node", here, "-", node_id),
        row("on-their-join", "cross-node", there, "-", join),
        row("elsewhere-on-my-transit", "cross-node", here, "-", transit),
        row("elsewhere-on-my-gateway", "cross-node", here, "-", ovn),
        row("on-my-mp0", "same-node", here, "ovn-k8s-mp0", ovn),
        row("on-their-mp0", "cross-node", there, "-", ovn),
    ];
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn a_bridge_that_kept_its_previous_pod_range_names_the_node_owning_it_and_its_pods() {
    if !can_run_netns_tests(
        "a_bridge_that_kept_its_previous_pod_range_names_the_node_owning_it_and_its_pods",
    ) {
        return;
    }
    // flannel's layout (danny5487401's worker, tests/corpus/realworld/flannel):
    // cni0 holds .1 of the node's podCIDR. This node had 10.244.1.0/24 and got
    // 10.244.5.0/24; node-b has 10.244.1.0/24 now.
    let ns = NetNs::new("bridge");
    ns.ip(&["link", "add", "cni0", "type", "bridge"]);
    ns.ip(&["addr", "add", "10.244.1.1/24", "dev", "cni0"]);
    ns.ip(&["link", "set", "cni0", "up"]);
    let dir = ipshadow_tests::TempDir::new("bridge");
    let pods = dir.join("pods.json");
    let nodes = dir.join("nodes.json");
    let node = |name: &str, cidr: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "spec": {"podCIDR": cidr, "podCIDRs": [cidr]}})
    };
    std::fs::write(
        &nodes,
        serde_json::to_vec(&list(vec![
            node("node-a", "10.244.5.0/24"),
            node("node-b", "10.244.1.0/24"),
        ]))
        .unwrap(),
    )
    .unwrap();
    std::fs::write(
        &pods,
        serde_json::to_vec(&list(vec![
            pod("shop", "cart-0", "node-b", &["10.244.1.7"]),
            pod("shop", "cart-1", "node-b", &["10.244.1.8"]),
        ]))
        .unwrap(),
    )
    .unwrap();
    let out = ns
        .command(ipshadow_bin().to_str().unwrap())
        .args([
            "check", "--node", "node-a", "--output", "json", "--ebpf", "off",
        ])
        .args(["--pods", pods.to_str().unwrap()])
        .args(["--nodes", nodes.to_str().unwrap()])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{v:#}");
    let f = &findings[0];
    assert_eq!(f["kind"], "StaleBridgeAddress", "{f:#}");
    let message = f["message"].as_str().unwrap();
    for words in [
        "cni0",
        "10.244.1.1/24",
        "node node-b's pod range",
        "2 pod(s)",
        "shop/cart-0, shop/cart-1",
        "ip addr del 10.244.1.1/24 dev cni0",
    ] {
        assert!(message.contains(words), "{words:?} not in {message}");
    }
    for foreign in ["cilium", "calico", "kube-ovn"] {
        assert!(
            !message.to_lowercase().contains(foreign),
            "{foreign}: {message}"
        );
    }
}

#[test]
fn the_agent_looks_up_who_owns_the_range_its_bridge_kept_and_names_them() {
    if !can_run_netns_tests("the_agent_looks_up_who_owns_the_range_its_bridge_kept_and_names_them")
    {
        return;
    }
    // The same stale cni0 as above, seen by the DaemonSet: it watches only its
    // own Node, so it looks up the owner of 10.244.1.0/24 and that node's pods.
    let ns = NetNs::new("bridgeagent");
    ns.ip(&["link", "add", "cni0", "type", "bridge"]);
    ns.ip(&["addr", "add", "10.244.1.1/24", "dev", "cni0"]);
    ns.ip(&["link", "set", "cni0", "up"]);
    let api = ApiServer::start(Some(&ns));
    api.apply(Res::Nodes, objects::node(ME, &["10.244.5.0/24"]));
    api.apply(Res::Nodes, objects::node(OTHER, &["10.244.1.0/24"]));
    api.apply(Res::Nodes, objects::node("node-c", &["10.244.7.0/24"]));
    api.apply(Res::Pods, pod("shop", "cart-0", OTHER, &["10.244.1.7"]));
    api.apply(Res::Pods, pod("shop", "cart-1", OTHER, &["10.244.1.8"]));
    api.apply(Res::Pods, pod("shop", "far-0", "node-c", &["10.244.7.9"]));
    let lab = Lab::new("bridgeagent", &api);
    // No spread of the first lookup (300 s by default, for rollouts).
    let agent = lab.agent_with(&ns, ME, &["--owner-lookup-spread-seconds", "0"]);
    agent.wait_ready(&ns);
    let e = lab::wait_for("StaleBridgeAddress on the Node", HANG, || {
        lab::event(&api, "default", ME, "StaleBridgeAddress")
    });
    assert_eq!(e["involvedObject"]["kind"], "Node", "{e:#}");
    let message = e["message"].as_str().unwrap();
    for words in [
        "cni0",
        "10.244.1.1/24",
        "node node-b's pod range (2 pod(s))",
        "Fix:",
    ] {
        assert!(message.contains(words), "{words:?} not in {message}");
    }
    // One Node list from the watch cache, then the owner's pods by its index.
    let c = api.counts();
    let gets = |path: &str| -> Vec<String> {
        c.log
            .iter()
            .filter(|(m, u)| {
                m == "GET" && u.split('?').next() == Some(path) && !u.contains("watch=")
            })
            .map(|(_, u)| u.clone())
            .collect()
    };
    let nodes = gets("/api/v1/nodes");
    assert_eq!(nodes.len(), 1, "{nodes:#?}");
    assert!(nodes[0].contains("resourceVersion=0"), "{nodes:#?}");
    let pods = gets("/api/v1/pods");
    assert!(
        pods.iter()
            .any(|u| u.contains("fieldSelector=spec.nodeName%3Dnode-b")),
        "{pods:#?}"
    );
    assert!(
        !pods.iter().any(|u| u.contains("node-c")),
        "only the owner's pods: {pods:#?}"
    );
    let (status, _) = agent.terminate();
    assert!(status.success());
}
