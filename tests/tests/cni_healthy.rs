//! Healthy nodes of each CNI, laid out in a network namespace from real
//! objects (tests/corpus/realworld, PROVENANCE.md), give `check` nothing to
//! report: Calico's VXLAN node with its IPAMBlock and IPPool, an
//! ovn-kubernetes worker with its management port, kube-proxy's `kube-ipvs0`
//! holding a healthy cluster's Service addresses. The bridge plugin's healthy
//! node is `cni_layouts.rs`'s, laid out by the real plugin. This kernel has no
//! dummy device: veths named as the devices stand in for `kube-ipvs0` and
//! `ovn-k8s-mp0`; `vxlan.calico` is a real vxlan device.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow_tests::{
    can_run_netns_tests, ipshadow_bin,
    netns::NetNs,
    objects::{list, node, pod},
};
use serde_json::{Value, json};

/// `ipshadow check` of `me` in `ns`, each `(flag, objects)` written as a
/// List file: its exit code and JSON report.
fn check(ns: &NetNs, me: &str, files: &[(&str, Vec<Value>)]) -> (Option<i32>, Value) {
    let dir = ipshadow_tests::TempDir::new("healthy");
    let mut args: Vec<String> = ["check", "--node", me, "--output", "json", "--ebpf", "off"]
        .map(str::to_owned)
        .to_vec();
    for (flag, items) in files {
        let path = dir.join(&flag[2..]);
        std::fs::write(&path, serde_json::to_vec(&list(items.clone())).unwrap()).unwrap();
        args.extend([(*flag).to_owned(), path.to_str().unwrap().to_owned()]);
    }
    let out = ns
        .command(ipshadow_bin().to_str().unwrap())
        .args(&args)
        .output()
        .unwrap();
    let v = ipshadow_tests::json_stdout(&out);
    (out.status.code(), v)
}

/// Nothing found, and `check` says so with its exit code.
fn assert_nothing(what: &str, (code, v): (Option<i32>, Value)) {
    assert_eq!(v["findings"], json!([]), "{what}: {v:#}");
    assert_eq!(code, Some(0), "{what}: {v:#}");
}

/// The control: one pod added on a node-held address is found, as `kind`
/// with `words` in its message, so the layout and objects were read.
fn assert_found(what: &str, (code, v): (Option<i32>, Value), kind: &str, words: &str) {
    let found: Vec<(&str, &str)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap(), f["message"].as_str().unwrap()))
        .collect();
    assert!(
        found.iter().any(|(k, m)| *k == kind && m.contains(words)),
        "{what}: {found:#?}"
    );
    assert_eq!(code, Some(1), "{what}");
}

/// A route to each of `addresses` through its own veth named `prefix` and a
/// number, as Calico and kube-proxy's CNIs reach pods (the peers stay here:
/// no pod namespace).
fn pod_routes(ns: &NetNs, prefix: &str, addresses: &[String]) {
    for (i, ip) in addresses.iter().enumerate() {
        let veth = format!("{prefix}{i:011x}");
        ns.add_veth(&veth, &format!("peer{i}"));
        ns.ip(&["link", "set", &veth, "up"]);
        ns.ip(&["route", "add", &format!("{ip}/32"), "dev", &veth]);
    }
}

#[test]
fn a_healthy_calico_node_with_its_block_and_pool_gives_nothing() {
    if !can_run_netns_tests("a_healthy_calico_node_with_its_block_and_pool_gives_nothing") {
        return;
    }
    // zhongmingmao's mac-k8s: VXLAN tunnel at the block's ordinal 0 and seven
    // pods in 192.168.185.0/26, from the default 192.168.0.0/16 pool.
    let block = ipshadow_tests::objects::realworld(
        "calico/ipamblock-zhongmingmao-blog-vxlan-mac-k8s-after-nginx.json",
    );
    let pool = ipshadow_tests::objects::realworld(
        "calico/ippool-zhongmingmao-blog-v3-vxlan-crosssubnet.json",
    );
    let me = "mac-k8s";
    let attributes = block["spec"]["attributes"].as_array().unwrap();
    let mut pods = Vec::new();
    let mut addresses = Vec::new();
    let mut tunnel = None;
    for (ordinal, index) in block["spec"]["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let Some(index) = index.as_u64() else {
            continue;
        };
        let a = &attributes[usize::try_from(index).unwrap()]["secondary"];
        let ip = format!("192.168.185.{ordinal}");
        match (a["pod"].as_str(), a["type"].as_str()) {
            (Some(name), _) => {
                let namespace = a["namespace"].as_str().unwrap();
                pods.push(pod(namespace, name, me, &[&ip]));
                addresses.push(ip);
            }
            (None, Some("vxlanTunnelAddress")) => tunnel = Some(ip),
            other => panic!("unexpected allocation {other:?}"),
        }
    }
    let tunnel = tunnel.unwrap();
    assert_eq!(tunnel, "192.168.185.0");
    assert!(pods.len() >= 5, "{pods:?}");

    let ns = NetNs::new("calhealthy");
    ns.add_calico_vxlan(&tunnel);
    pod_routes(&ns, "cali", &addresses);
    let mut n = node(me, &[]);
    n["metadata"]["annotations"] = json!({"projectcalico.org/IPv4VXLANTunnelAddr": tunnel});
    let files = |pods: Vec<Value>| {
        [
            ("--nodes", vec![n.clone()]),
            ("--pods", pods),
            ("--ipamblocks", vec![block.clone()]),
            ("--ippools", vec![pool.clone()]),
        ]
    };
    assert_nothing("Calico", check(&ns, me, &files(pods.clone())));
    pods.push(pod("tenant", "on-tunnel", me, &[&tunnel]));
    assert_found(
        "Calico's control",
        check(&ns, me, &files(pods)),
        "TunnelIPCollision",
        "calicoctl ipam check",
    );
}

#[test]
fn a_healthy_ovn_kubernetes_worker_gives_nothing() {
    if !can_run_netns_tests("a_healthy_ovn_kubernetes_worker_gives_nothing") {
        return;
    }
    // OKEP-5521's kind worker (10.244.2.0/24, node-id 3) and an OpenShift
    // master, each as its Node has it; pods on neither's reserved addresses.
    let worker = ipshadow_tests::objects::realworld(
        "ovn-kubernetes/node-okep5521-kind-ovn-worker-interconnect.json",
    );
    let master = ipshadow_tests::objects::realworld(
        "ovn-kubernetes/node-openshift-enhancements-vsphere-bm-lrp-ifaddrs.json",
    );
    let me = worker["metadata"]["name"].as_str().unwrap().to_owned();
    let there = master["metadata"]["name"].as_str().unwrap().to_owned();
    let ns = NetNs::new("ovnhealthy");
    ns.add_ovn_management_port("10.244.2.2/24", Some(("10.128.0.0/14", "10.244.2.1")));
    let mut pods = vec![
        pod("tenant", "web-0", &me, &["10.244.2.3"]),
        pod("tenant", "web-1", &me, &["10.244.2.9"]),
        pod("tenant", "api-0", &there, &["10.129.0.5"]),
    ];
    let nodes = vec![worker, master];
    let files = |pods: Vec<Value>| [("--nodes", nodes.clone()), ("--pods", pods)];
    assert_nothing("ovn-kubernetes", check(&ns, &me, &files(pods.clone())));
    pods.push(pod("tenant", "on-mp0", &me, &["10.244.2.2"]));
    assert_found(
        "ovn-kubernetes' control",
        check(&ns, &me, &files(pods)),
        "GatewayIPCollision",
        "management port",
    );
}

#[test]
fn kube_ipvs0_holding_a_healthy_clusters_service_addresses_gives_nothing() {
    if !can_run_netns_tests("kube_ipvs0_holding_a_healthy_clusters_service_addresses_gives_nothing")
    {
        return;
    }
    // kubeadm's defaults: Services in 10.96.0.0/12, pods in 10.244.0.0/16;
    // a LoadBalancer IP from the node network's pool, no node's address.
    let ns = NetNs::new("ipvshealthy");
    ns.add_veth("kube-ipvs0", "ipvs-peer");
    for vip in ["10.96.0.1", "10.96.0.10", "10.103.44.7", "172.18.255.200"] {
        ns.ip(&["addr", "add", &format!("{vip}/32"), "dev", "kube-ipvs0"]);
    }
    pod_routes(&ns, "veth", &["10.244.1.5".to_owned()]);
    let services = vec![
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"namespace": "default", "name": "kubernetes"},
               "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"]}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"namespace": "kube-system", "name": "kube-dns"},
               "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"namespace": "shop", "name": "front"},
               "spec": {"type": "LoadBalancer", "clusterIP": "10.103.44.7",
                        "clusterIPs": ["10.103.44.7"]},
               "status": {"loadBalancer": {"ingress": [{"ip": "172.18.255.200"}]}}}),
    ];
    let mut me = node("worker-1", &["10.244.1.0/24"]);
    me["status"] = json!({"addresses": [{"type": "InternalIP", "address": "172.18.0.3"}]});
    let mut other = node("worker-2", &["10.244.2.0/24"]);
    other["status"] = json!({"addresses": [{"type": "InternalIP", "address": "172.18.0.4"}]});
    let mut pods = vec![
        pod("shop", "front-0", "worker-1", &["10.244.1.5"]),
        pod("shop", "front-1", "worker-2", &["10.244.2.5"]),
    ];
    let nodes = vec![me, other];
    let files = |pods: Vec<Value>| {
        [
            ("--nodes", nodes.clone()),
            ("--pods", pods),
            ("--services", services.clone()),
        ]
    };
    assert_nothing("kube-ipvs0", check(&ns, "worker-1", &files(pods.clone())));
    pods.push(pod("shop", "on-dns", "worker-2", &["10.96.0.10"]));
    assert_found(
        "kube-ipvs0's control",
        check(&ns, "worker-1", &files(pods)),
        "LocalAddressCollision",
        "cluster IP of Service kube-system/kube-dns",
    );
}
