//! Calico's enabled IPPools as pod ranges: what a tenant can write (kubelet's
//! Event naming an address) outside every range a pod allocator hands out is
//! refused outright, a forgery finding nothing.

use std::sync::Arc;

use super::{
    calico_ipam::{block, pool, tunnel},
    row, rows,
};
use crate::{
    detect::{FindingKind::TunnelIpCollision, Scope::*, Trust, detect},
    inventory::{
        CalicoIpam, ClusterState, Inventory, IpSource, Pod, PodIp,
        Role::Tunnel,
        TunnelKind,
        fixtures::{ME, OTHER, ip, pod},
    },
};

/// A pod waiting for an address, kubelet's Event naming `a`.
fn refused(a: &str) -> Pod {
    Pod {
        ips: vec![PodIp {
            ip: ip(a),
            source: IpSource::Event,
        }],
        phase: Some("Pending".into()),
        ..pod("waiting", ME, &[])
    }
}

#[test]
fn calicos_pools_are_pod_ranges_so_a_refusal_naming_an_address_outside_them_is_forged() {
    // A block left outside every pool (its pool deleted) still names a tunnel there.
    let blocks = || {
        vec![
            block(
                "192.168.185.0/26",
                ME,
                vec![(0, tunnel(ME, TunnelKind::Vxlan))],
            ),
            block(
                "172.16.0.0/26",
                OTHER,
                vec![(9, tunnel(OTHER, TunnelKind::Vxlan))],
            ),
        ]
    };
    let with_pool = |a: &str| Inventory {
        node: ME.into(),
        cluster: ClusterState {
            pods: Arc::new(vec![refused(a)]),
            calico: Arc::new(CalicoIpam::new(blocks(), vec![pool()])),
            ..Default::default()
        },
        ..Inventory::default()
    };
    // Outside every pool and block: refused outright, whatever it names.
    assert_eq!(detect(&with_pool("172.31.0.9")), []);
    // In a live block outside every pool (its pool deleted, pods still there):
    // looked into, and it collides.
    assert_eq!(
        rows(&detect(&with_pool("172.16.0.9"))),
        [row(
            TunnelIpCollision,
            CrossNode,
            "172.16.0.9",
            "waiting",
            OTHER,
            Tunnel,
            None
        )]
    );
    // Inside the pool, on the block's tunnel address: the collision, as a hint.
    let found = detect(&with_pool("192.168.185.0"));
    assert_eq!(
        rows(&found),
        [row(
            TunnelIpCollision,
            SameNode,
            "192.168.185.0",
            "waiting",
            ME,
            Tunnel,
            None
        )]
    );
    assert_eq!(found[0].trust, Trust::Hint);
}

#[test]
fn a_pool_for_no_workload_and_its_blocks_are_no_pod_range() {
    // A LoadBalancer pool (Calico's LB IPAM) with a block: Services'
    // addresses, never a pod's.
    let lb = crate::inventory::IpPool {
        name: "lb-pool".into(),
        cidr: crate::inventory::fixtures::net("172.20.0.0/24"),
        workloads: false,
        ..pool()
    };
    let blocks = vec![
        block("172.20.0.0/26", OTHER, vec![]),
        block("192.168.185.0/26", ME, vec![]),
    ];
    let ipam = CalicoIpam::new(blocks, vec![pool(), lb]);
    let ranges: Vec<String> = ipam.pod_ranges().map(|r| r.to_string()).collect();
    assert_eq!(ranges, ["192.168.0.0/16", "192.168.185.0/26"]);
}

#[test]
fn pools_refuse_addresses_outside_them_only_where_calicos_ipam_is_seen_in_use() {
    // The agent's view (IPPools, no blocks) of a Canal node: Calico's default
    // pool exists, pods get flannel's host-local addresses. A refusal naming
    // another node's tunnel address outside the pool is still looked into.
    let mut other = crate::inventory::CniNode {
        name: OTHER.into(),
        ..crate::inventory::CniNode::default()
    };
    other.add(
        ip("10.42.7.1"),
        Tunnel,
        crate::inventory::Source::CalicoNodeAnnotation,
    );
    let mut inv = Inventory {
        node: ME.into(),
        cluster: ClusterState {
            pods: Arc::new(vec![refused("10.42.7.1"), pod("web", ME, &["10.42.3.7"])]),
            annotated_nodes: Arc::new(vec![other]),
            calico: Arc::new(CalicoIpam::new(vec![], vec![pool()])),
            ..Default::default()
        },
        ..Inventory::default()
    };
    assert_eq!(
        rows(&detect(&inv)),
        [row(
            TunnelIpCollision,
            CrossNode,
            "10.42.7.1",
            "waiting",
            OTHER,
            Tunnel,
            None
        )]
    );
    // This node's pod got its address from the pool: Calico's IPAM is in
    // use, and an address outside its pools is no pod's.
    inv.cluster.pods = Arc::new(vec![refused("10.42.7.1"), pod("web", ME, &["192.168.3.7"])]);
    assert_eq!(detect(&inv), []);
}

#[test]
fn calicos_ipam_is_in_use_by_a_pod_block_this_nodes_pods_or_tunnel_only() {
    let lb = crate::inventory::IpPool {
        name: "lb-pool".into(),
        cidr: crate::inventory::fixtures::net("172.20.0.0/24"),
        workloads: false,
        ..pool()
    };
    let with = |blocks: Vec<crate::inventory::IpamBlock>, pods: Vec<Pod>, tunnel: Option<&str>| {
        let mut host = crate::inventory::HostNetwork::default();
        host.addresses
            .extend(tunnel.map(|a| crate::inventory::LocalAddress {
                ip: ip(a),
                device: "vxlan.calico".into(),
            }));
        Inventory {
            node: ME.into(),
            host: Arc::new(host),
            cluster: ClusterState {
                pods: Arc::new(pods),
                calico: Arc::new(CalicoIpam::new(blocks, vec![pool(), lb.clone()])),
                ..Default::default()
            },
            ..Inventory::default()
        }
        .calico_pod_ranges()
        .count()
            > 0
    };
    let in_pool = || pod("web", ME, &["192.168.3.7"]);
    // Evidence.
    assert!(with(
        vec![block("192.168.185.0/26", OTHER, vec![])],
        vec![],
        None
    ));
    assert!(
        with(vec![block("10.9.0.0/26", OTHER, vec![])], vec![], None),
        "a deleted pool's block"
    );
    assert!(with(vec![], vec![in_pool()], None));
    assert!(with(vec![], vec![], Some("192.168.200.0")));
    // No evidence: a LoadBalancer pool's block, pods not given a pool's address here.
    assert!(!with(
        vec![block("172.20.0.0/26", OTHER, vec![])],
        vec![],
        None
    ));
    assert!(!with(vec![], vec![], None));
    assert!(!with(vec![], vec![pod("web", ME, &["10.42.3.7"])], None));
    assert!(!with(
        vec![],
        vec![pod("web", OTHER, &["192.168.3.7"])],
        None
    ));
    let host_network = Pod {
        host_network: true,
        ..in_pool()
    };
    let multus = Pod {
        default_network_elsewhere: true,
        ..in_pool()
    };
    assert!(!with(vec![], vec![host_network], None));
    assert!(!with(vec![], vec![multus], None));
}
