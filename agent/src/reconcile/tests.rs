//! `claimable`: which of this node's local addresses a pod elsewhere could be
//! given, for each CNI's way of saying where its pods' addresses come from.

use std::{collections::BTreeMap, collections::BTreeSet, net::IpAddr, sync::Arc};

use super::claimable;
use crate::{
    inventory::{
        CniNode, HostNetwork, Inventory, LocalAddress, NodeFacts, Role, Source, Subnet,
        fixtures::{ME, OTHER, ip, net},
    },
    kube::objects::node_annotations,
};

/// This node's Node annotations as the agent reads them (real values:
/// ovn-kubernetes' from OKEP-5521's kind worker, Calico's from calico#9086).
fn annotated(key: &str, value: &str) -> CniNode {
    let annotations = BTreeMap::from([(key.to_owned(), value.to_owned())]);
    let mut problems = Vec::new();
    let node = node_annotations(ME, &annotations, &mut problems).expect("addresses read");
    assert!(problems.is_empty(), "{problems:?}");
    node
}

/// This node with `addresses` (address, device) in its kernel.
fn node(addresses: &[(&str, &str)]) -> Inventory {
    let mut host = HostNetwork::default();
    for (a, device) in addresses {
        host.addresses.push(LocalAddress {
            ip: ip(a),
            device: (*device).into(),
        });
    }
    Inventory {
        node: ME.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(host),
        ..Inventory::default()
    }
}

fn set(ips: &[&str]) -> BTreeSet<IpAddr> {
    ips.iter().map(|a| ip(a)).collect()
}

/// One case: what it shows, the node's addresses (address, device) beside
/// [`BASE`], what is read besides the kernel, and the addresses claimable.
type Case = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    fn(&mut Inventory),
    Vec<&'static str>,
);

/// Addresses every case's node holds: the uplink, loopback, and a link-local
/// address on a CNI's device, none of which a pod is given.
const BASE: [(&str, &str); 3] = [
    ("172.18.0.3", "eth0"),
    ("127.0.0.1", "lo"),
    ("fe80::1", "tunl0"),
];

/// Another node whose ovn-kubernetes subnet, 10.244.9.0/24, its Node's
/// annotation names.
fn other_ovn_node(inv: &mut Inventory) {
    let mut other = annotated("k8s.ovn.org/node-subnets", r#"{"default":"10.244.9.0/24"}"#);
    other.name = OTHER.into();
    inv.cluster.annotated_nodes = Arc::new(vec![other]);
}

/// Ranges from the Node, kube-ovn and Cilium.
fn range_cases() -> Vec<Case> {
    vec![
        (
            "nothing read: nothing of the uplink",
            vec![],
            |_| {},
            vec![],
        ),
        (
            "Node spec.podCIDRs (bridge CNIs): the bridge's gateway",
            vec![("10.244.5.1", "br-x")],
            |inv| {
                inv.node_facts = Some(NodeFacts {
                    name: ME.into(),
                    pod_cidrs: vec![net("10.244.5.0/24")],
                    ..NodeFacts::default()
                });
            },
            vec!["10.244.5.1"],
        ),
        (
            "kube-ovn: a primary Subnet, not a secondary network's",
            vec![("10.16.0.9", "ovn0"), ("192.168.50.2", "net1-host")],
            |inv| {
                let subnet = |name: &str, cidr: &str, primary| Subnet {
                    name: name.into(),
                    primary,
                    cidrs: vec![net(cidr)],
                    exclude: vec![],
                    masqueraded: true,
                    is_default: false,
                };
                inv.cluster.subnets = Arc::new(vec![
                    subnet("ovn-default", "10.16.0.0/16", true),
                    subnet("macvlan", "192.168.50.0/24", false),
                ]);
            },
            vec!["10.16.0.9"],
        ),
        (
            "Cilium: its CiliumNode's podCIDRs and router IP",
            vec![("10.0.1.77", "cilium_host"), ("10.0.1.5", "eth1")],
            |inv| {
                let mut cn = CniNode {
                    name: ME.into(),
                    pod_cidrs: vec![net("10.0.1.0/24")],
                    ..CniNode::default()
                };
                cn.add(ip("10.0.1.77"), Role::Router, Source::SpecAddresses);
                inv.cluster.cilium_nodes = Arc::new(vec![cn]);
            },
            vec!["10.0.1.77", "10.0.1.5"],
        ),
    ]
}

/// ovn-kubernetes' and Calico's addresses, and another node's annotations.
fn annotation_cases() -> Vec<Case> {
    vec![
        (
            "ovn-kubernetes: any local address in its node subnet (the hybrid overlay's .3), \
         the management port on its old name",
            vec![
                ("10.244.2.2", "k8s-node-a"),
                ("10.244.2.3", "ext-vxlan"),
                ("10.244.3.9", "eth2"),
            ],
            |inv| {
                inv.cluster.annotated_nodes = Arc::new(vec![annotated(
                    "k8s.ovn.org/node-subnets",
                    r#"{"default":["10.244.2.0/24"]}"#,
                )]);
            },
            vec!["10.244.2.2", "10.244.2.3"],
        ),
        (
            "ovn-kubernetes: the management port alone, no annotation read (its old name, this \
         node's)",
            vec![("10.244.2.2", "k8s-node-a"), ("10.244.8.2", "k8s-node-b")],
            |_| {},
            vec!["10.244.2.2"],
        ),
        (
            "Calico: the tunnel address its annotation names, in Calico's pool",
            vec![("10.233.67.0", "vxlan.calico")],
            |inv| {
                inv.cluster.annotated_nodes = Arc::new(vec![annotated(
                    "projectcalico.org/IPv4VXLANTunnelAddr",
                    "10.233.67.0",
                )]);
            },
            vec!["10.233.67.0"],
        ),
        (
            "Calico: a tunnel address no annotation names (a stale one, calico/node#254)",
            vec![("10.42.0.1", "tunl0"), ("10.42.0.9", "eth3")],
            |inv| {
                inv.cluster.annotated_nodes = Arc::new(vec![annotated(
                    "projectcalico.org/IPv4IPIPTunnelAddr",
                    "10.42.7.1",
                )]);
            },
            vec!["10.42.0.1"],
        ),
        (
            "kube-ipvs0: a Service address in another node's pod range (a pod there may hold \
         it), not a ClusterIP outside every pod range",
            vec![
                ("10.244.9.50", "kube-ipvs0"),
                ("10.96.0.10", "kube-ipvs0"),
                ("10.244.9.51", "eth4"),
            ],
            other_ovn_node,
            vec!["10.244.9.50"],
        ),
        (
            "kube-ipvs0: not a ClusterIP inside Cilium's default 10.0.0.0/8 pool that no \
             node's range covers (kubeadm's 10.96.0.0/12): only what pods are given counts",
            vec![("10.0.1.7", "kube-ipvs0"), ("10.96.0.10", "kube-ipvs0")],
            |inv| {
                let mut other = CniNode {
                    name: OTHER.into(),
                    pod_cidrs: vec![net("10.0.1.0/24")],
                    ..CniNode::default()
                };
                other.add(ip("10.0.1.1"), Role::Router, Source::SpecAddresses);
                inv.cluster.cilium_nodes = Arc::new(vec![other]);
                inv.cluster.cilium_config = Some(Arc::new(crate::inventory::CiliumConfig {
                    cluster_pool: vec![net("10.0.0.0/8")],
                    ..crate::inventory::CiliumConfig::default()
                }));
            },
            vec!["10.0.1.7"],
        ),
        (
            "another node's annotations say nothing of this node's addresses",
            vec![("10.244.9.2", "eth4")],
            other_ovn_node,
            vec![],
        ),
    ]
}

/// Service addresses on kube-ipvs0, one in Calico's default pool, one in a
/// LoadBalancer pool, and the uplink's address in the default pool.
fn calico_vips() -> Vec<(&'static str, &'static str)> {
    vec![
        ("192.168.1.240", "kube-ipvs0"),
        ("172.20.0.5", "kube-ipvs0"),
        ("192.168.7.3", "eth4"),
    ]
}

/// Calico's default pool and a LoadBalancer pool; a pod of this node on `pod_ip`.
fn calico_pools(inv: &mut Inventory, pod_ip: &str) {
    let pool = |name: &str, cidr: &str, workloads| crate::inventory::IpPool {
        name: name.into(),
        cidr: net(cidr),
        block_size: None,
        disabled: false,
        workloads,
        load_balancer: !workloads,
    };
    inv.cluster.calico = Arc::new(crate::inventory::CalicoIpam::new(
        vec![],
        vec![
            pool("default-ipv4-ippool", "192.168.0.0/16", true),
            pool("lb", "172.20.0.0/24", false),
        ],
    ));
    inv.cluster.pods = Arc::new(vec![crate::inventory::fixtures::pod("web", ME, &[pod_ip])]);
}

/// Services' addresses in Calico's pools; NodeLocal DNSCache's.
fn vip_cases() -> Vec<Case> {
    vec![
        (
            "nodelocaldns: a listen address set inside another node's pod range (a pod there may \
             hold it), not the link-local default",
            vec![
                ("10.244.9.60", "nodelocaldns"),
                ("169.254.20.10", "nodelocaldns"),
            ],
            other_ovn_node,
            vec!["10.244.9.60"],
        ),
        (
            "kube-ipvs0: a LoadBalancer IP in Calico's pool for workloads, where this node's pods \
             have addresses from it (Calico may give it to a pod); not one in a LoadBalancer \
             pool; nor the uplink's address in the pool",
            calico_vips(),
            |inv| calico_pools(inv, "192.168.185.7"),
            vec!["192.168.1.240"],
        ),
        (
            "kube-ipvs0: Calico's pool where this node has no pod but a VXLAN tunnel address \
             from it (a control-plane node)",
            vec![
                ("192.168.1.240", "kube-ipvs0"),
                ("192.168.200.0", "vxlan.calico"),
            ],
            |inv| calico_pools(inv, "172.18.0.3"),
            vec!["192.168.1.240", "192.168.200.0"],
        ),
        (
            "kube-ipvs0: nothing of Calico's pools where this node's pods have host-local \
             addresses (Canal: Calico's default pool, flannel's podCIDR)",
            calico_vips(),
            |inv| calico_pools(inv, "10.42.3.7"),
            vec![],
        ),
    ]
}

#[test]
fn claimable_covers_every_cnis_pod_ranges_and_node_held_addresses() {
    let cases = range_cases()
        .into_iter()
        .chain(annotation_cases())
        .chain(vip_cases());
    for (what, addresses, set_up, want) in cases {
        let mut all: Vec<(&str, &str)> = BASE.to_vec();
        all.extend(addresses);
        let mut inv = node(&all);
        set_up(&mut inv);
        assert_eq!(claimable(&inv), set(&want), "{what}");
    }
}
