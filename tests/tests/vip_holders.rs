//! Node-held addresses seen from every side. For Calico's tunnel address,
//! ovn-kubernetes' management port and a kube-ipvs0 VIP: the real agent of
//! the node holding the address (its own pod; a pod elsewhere, from its
//! host's traffic), the real agent of the pod's node (from the holder's Node
//! annotations; for a VIP, its own kube-ipvs0), and `audit` (the API alone).
//! And a Service address equal to another node's own (kubernetes#127410,
//! #104679, #75290: kube-proxy in IPVS mode binds it on `kube-ipvs0` of every
//! node, which then cannot reach that node), from `audit` and `check`.
//!
//! Real objects: tests/corpus/realworld (calico/, ovn-kubernetes/,
//! kube-proxy-ipvs/, PROVENANCE.md). Calico's `vxlan.calico` is a real vxlan
//! device; this kernel has no dummy device and OVS is not here, so veths named
//! `kube-ipvs0` and `ovn-k8s-mp0` stand in for kube-proxy's and
//! ovn-kubernetes' devices.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; an end-to-end scenario reads top to bottom"
)]

use std::{process::Command, time::Duration};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, deploy,
    http::sample,
    ipshadow_bin,
    lab::{Lab, ME, OTHER, ROUTER, cozystack, event, wait_for},
    netns::NetNs,
    node::SimNode,
    objects::{list, pod},
};
use serde_json::{Value, json};

/// A Node with `annotations` and `InternalIP` in `status.addresses`.
fn node(name: &str, annotations: &Value, internal: Option<&str>) -> Value {
    let addresses: Vec<Value> = internal
        .into_iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip}))
        .chain([json!({"type": "Hostname", "address": name})])
        .collect();
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "annotations": annotations},
           "status": {"addresses": addresses}})
}

fn service(namespace: &str, name: &str, cluster_ip: &str, external: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"namespace": namespace, "name": name},
           "spec": {"type": "NodePort", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                    "externalIPs": external}})
}

/// (node, kind, scope, pod or "-", owner node) of every finding; each message shown to `words`.
fn rows(v: &Value, words: impl Fn(&str, &str)) -> Vec<(String, String, String, String, String)> {
    let mut out = Vec::new();
    for n in v["nodes"].as_array().unwrap() {
        for f in n["findings"].as_array().unwrap() {
            let kind = f["kind"].as_str().unwrap();
            words(kind, f["message"].as_str().unwrap());
            out.push((
                n["node"].as_str().unwrap().to_owned(),
                kind.to_owned(),
                f["scope"].as_str().unwrap().to_owned(),
                f["pod"]["name"].as_str().unwrap_or("-").to_owned(),
                f["owner"]["node"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out.sort();
    out
}

/// A cluster of real Nodes: calico#9086's (VXLAN) and calico#5705's (IPIP),
/// OKEP-5521's ovn-kubernetes worker; kubernetes#104679's workers, whose
/// addresses its nginx Service sets as external IPs. Pods on each node-held
/// address, of their own node and of another.
struct Cluster {
    nodes: Vec<Value>,
    pods: Vec<Value>,
    services: Vec<Value>,
}

fn cluster() -> Cluster {
    let vxlan =
        ipshadow_tests::objects::realworld("calico/node-calicoctl-issue9086-vxlan-partial.json");
    let ipip = ipshadow_tests::objects::realworld(
        "calico/node-calicoctl-issue5705-ipip-and-wireguard-same-addr-partial.json",
    );
    let ovn = ipshadow_tests::objects::realworld(
        "ovn-kubernetes/node-okep5521-kind-ovn-worker-interconnect.json",
    );
    // An OpenShift master: its node subnet 10.129.0.0/23, management port 10.129.0.2.
    let masters = ipshadow_tests::objects::realworld(
        "ovn-kubernetes/node-openshift-enhancements-vsphere-bm-lrp-ifaddrs.json",
    );
    let ovn_master = masters["metadata"]["name"].as_str().unwrap();
    let (cal_a, cal_b) = (
        vxlan["metadata"]["name"].as_str().unwrap(),
        ipip["metadata"]["name"].as_str().unwrap(),
    );
    let ovn_node = ovn["metadata"]["name"].as_str().unwrap();
    let vxlan_tunnel = vxlan["spec"]["ipv4VXLANTunnelAddr"].as_str().unwrap();
    let ipip_tunnel = ipip["spec"]["bgp"]["ipv4IPIPTunnelAddr"].as_str().unwrap();
    // kubernetes#104679: `nginx  NodePort  10.104.206.115  10.128.149.177,10.128.149.199`.
    let svc = ipshadow_tests::objects::realworld_text(
        "kube-proxy-ipvs/kubernetes-issue104679-svc-externalips-on-node-ips-partial.txt",
    );
    let line = svc.lines().find(|l| l.starts_with("nginx")).unwrap();
    let cols: Vec<&str> = line.split_whitespace().collect();
    let external: Vec<&str> = cols[3].split(',').collect();
    assert_eq!(external, ["10.128.149.177", "10.128.149.199"]);
    let calico = |spec: &Value| {
        let mut a = serde_json::Map::new();
        for (v, key) in [
            (&spec["ipv4VXLANTunnelAddr"], "IPv4VXLANTunnelAddr"),
            (&spec["bgp"]["ipv4IPIPTunnelAddr"], "IPv4IPIPTunnelAddr"),
        ] {
            if let Some(ip) = v.as_str() {
                a.insert(format!("projectcalico.org/{key}"), json!(ip));
            }
        }
        Value::Object(a)
    };
    let nodes = vec![
        node(cal_a, &calico(&vxlan["spec"]), None),
        node(cal_b, &calico(&ipip["spec"]), None),
        node(ovn_node, &ovn["metadata"]["annotations"], None),
        node(ovn_master, &masters["metadata"]["annotations"], None),
        node("mudit-cks-master", &json!({}), Some("10.128.149.10")),
        node("mudit-cks-worker1", &json!({}), Some(external[0])),
        node("mudit-cks-worker2", &json!({}), Some(external[1])),
    ];
    let pods = vec![
        pod("tenant", "on-own-vxlan", cal_a, &[vxlan_tunnel]),
        pod("tenant", "on-other-ipip", cal_a, &[ipip_tunnel]),
        pod("tenant", "on-own-mp0", ovn_node, &["10.244.2.2"]),
        pod("tenant", "on-other-mp0", ovn_node, &["10.129.0.2"]),
        pod("tenant", "clean", ovn_node, &["10.244.2.9"]),
        // ovn-kubernetes' join addresses: the worker's derived from its
        // node-id (3), the master's in its lrp-ifaddrs annotation.
        pod("tenant", "on-own-join", ovn_node, &["100.64.0.3"]),
        pod("tenant", "on-other-join", ovn_node, &["100.64.0.4"]),
        // A tenant's Service sets another pod's address as an external IP.
        pod("shop", "cart-0", "mudit-cks-worker1", &["10.244.7.7"]),
    ];
    let services = vec![
        service("default", "kubernetes", "10.96.0.1", &[]),
        service("default", "nginx", cols[2], &external),
        service("tenant-b", "mitm", "10.96.0.30", &["10.244.7.7"]),
    ];
    Cluster {
        nodes,
        pods,
        services,
    }
}

/// What `audit` must say of [`cluster`], from files or from the API server.
fn assert_audit(v: &Value) {
    let got = rows(v, |kind, text| {
        for foreign in ["cilium", "kube-ovn"] {
            assert!(!text.to_lowercase().contains(foreign), "{kind}: {text}");
        }
        match kind {
            "TunnelIPCollision" => assert!(text.contains("calicoctl ipam check"), "{text}"),
            "GatewayIPCollision" => {
                assert!(
                    text.contains("ovn-kubernetes keeps")
                        || text.contains("--gateway-v4-join-subnet"),
                    "{text}"
                );
                assert!(!text.to_lowercase().contains("calico"), "{text}");
            }
            "LocalAddressCollision" => {
                assert!(
                    text.contains("Service tenant-b/mitm sets in spec.externalIPs"),
                    "{text}"
                );
                assert!(text.contains("Deleting the pod does not help"), "{text}");
            }
            "NodeAddressShadowed" => {
                assert!(text.contains("of Service default/nginx"), "{text}");
                assert!(text.contains("Fix: remove 10.128.149.1"), "{text}");
                assert!(text.contains("spec.externalIPs"), "{text}");
                assert!(!text.to_lowercase().contains("calico"), "{text}");
            }
            _ => {}
        }
    });
    let row = |node: &str, kind: &str, scope: &str, pod: &str, owner: &str| {
        (
            node.to_owned(),
            kind.to_owned(),
            scope.to_owned(),
            pod.to_owned(),
            owner.to_owned(),
        )
    };
    let (cal_a, cal_b) = ("master", "k3s-master");
    let (ovn, ovn_master) = ("ovn-worker", "ngirard-multi-twxnm-master-2");
    let mut want = vec![
        row(
            cal_a,
            "TunnelIPCollision",
            "same-node",
            "on-own-vxlan",
            cal_a,
        ),
        row(
            cal_a,
            "TunnelIPCollision",
            "cross-node",
            "on-other-ipip",
            cal_b,
        ),
        row(ovn, "GatewayIPCollision", "same-node", "on-own-mp0", ovn),
        row(ovn, "GatewayIPCollision", "same-node", "on-own-join", ovn),
        row(
            ovn,
            "GatewayIPCollision",
            "cross-node",
            "on-other-join",
            ovn_master,
        ),
        row(
            ovn,
            "GatewayIPCollision",
            "cross-node",
            "on-other-mp0",
            ovn_master,
        ),
        row(
            "mudit-cks-worker1",
            "LocalAddressCollision",
            "same-node",
            "cart-0",
            "mudit-cks-worker1",
        ),
        row(
            "mudit-cks-worker1",
            "NodeAddressShadowed",
            "cross-node",
            "-",
            "mudit-cks-worker1",
        ),
        row(
            "mudit-cks-worker2",
            "NodeAddressShadowed",
            "cross-node",
            "-",
            "mudit-cks-worker2",
        ),
    ];
    want.sort();
    assert_eq!(got, want, "{v:#}");
}

#[test]
fn audit_finds_each_cnis_node_held_addresses_from_both_sides_and_a_service_on_a_node_address() {
    let c = cluster();
    let dir = ipshadow_tests::TempDir::new("vip-audit");
    let mut args = vec!["audit".to_owned(), "-o".into(), "json".into()];
    for (flag, items) in [
        ("--nodes", &c.nodes),
        ("--pods", &c.pods),
        ("--services", &c.services),
    ] {
        let path = dir.join(&flag[2..]);
        std::fs::write(&path, serde_json::to_vec(&list(items)).unwrap()).unwrap();
        args.extend([flag.to_owned(), path.to_str().unwrap().to_owned()]);
    }
    let out = Command::new(ipshadow_bin()).args(&args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_audit(&ipshadow_tests::json_stdout(&out));
}

#[test]
fn audit_of_the_api_server_reads_the_services_and_the_nodes_addresses() {
    let c = cluster();
    let api = ApiServer::start(None);
    api.apply_all(&[
        (Res::Nodes, &c.nodes[..]),
        (Res::Pods, &c.pods[..]),
        (Res::Services, &c.services[..]),
    ]);
    let dir = ipshadow_tests::TempDir::new("vip-audit-api");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let out = Command::new(ipshadow_bin())
        .args([
            "audit",
            "-o",
            "json",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_audit(&ipshadow_tests::json_stdout(&out));
    // The Services are listed once, from the watch cache (the address plan
    // takes the `kubernetes` Service from that list too).
    let services: Vec<String> = api
        .counts()
        .log
        .iter()
        .filter(|(_, u)| u.contains("/services"))
        .map(|(_, u)| u.clone())
        .collect();
    assert_eq!(services.len(), 1, "{services:#?}");
    assert!(services[0].contains("resourceVersion=0"), "{services:#?}");
}

/// `check` in `ns` as node `me` with these objects: its JSON.
fn check(ns: &NetNs, me: &str, nodes: &[Value], pods: &[Value], services: &[Value]) -> Value {
    let dir = ipshadow_tests::TempDir::new("vip-check");
    let mut args = vec![
        "check".to_owned(),
        "--node".into(),
        me.into(),
        "--output".into(),
        "json".into(),
        "--ebpf".into(),
        "off".into(),
    ];
    for (flag, items) in [
        ("--nodes", nodes),
        ("--pods", pods),
        ("--services", services),
    ] {
        let path = dir.join(&flag[2..]);
        std::fs::write(&path, serde_json::to_vec(&list(items)).unwrap()).unwrap();
        args.extend([flag.to_owned(), path.to_str().unwrap().to_owned()]);
    }
    let out = ns
        .command(ipshadow_bin().to_str().unwrap())
        .args(&args)
        .output()
        .unwrap();
    ipshadow_tests::json_stdout(&out)
}

#[test]
fn the_node_holding_another_nodes_address_on_kube_ipvs0_names_that_node_and_the_service() {
    if !can_run_netns_tests(
        "the_node_holding_another_nodes_address_on_kube_ipvs0_names_that_node_and_the_service",
    ) {
        return;
    }
    // kubernetes#75290: "one master (192.168.101.7) and two nodes (192.168.101.4,
    // 192.168.101.6)", nginx-ingress "of type ExternalIPs (with 192.168.101.7)".
    let text = ipshadow_tests::objects::realworld_text(
        "kube-proxy-ipvs/kubernetes-issue75290-externalip-is-master-ip-partial.txt",
    );
    for ip in ["192.168.101.7", "192.168.101.4", "192.168.101.6"] {
        assert!(text.contains(ip), "{ip}");
    }
    let ns = NetNs::new("ipvsnode");
    ns.add_veth("eth0", "eth0-peer");
    ns.ip(&["addr", "add", "192.168.101.4/24", "dev", "eth0"]);
    ns.ip(&["link", "set", "eth0", "up"]);
    // kube-proxy's dummy kube-ipvs0 (a veth here) with the Service's addresses.
    ns.add_veth("kube-ipvs0", "ipvs-peer");
    for vip in ["10.96.0.1", "10.96.118.20", "192.168.101.7"] {
        ns.ip(&["addr", "add", &format!("{vip}/32"), "dev", "kube-ipvs0"]);
    }
    let nodes = [
        node("master", &json!({}), Some("192.168.101.7")),
        node("node-1", &json!({}), Some("192.168.101.4")),
        node("node-2", &json!({}), Some("192.168.101.6")),
    ];
    let services = [
        service("default", "kubernetes", "10.96.0.1", &[]),
        service(
            "ingress-nginx",
            "nginx-ingress",
            "10.96.118.20",
            &["192.168.101.7"],
        ),
    ];
    let v = check(&ns, "node-1", &nodes, &[], &services);
    let f = v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{v:#}");
    let f = &f[0];
    assert_eq!(f["kind"], "NodeAddressShadowed", "{f:#}");
    assert_eq!(f["pod"], Value::Null);
    assert_eq!(f["ip"], "192.168.101.7");
    assert_eq!(f["owner"]["node"], "node-1");
    assert_eq!(f["owner"]["device"], "kube-ipvs0");
    assert_eq!(f["owner"]["source"], "kernel");
    assert_eq!(f["trust"], "tenant-address");
    let m = f["message"].as_str().unwrap();
    for words in [
        "192.168.101.7 is node master's InternalIP",
        "node node-1 holds it on kube-ipvs0",
        "Service ingress-nginx/nginx-ingress sets it in spec.externalIPs",
        "master is unreachable",
        "Fix: remove 192.168.101.7 from spec.externalIPs of Service ingress-nginx/nginx-ingress",
    ] {
        assert!(m.contains(words), "{words:?} not in {m}");
    }
    for foreign in ["cilium", "calico", "kube-ovn", "delete the pod"] {
        assert!(!m.to_lowercase().contains(foreign), "{foreign}: {m}");
    }
    // The master's own kube-ipvs0 holds the address too: its own, no finding there.
    ns.ip(&["addr", "del", "192.168.101.4/24", "dev", "eth0"]);
    let v = check(&ns, "master", &nodes, &[], &services);
    let kinds: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(!kinds.contains(&"NodeAddressShadowed"), "{v:#}");
}

#[test]
fn a_kube_ipvs0_vip_a_pod_holds_is_found_on_the_pods_node_and_on_the_node_holding_it() {
    if !can_run_netns_tests(
        "a_kube_ipvs0_vip_a_pod_holds_is_found_on_the_pods_node_and_on_the_node_holding_it",
    ) {
        return;
    }
    // kube-proxy in IPVS mode binds a Service's external IP on every node; a
    // pod was handed that address on node-2 (and one on node-1 another).
    let ns = NetNs::new("ipvspods");
    ns.add_veth("kube-ipvs0", "ipvs-peer");
    for vip in ["10.244.1.50", "10.244.2.60"] {
        ns.ip(&["addr", "add", &format!("{vip}/32"), "dev", "kube-ipvs0"]);
    }
    let nodes = [
        node("node-1", &json!({}), Some("192.168.101.4")),
        node("node-2", &json!({}), Some("192.168.101.6")),
    ];
    let services = [
        service("tenant-b", "mitm", "10.96.0.20", &["10.244.1.50"]),
        service("tenant-b", "mitm-2", "10.96.0.21", &["10.244.2.60"]),
    ];
    let pods = [
        pod("shop", "on-vip-here", "node-1", &["10.244.1.50"]),
        pod("shop", "on-vip-elsewhere", "node-2", &["10.244.2.60"]),
    ];
    let v = check(&ns, "node-1", &nodes, &pods, &services);
    let mut got: Vec<(String, String, String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let m = f["message"].as_str().unwrap();
            assert!(
                m.contains("spec.externalIPs of Service tenant-b/mitm"),
                "{m}"
            );
            assert!(m.contains("Deleting the pod does not help"), "{m}");
            for foreign in ["cilium", "calico", "kube-ovn", "ovn-kubernetes"] {
                assert!(!m.to_lowercase().contains(foreign), "{foreign}: {m}");
            }
            (
                f["kind"].as_str().unwrap().to_owned(),
                f["scope"].as_str().unwrap().to_owned(),
                f["pod"]["name"].as_str().unwrap().to_owned(),
                f["owner"]["device"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    let row = |scope: &str, pod: &str| {
        (
            "LocalAddressCollision".to_owned(),
            scope.to_owned(),
            pod.to_owned(),
            "kube-ipvs0".to_owned(),
        )
    };
    assert_eq!(
        got,
        [
            row("cross-node", "on-vip-elsewhere"),
            row("same-node", "on-vip-here")
        ],
        "{v:#}"
    );
}

#[test]
fn the_agent_holding_a_kube_ipvs0_vip_finds_the_pod_on_another_node_from_its_traffic() {
    if !can_run_netns_tests(
        "the_agent_holding_a_kube_ipvs0_vip_finds_the_pod_on_another_node_from_its_traffic",
    ) {
        return;
    }
    // A Service's external IP inside node-b's pod range (its CiliumNode says
    // 10.244.1.0/24), bound on node-a's kube-ipvs0 (a veth here), and a pod on
    // node-b given that address. node-a's agent watches only its own pods: it
    // learns of the pod from its host's traffic to the address.
    let vip = "10.244.1.50";
    let sim = SimNode::kube_ovn("vipa", ROUTER);
    sim.add_vips(&["10.96.0.10", vip]);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(
        Res::Services,
        service("tenant-b", "mitm", "10.96.0.20", &[vip]),
    );
    api.apply(Res::Pods, pod("shop", "cart-0", OTHER, &[vip]));
    let lab = Lab::new("vipa", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    assert!(
        found_from_traffic(&sim.node, vip, "cart-0"),
        "log:\n{}",
        agent.log_text()
    );
    let e = wait_for("node-a's Event on the pod", HANG, || {
        event(&api, "shop", "cart-0", "HostTrafficBlackholed")
            .or_else(|| event(&api, "shop", "cart-0", "LocalAddressCollision"))
    });
    assert_eq!(e["reportingInstance"], ME, "{e:#}");
    let note = e["message"].as_str().unwrap();
    for foreign in ["cilium", "calico", "kube-ovn", "ovn-kubernetes"] {
        assert!(!note.to_lowercase().contains(foreign), "{foreign}: {note}");
    }
    for words in [
        "to this pod's IP 10.244.1.50; node-a delivered them to itself",
        "Fix: remove 10.244.1.50 from the Service",
        "deleting the pod does not help",
    ] {
        assert!(note.contains(words), "{words:?} not in {note}");
    }
}

#[test]
fn the_agent_on_a_calico_node_watches_its_ippools_and_finds_a_pod_on_a_vip_inside_one() {
    if !can_run_netns_tests(
        "the_agent_on_a_calico_node_watches_its_ippools_and_finds_a_pod_on_a_vip_inside_one",
    ) {
        return;
    }
    // A real IPPool (10.233.64.0/18, for workloads and tunnels); no Node's
    // podCIDR nor CiliumNode covers it, and node-a has a pod from it. A
    // Service's external IP inside it, bound on node-a's kube-ipvs0, and a
    // pod on node-b given that address.
    let vip = "10.233.70.50";
    let sim = SimNode::kube_ovn("vipc", ROUTER);
    sim.add_vips(&[vip]);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.set_crd(Res::IpPools, true);
    api.apply(
        Res::IpPools,
        ipshadow_tests::objects::realworld("calico/ippool-danny-blog-crd-v1-vxlan.json"),
    );
    api.apply(
        Res::Services,
        service("tenant-b", "lb", "10.96.0.20", &[vip]),
    );
    api.apply(Res::Pods, pod("shop", "cart-0", OTHER, &[vip]));
    api.apply(Res::Pods, pod("shop", "web-0", ME, &["10.233.66.5"]));
    let lab = Lab::new("vipc", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);
    let asked_for_pools = || {
        api.counts()
            .log
            .iter()
            .any(|(_, u)| u.starts_with("/apis/crd.projectcalico.org/v1/ippools"))
    };
    // No Calico in this node's kernel yet: its agent never asks for IPPools.
    // (That the VIP is not watched then cannot be shown by traffic: a lookup
    // that does not happen has no moment to wait for.)
    let mut first = None;
    AgentProc::wait_metrics(&sim.node, HANG, |m| {
        first = reconciles(m);
        first >= Some(1.0)
    })
    .unwrap();
    sim.node.ip(&["link", "set", "kube-ipvs0", "down"]);
    AgentProc::wait_metrics(&sim.node, HANG, |m| reconciles(m) > first).unwrap();
    assert!(!asked_for_pools(), "{:?}", api.counts().log);
    // Calico's veth appears: the next reconcile sees Calico, the agent
    // watches the IPPools, and the VIP inside one is watched.
    sim.node.add_veth("cali05ad595351c", "calip0");
    sim.node.ip(&["link", "set", "kube-ipvs0", "up"]);
    assert!(
        found_from_traffic(&sim.node, vip, "cart-0"),
        "log:\n{}",
        agent.log_text()
    );
    assert!(asked_for_pools());
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert_eq!(
        sample(&m, "ipshadow_source_up", &[("source", "ippools")]),
        Some(1.0),
        "{m}"
    );
    // deploy/rbac.yaml allows what it asked.
    let rules = deploy::cluster_role_rules(&deploy::manifests(), "ipshadow");
    let used = deploy::used_and_allowed(&api.counts().log, &rules);
    assert!(
        used.iter()
            .any(|(g, r, _)| g == "crd.projectcalico.org" && r == "ippools"),
        "{used:?}"
    );
}

/// Two nodes, each a namespace running the real agent against the test API
/// server (in `a`, reached from `b` over a shared link), with `nodes` and
/// `pods` applied; `lay_out` lays node `a`'s CNI device holding `held`.
/// `want` is the kind both agents must report for a pod on `held`: on node
/// `there` (on `b`), then on node `here` (on `a`). `a`'s agent learns of the
/// pod on `b` from its host's traffic to `held`; `b`'s from `a`'s Node
/// annotations. One pod holds the address at a time: with two, the holder's
/// traffic is explained by its own pod's finding and it asks for no other.
struct TwoAgents<'a> {
    tag: &'a str,
    here: &'a str,
    there: &'a str,
    held: &'a str,
    want: &'a str,
    fix: &'a str,
}

impl TwoAgents<'_> {
    /// The two namespaces, linked, with `a`'s CNI device laid out.
    fn nodes(&self, lay_out: impl Fn(&NetNs)) -> (NetNs, NetNs) {
        let a = NetNs::new(&format!("{}a", self.tag));
        let b = NetNs::new(&format!("{}b", self.tag));
        a.ip(&[
            "link", "add", "mgmt", "type", "veth", "peer", "name", "mgmt", "netns", &b.name,
        ]);
        for (ns, ip) in [(&a, "192.168.100.1/24"), (&b, "192.168.100.2/24")] {
            ns.ip(&["addr", "add", ip, "dev", "mgmt"]);
            ns.ip(&["link", "set", "mgmt", "up"]);
        }
        lay_out(&a);
        (a, b)
    }

    /// A wait for `pod`'s finding of the wanted kind, in `scope`, owned by `here`.
    fn found(&self, pod: &'static str, scope: &'static str) -> impl Fn(&str) -> bool + '_ {
        move |m: &str| {
            sample(
                m,
                "ipshadow_collision_info",
                &[
                    ("kind", self.want),
                    ("pod", pod),
                    ("scope", scope),
                    ("owner_node", self.here),
                ],
            ) == Some(1.0)
        }
    }

    /// `pod`'s Event of `reason` by `reporter`, naming `words` and no other CNI.
    fn event(api: &ApiServer, pod: &str, reason: &str, reporter: &str, words: &str) {
        let e = wait_for(&format!("{pod}'s {reason}"), HANG, || {
            event(api, "tenant", pod, reason)
        });
        assert_eq!(e["reportingInstance"], reporter, "{e:#}");
        let note = e["message"].as_str().unwrap();
        assert!(note.contains(words), "{words:?} not in {note}");
        for foreign in ["cilium", "kube-ovn", "kube-ipvs0"] {
            assert!(!note.to_lowercase().contains(foreign), "{foreign}: {note}");
        }
    }

    fn run(&self, nodes: &[Value], lay_out: impl Fn(&NetNs)) {
        let (a, b) = self.nodes(lay_out);
        let api = ApiServer::start_on(Some(&a), "0.0.0.0:0");
        for n in nodes {
            api.apply(Res::Nodes, n.clone());
        }
        // First a pod on another node holds the address.
        api.apply(
            Res::Pods,
            pod("tenant", "on-it-there", self.there, &[self.held]),
        );
        let lab = Lab::new(self.tag, &api);
        let kube_b = lab.dir.join("kubeconfig-b");
        api.write_kubeconfig_via(&kube_b, &format!("192.168.100.1:{}", api.addr.port()));
        let agent_a = lab.agent(&a, self.here);
        let agent_b = AgentProc::spawn_env(
            &b,
            &["--node", self.there],
            &[("KUBECONFIG", kube_b.to_str().unwrap())],
        );
        agent_a.wait_ready(&a);
        agent_b.wait_ready(&b);
        // The pod's node knows the owner from its Node annotations.
        let cross = AgentProc::wait_metrics(&b, HANG, self.found("on-it-there", "cross-node"));
        assert!(cross.is_some(), "pod's node; log:\n{}", agent_b.log_text());
        Self::event(&api, "on-it-there", self.want, self.there, self.fix);
        // The holder, once its host's traffic to the address is seen.
        // Traffic at every poll: the observer may load the address after ready.
        let found = self.found("on-it-there", "cross-node");
        let seen = AgentProc::wait_metrics(&a, HANG, |m| {
            poke(&a, self.held);
            found(m)
        });
        assert!(
            seen.is_some(),
            "holder, pod elsewhere; log:\n{}",
            agent_a.log_text()
        );
        Self::event(
            &api,
            "on-it-there",
            "HostTrafficBlackholed",
            self.here,
            "delivered them to itself",
        );
        // Then the pod goes, and one on the holder's own node is given the address.
        api.delete(Res::Pods, "tenant", "on-it-there");
        api.apply(
            Res::Pods,
            pod("tenant", "on-it-here", self.here, &[self.held]),
        );
        let same = AgentProc::wait_metrics(&a, HANG, self.found("on-it-here", "same-node"));
        assert!(
            same.is_some(),
            "holder, own pod; log:\n{}",
            agent_a.log_text()
        );
        Self::event(&api, "on-it-here", self.want, self.here, self.fix);
    }
}

#[test]
fn the_agents_of_both_nodes_find_pods_on_a_calico_tunnel_address() {
    if !can_run_netns_tests("the_agents_of_both_nodes_find_pods_on_a_calico_tunnel_address") {
        return;
    }
    // calico#9086's node (VXLAN) holds its tunnel address on a real vxlan
    // device; calico#5705's (IPIP) is the other node.
    let vxlan =
        ipshadow_tests::objects::realworld("calico/node-calicoctl-issue9086-vxlan-partial.json");
    let ipip = ipshadow_tests::objects::realworld(
        "calico/node-calicoctl-issue5705-ipip-and-wireguard-same-addr-partial.json",
    );
    let tunnel = vxlan["spec"]["ipv4VXLANTunnelAddr"].as_str().unwrap();
    let annotation = |key: &str, v: &Value| json!({ format!("projectcalico.org/{key}"): v });
    let nodes = [
        node(
            "master",
            &annotation("IPv4VXLANTunnelAddr", &vxlan["spec"]["ipv4VXLANTunnelAddr"]),
            None,
        ),
        node(
            "k3s-master",
            &annotation(
                "IPv4IPIPTunnelAddr",
                &ipip["spec"]["bgp"]["ipv4IPIPTunnelAddr"],
            ),
            None,
        ),
    ];
    TwoAgents {
        tag: "calx",
        here: "master",
        there: "k3s-master",
        held: tunnel,
        want: "TunnelIPCollision",
        fix: "calicoctl ipam check",
    }
    .run(&nodes, |a| {
        a.add_calico_vxlan(tunnel);
    });
}

#[test]
fn the_agents_of_both_nodes_find_pods_on_ovn_kubernetes_management_port() {
    if !can_run_netns_tests("the_agents_of_both_nodes_find_pods_on_ovn_kubernetes_management_port")
    {
        return;
    }
    // OKEP-5521's kind worker: node subnet 10.244.2.0/24, management port .2
    // on ovn-k8s-mp0 (an OVS internal port; a veth of that name stands in).
    let worker = ipshadow_tests::objects::realworld(
        "ovn-kubernetes/node-okep5521-kind-ovn-worker-interconnect.json",
    );
    let masters = ipshadow_tests::objects::realworld(
        "ovn-kubernetes/node-openshift-enhancements-vsphere-bm-lrp-ifaddrs.json",
    );
    let there = masters["metadata"]["name"].as_str().unwrap();
    let nodes = [
        node("ovn-worker", &worker["metadata"]["annotations"], None),
        node(there, &masters["metadata"]["annotations"], None),
    ];
    TwoAgents {
        tag: "ovnx",
        here: "ovn-worker",
        there,
        held: "10.244.2.2",
        want: "GatewayIPCollision",
        fix: "ovn-kubernetes keeps the first two addresses",
    }
    .run(&nodes, |a| {
        a.add_ovn_management_port("10.244.2.2/24", None);
    });
}

/// Whether `ns`'s agent reports `pod` (on another node) on its kube-ipvs0
/// address `vip`, learnt from its host's traffic: sent at every poll, as
/// the observer may load the address after the agent is ready.
fn found_from_traffic(ns: &NetNs, vip: &str, pod: &str) -> bool {
    AgentProc::wait_metrics(ns, HANG, |m| {
        poke(ns, vip);
        sample(
            m,
            "ipshadow_collision_info",
            &[
                ("kind", "LocalAddressCollision"),
                ("pod", pod),
                ("scope", "cross-node"),
                ("owner_node", ME),
                ("device", "kube-ipvs0"),
            ],
        ) == Some(1.0)
    })
    .is_some()
}

/// The agent's successful reconciles so far.
fn reconciles(m: &str) -> Option<f64> {
    sample(m, "ipshadow_reconciles_total", &[("result", "ok")])
}

/// One connection attempt from inside `ns` to `ip`:8080 (host traffic the
/// observer sees), bounded by a short timeout.
fn poke(ns: &NetNs, ip: &str) {
    let _inside = ns.enter();
    let _ = std::net::TcpStream::connect_timeout(
        &format!("{ip}:8080").parse().unwrap(),
        Duration::from_millis(200),
    );
}
