//! `ipshadow audit`'s address plan, from the test API server and from
//! `--address-plan` files alike: a MetalLB pool over a Calico pool in use, a
//! Cilium LB-IPAM pool and kube-vip's `range-global` holding a Node's
//! InternalIP, a ServiceCIDR over a Node's podCIDR, two attachments on one
//! interface whose whereabouts ranges do not share reservations — each named
//! on both sides with the object to change; without ServiceCIDRs, a pool over
//! the `kubernetes` Service's ClusterIP; the same real objects in a healthy
//! plan give nothing. The pools, ServiceCIDRs, attachments, kube-vip's
//! ConfigMap and the `kubernetes` Service are the real ones of
//! tests/corpus/realworld (metallb/, cilium-lb/, servicecidr/, multus/,
//! calico/, kube-vip/), changed only where a row below says so.
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

/// The items of a real object file of the corpus.
fn real(file: &str) -> Vec<Value> {
    let path = format!("{}/corpus/realworld/{file}", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["items"].as_array().unwrap().clone()
}

/// A pod with a secondary address on Harvester's storage network, recorded
/// by Multus as in the real pod of
/// multus/pod-harvester-longhorn-instance-manager-network-status-partial.json
/// (its attachment named as the one of this cluster: whereabouts hands its
/// addresses out across nodes).
fn storage_pod(name: &str, node: &str, created: &str, ip: &str) -> Value {
    let mut p = pod("longhorn-system", name, node, &["10.233.70.20"]);
    let status = json!([
        {"name": "k8s-pod-network", "ips": ["10.233.70.20"], "default": true, "dns": {}},
        {"name": "harvester-system/storagenetwork-sg8d8", "interface": "lhnet1", "ips": [ip],
         "mac": "da:3f:fb:7a:e2:eb", "dns": {}}
    ]);
    p["metadata"]["annotations"] = json!({"k8s.v1.cni.cncf.io/network-status": serde_json::to_string_pretty(&status).unwrap()});
    p["metadata"]["creationTimestamp"] = json!(created);
    p["status"]["podIP"] = json!(format!("10.233.70.{}", name.len()));
    p["status"]["podIPs"] = json!([{"ip": format!("10.233.70.{}", name.len())}]);
    p
}

fn node_at(name: &str, pod_cidr: &str, internal: &str) -> Value {
    let mut n = node(name, &[pod_cidr]);
    n["status"] = json!({"addresses": [{"type": "InternalIP", "address": internal},
                                       {"type": "Hostname", "address": name}]});
    n
}

/// The plan's objects by kind, and the rest of the cluster.
struct Cluster {
    nodes: Vec<Value>,
    pods: Vec<Value>,
    calico_pools: Vec<Value>,
    metallb: Vec<Value>,
    cilium_lb: Vec<Value>,
    service_cidrs: Vec<Value>,
    attachments: Vec<Value>,
    config_maps: Vec<Value>,
    services: Vec<Value>,
}

/// Every object kind of the plan, none overlapping where it must not:
/// Calico's pool in use (10.233.64.0/18, a pod in it), MetalLB's L2 range
/// beside the nodes, Cilium's LB pool with a CIDR, a range and one address,
/// the default ServiceCIDR (10.96.0.0/28, inside the newer one by design),
/// whereabouts' two README attachments on eth0 (one inside the other, with
/// the reservations they share) and Harvester's on another bridge, kube-vip's
/// pools (192.168.0.200-247) beside the nodes and another ConfigMap with a
/// kube-vip key over them that is not kube-vip's (never read), and the
/// `kubernetes` Service (10.96.0.1, inside the ServiceCIDRs: not a range).
fn healthy() -> Cluster {
    let mut other_cm =
        real("kube-vip/configmap-kubevip-website-cloud-provider-cidr-range-global.json");
    other_cm[0]["metadata"]["name"] = json!("kubevip-old");
    other_cm[0]["data"] = json!({"cidr-global": "192.168.1.0/24"});
    let mut default_cidr =
        real("servicecidr/servicecidr-k8s-website-newcidr1-v1-terminating-orphan.json");
    default_cidr.push(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/28"]}}),
    );
    // Served at v2alpha1 here (the test API server's version of the kind).
    let mut lb =
        real("cilium-lb/ciliumlbippool-cilium-docs-blocks-cidr-start-stop-start-only.json");
    lb[0]["apiVersion"] = json!("cilium.io/v2alpha1");
    Cluster {
        nodes: vec![
            node_at("worker-a", "10.244.0.0/24", "192.168.1.2"),
            node_at("worker-b", "10.244.1.0/24", "192.168.1.3"),
        ],
        pods: vec![
            pod("shop", "web-0", "worker-a", &["10.233.70.9"]),
            storage_pod(
                "instance-manager-a",
                "worker-a",
                "2025-11-01T10:00:00Z",
                "192.168.50.3",
            ),
            storage_pod(
                "instance-manager-bb",
                "worker-b",
                "2025-11-02T10:00:00Z",
                "192.168.50.4",
            ),
        ],
        calico_pools: real("calico/ippool-danny-blog-crd-v1-vxlan.json"),
        metallb: real("metallb/ipaddresspool-metallb-docs-l2-range-only.json"),
        cilium_lb: lb,
        service_cidrs: default_cidr,
        attachments: [
            real("multus/nad-whereabouts-readme-macvlan-range-and-node-slice.json"),
            real("multus/nad-harvester-storagenetwork-bridge-vlan-whereabouts.json"),
        ]
        .concat(),
        config_maps: [
            real("kube-vip/configmap-kubevip-website-cloud-provider-cidr-range-global.json"),
            other_cm,
        ]
        .concat(),
        services: real(
            "servicecidr/service-cilium-controlplane-kubernetes-default-kind-v1.27.json",
        ),
    }
}

/// The healthy plan and five mistakes: the second storage pod on the
/// first's secondary address (whereabouts#176); a MetalLB pool inside Calico's pool in
/// use; worker-c's InternalIP inside Cilium's LB range 20.0.20.100-200;
/// kube-vip's `range-global` over worker-a's InternalIP;
/// worker-c's podCIDR the newer ServiceCIDR's 10.96.0.0/24; a third
/// whereabouts attachment on eth0 with its own reservations
/// (`enable_overlapping_ranges: false`) over the README's.
fn broken() -> Cluster {
    let mut c = healthy();
    c.pods[2] = storage_pod(
        "instance-manager-bb",
        "worker-b",
        "2025-11-02T10:00:00Z",
        "192.168.50.3",
    );
    c.nodes
        .push(node_at("worker-c", "10.96.0.0/24", "20.0.20.150"));
    let mut inside = real("metallb/ipaddresspool-metallb-docs-l2-range-only.json");
    inside[0]["metadata"]["name"] = json!("inside-calico");
    inside[0]["spec"]["addresses"] = json!(["10.233.100.0/24"]);
    c.metallb.extend(inside);
    let mut own =
        real("multus/nad-whereabouts-readme-macvlan-range-and-node-slice.json").swap_remove(0);
    own["metadata"]["name"] = json!("whereabouts-own");
    own["spec"]["config"] = json!(own["spec"]["config"].as_str().unwrap().replace(
        "\"range\": \"192.168.2.225/28\"",
        "\"range\": \"192.168.2.230-192.168.2.250/24\", \"enable_overlapping_ranges\": false"
    ));
    c.attachments.push(own);
    c.config_maps[0]["data"]["range-global"] = json!("192.168.1.1-192.168.1.2");
    c
}

fn audit(args: &[&str]) -> Output {
    Command::new(ipshadow_bin())
        .arg("audit")
        .args(args)
        .output()
        .unwrap()
}

/// (object to change, other object, addresses shared) of every overlap.
fn overlaps(v: &Value) -> BTreeSet<[String; 3]> {
    v["address_plan"]["overlaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let s = |v: &Value| v.as_str().unwrap().to_owned();
            [
                format!("{} {}", s(&o["change"]["kind"]), s(&o["change"]["object"])),
                format!("{} {}", s(&o["other"]["kind"]), s(&o["other"]["object"])),
                s(&o["shared"]),
            ]
        })
        .collect()
}

fn want() -> BTreeSet<[String; 3]> {
    [
        [
            "IPAddressPool metallb-system/inside-calico",
            "IPPool default-pool",
            "10.233.100.0..10.233.100.255",
        ],
        [
            "CiliumLoadBalancerIPPool blue-pool",
            "Node worker-c",
            "20.0.20.150",
        ],
        [
            "ConfigMap kube-system/kubevip",
            "Node worker-a",
            "192.168.1.2",
        ],
        [
            "ServiceCIDR newcidr1",
            "Node worker-c",
            "10.96.0.0..10.96.0.255",
        ],
        // The default ServiceCIDR, inside the newer one, over it too.
        [
            "ServiceCIDR kubernetes",
            "Node worker-c",
            "10.96.0.0..10.96.0.15",
        ],
        // The README's attachments share their reservations with each
        // other, not with the third: it overlaps both (whereabouts never gives
        // a range's first or last address: .225-.238 of the /28).
        [
            "NetworkAttachmentDefinition whereabouts-conf",
            "NetworkAttachmentDefinition whereabouts-own",
            "192.168.2.230..192.168.2.238",
        ],
        [
            "NetworkAttachmentDefinition whereabouts-fast-ipam",
            "NetworkAttachmentDefinition whereabouts-own",
            "192.168.2.230..192.168.2.250",
        ],
    ]
    .into_iter()
    .map(|r| r.map(str::to_owned))
    .collect()
}

/// The audit of `c` from the test API server, as JSON.
fn from_api(c: &Cluster) -> (Option<i32>, Value) {
    from_api_forbidding(c, &[])
}

/// [`from_api`] with `forbidden` refused to the audit's lists (403), as RBAC
/// refuses a kind it grants no `list` on.
fn from_api_forbidding(c: &Cluster, forbidden: &[Res]) -> (Option<i32>, Value) {
    let api = ApiServer::start(None);
    for res in forbidden {
        api.forbid_list(*res);
    }
    for res in [
        Res::IpamBlocks,
        Res::IpAddressPools,
        Res::LbIpPools,
        Res::ServiceCidrs,
        Res::NetAttachDefs,
    ] {
        api.set_crd(res, true);
    }
    api.apply_all(&[
        (Res::Nodes, &c.nodes[..]),
        (Res::Pods, &c.pods[..]),
        (Res::IpPools, &c.calico_pools[..]),
        (Res::IpAddressPools, &c.metallb[..]),
        (Res::LbIpPools, &c.cilium_lb[..]),
        (Res::ServiceCidrs, &c.service_cidrs[..]),
        (Res::NetAttachDefs, &c.attachments[..]),
        (Res::ConfigMaps, &c.config_maps[..]),
        (Res::Services, &c.services[..]),
    ]);
    let dir = ipshadow_tests::TempDir::new("address-plan-api");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let out = audit(&["--kubeconfig", kubeconfig.to_str().unwrap(), "-o", "json"]);
    (out.status.code(), ipshadow_tests::json_stdout(&out))
}

/// The audit of `c` from files, the plan's objects in two files.
fn from_files(c: &Cluster) -> (Option<i32>, Value) {
    let dir = ipshadow_tests::TempDir::new("address-plan-files");
    let path = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    write_list(&dir.join("pods.json"), &c.pods);
    write_list(&dir.join("nodes.json"), &c.nodes);
    write_list(&dir.join("ippools.json"), &c.calico_pools);
    write_list(
        &dir.join("lb.json"),
        [&c.metallb[..], &c.cilium_lb[..]].concat(),
    );
    write_list(
        &dir.join("rest.json"),
        [
            &c.service_cidrs[..],
            &c.attachments[..],
            &c.config_maps[..],
            &c.services[..],
        ]
        .concat(),
    );
    let plan = format!("{},{}", path("lb.json"), path("rest.json"));
    let out = audit(&[
        "--pods",
        &path("pods.json"),
        "--nodes",
        &path("nodes.json"),
        "--ippools",
        &path("ippools.json"),
        "--address-plan",
        &plan,
        "-o",
        "json",
    ]);
    (out.status.code(), ipshadow_tests::json_stdout(&out))
}

#[test]
fn a_healthy_plan_of_every_kind_gives_nothing_from_the_api_and_from_files() {
    let c = healthy();
    for (code, v) in [from_api(&c), from_files(&c)] {
        assert_eq!(overlaps(&v), BTreeSet::new(), "{v:#}");
        assert_eq!(v["findings"], 0, "{v:#}");
        assert_eq!(code, Some(0), "{v:#}");
        // Every range was read: 2 podCIDRs, 2 addresses, Calico's pool, MetalLB's
        // range, Cilium's 4 blocks, 2 ServiceCIDRs, 3 attachments, kube-vip's 5
        // pools (not the other ConfigMap's, not the `kubernetes` Service's IP).
        assert_eq!(v["address_plan"]["ranges_checked"], 20, "{v:#}");
    }
}

#[test]
fn a_kind_the_audit_may_not_list_is_named_unchecked_and_the_rest_of_the_plan_stands() {
    // MetalLB's pools forbidden: their overlap is not found, and the plan says
    // why it is partial; every other overlap still is.
    let (code, v) = from_api_forbidding(&broken(), &[Res::IpAddressPools]);
    let plan = &v["address_plan"];
    assert_eq!(
        plan["not_listed"],
        json!([{"resource": "ipaddresspools.metallb.io",
                "reason": "forbidden (`kubectl auth can-i list ipaddresspools.metallb.io`)"}]),
        "{v:#}"
    );
    let others: BTreeSet<_> = want()
        .into_iter()
        .filter(|w| !w[0].starts_with("IPAddressPool ") && !w[1].starts_with("IPAddressPool "))
        .collect();
    assert!(!others.is_empty());
    assert_eq!(overlaps(&v), others, "{v:#}");
    assert_eq!(code, Some(1));
}

#[test]
fn each_overlap_that_will_collide_is_named_on_both_sides_from_the_api_and_from_files() {
    let c = broken();
    for (code, v) in [from_api(&c), from_files(&c)] {
        assert_eq!(overlaps(&v), want(), "{v:#}");
        assert_eq!(code, Some(1));
        let kinds: Vec<[&str; 3]> = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|n| n["findings"].as_array().unwrap())
            .map(|f| {
                [
                    f["kind"].as_str().unwrap(),
                    f["pod"]["name"].as_str().unwrap(),
                    f["ip"].as_str().unwrap(),
                ]
            })
            .collect();
        assert_eq!(
            kinds,
            [[
                "DuplicateSecondaryIP",
                "instance-manager-bb",
                "192.168.50.3"
            ]],
            "{v:#}"
        );
        for o in v["address_plan"]["overlaps"].as_array().unwrap() {
            let m = o["message"].as_str().unwrap();
            let changed = o["change"]["object"].as_str().unwrap();
            // The fix names the object to change, in that kind's terms.
            let kind = o["change"]["kind"].as_str().unwrap();
            let fix = m.split_once("Fix: ").unwrap().1;
            assert!(fix.contains(&format!("{kind} {changed}")), "{m}");
            assert!(m.contains(o["other"]["object"].as_str().unwrap()), "{m}");
        }
    }
}

#[test]
fn without_service_cidrs_a_pool_over_the_kubernetes_services_cluster_ip_is_found() {
    let mut c = healthy();
    c.service_cidrs.clear();
    let mut over = real("metallb/ipaddresspool-metallb-docs-l2-range-only.json");
    over[0]["metadata"]["name"] = json!("over-services");
    over[0]["spec"]["addresses"] = json!(["10.96.0.0/30"]);
    c.metallb.extend(over);
    let want: BTreeSet<[String; 3]> = [[
        "IPAddressPool metallb-system/over-services",
        "Service default/kubernetes",
        "10.96.0.1",
    ]
    .map(str::to_owned)]
    .into();
    for (code, v) in [from_api(&c), from_files(&c)] {
        assert_eq!(overlaps(&v), want, "{v:#}");
        assert_eq!(code, Some(1));
    }
}

#[path = "address_plan/owners.rs"]
mod owners;
