//! Calico's IPAMBlocks against its nodes' tunnel addresses, with no node's
//! kernel (as `audit` and `check` with files see them). Shapes from real
//! objects: block 192.168.185.0/26 with `vxlan-tunnel-addr-mac-k8s` at ordinal
//! 0 (the zhongmingmao block), and calico#3589's `tunl0` at 100.66.141.153,
//! the 26th address of block 100-66-141-128-26 and not its first.

use std::sync::Arc;

use super::{row, rows};
use crate::{
    detect::{
        Cause, FindingKind::*, NodeProblem, Remedy, Scope::*, TunnelAllocation, audit::audit,
        detect,
    },
    inventory::{
        CalicoIpam, ClusterState, CniNode, Inventory, IpPool, IpamBlock, IpamOwner, NodeFacts,
        Role::Tunnel,
        Source, TunnelKind,
        fixtures::{ME, OTHER, ip, net, pod},
    },
};

pub(super) fn tunnel(node: &str, kind: TunnelKind) -> IpamOwner {
    IpamOwner::Tunnel {
        node: node.into(),
        kind,
    }
}

fn web() -> IpamOwner {
    IpamOwner::Pod {
        namespace: "tenant".into(),
        name: "web".into(),
    }
}

pub(super) fn block(cidr: &str, node: &str, allocated: Vec<(u32, IpamOwner)>) -> IpamBlock {
    IpamBlock {
        name: cidr.replace(['.', '/'], "-"),
        cidr: net(cidr),
        node: Some(node.into()),
        allocated,
        listed: true,
    }
}

pub(super) fn pool() -> IpPool {
    IpPool {
        name: "default-ipv4-ippool".into(),
        cidr: net("192.168.0.0/16"),
        block_size: Some(26),
        disabled: false,
        workloads: true,
        load_balancer: false,
    }
}

/// Node `ME` announcing `announced` as its VXLAN address, the blocks, and pods.
pub(super) fn inventory(
    announced: &str,
    blocks: Vec<IpamBlock>,
    pods: Vec<crate::inventory::Pod>,
) -> Inventory {
    let mut annotated = CniNode {
        name: ME.into(),
        ..CniNode::default()
    };
    annotated.add(ip(announced), Tunnel, Source::CalicoNodeAnnotation);
    Inventory {
        node: ME.into(),
        node_facts: Some(NodeFacts {
            name: ME.into(),
            pod_cidrs: vec![net("10.244.4.0/24")],
            calico_annotated: true,
            ..NodeFacts::default()
        }),
        cluster: ClusterState {
            pods: Arc::new(pods),
            annotated_nodes: Arc::new(vec![annotated]),
            calico: Arc::new(CalicoIpam::new(blocks, vec![pool()])),
            ..Default::default()
        },
        ..Inventory::default()
    }
}

/// What IPAM says of each `UnallocatedTunnelAddress`.
pub(super) fn stale(inv: &Inventory) -> Vec<TunnelAllocation> {
    detect(inv)
        .into_iter()
        .filter(|f| f.kind == UnallocatedTunnelAddress)
        .map(|f| {
            assert!(f.is_node_level(), "{f:?}");
            assert_eq!(f.owner.node, ME);
            assert!(matches!(f.remedy, Remedy::Calico(_)), "{f:?}");
            match f.cause {
                Cause::Node(NodeProblem::Calico(a)) => a,
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

#[test]
fn a_tunnel_address_ipam_allocates_to_its_node_and_pods_on_their_own_give_nothing() {
    let blocks = vec![block(
        "192.168.185.0/26",
        ME,
        vec![(0, tunnel(ME, TunnelKind::Vxlan)), (16, web())],
    )];
    let inv = inventory(
        "192.168.185.0",
        blocks,
        vec![pod("web", ME, &["192.168.185.16"])],
    );
    assert_eq!(detect(&inv), []);
    // A VXLAN address in a block another node is affine to (borrowed,
    // calico#6160) is still this node's: the allocation says so.
    let blocks = vec![block(
        "192.168.185.0/26",
        OTHER,
        vec![(0, tunnel(ME, TunnelKind::Vxlan))],
    )];
    assert_eq!(stale(&inventory("192.168.185.0", blocks, vec![])), []);
}

#[test]
fn a_stale_tunnel_address_is_found_however_ipam_holds_it() {
    let b = "192-168-185-0-26".to_owned();
    for (owner, want) in [
        (None, TunnelAllocation::Free { block: b.clone() }),
        (
            Some(web()),
            TunnelAllocation::Pod {
                block: b.clone(),
                pod: "tenant/web".into(),
            },
        ),
        (
            Some(tunnel(OTHER, TunnelKind::Vxlan)),
            TunnelAllocation::OtherTunnel {
                block: b.clone(),
                node: OTHER.into(),
                device: "vxlan.calico",
            },
        ),
        (
            Some(IpamOwner::Other { handle: None }),
            TunnelAllocation::Other {
                block: b.clone(),
                handle: None,
            },
        ),
    ] {
        let blocks = vec![block(
            "192.168.185.0/26",
            ME,
            owner.into_iter().map(|o| (0, o)).collect(),
        )];
        assert_eq!(stale(&inventory("192.168.185.0", blocks, vec![])), [want]);
    }
    // In no block, but in an enabled pool: Calico may carve a block there.
    let blocks = vec![block("192.168.185.0/26", ME, vec![])];
    assert_eq!(
        stale(&inventory("192.168.186.1", blocks, vec![])),
        [TunnelAllocation::NoBlock {
            pool: "default-ipv4-ippool".into()
        }]
    );
}

/// A block that lists no allocations (absent, null or empty `allocations`)
/// is unknown, not free: its addresses are left unchecked, where a listed
/// block without the address says it is free.
#[test]
fn a_block_that_lists_no_allocations_leaves_its_addresses_unchecked_never_free() {
    let unlisted = IpamBlock {
        listed: false,
        ..block("192.168.185.0/26", ME, vec![])
    };
    let inv = inventory("192.168.185.0", vec![unlisted.clone()], vec![]);
    assert_eq!(
        inv.cluster.calico.allocation(ip("192.168.185.0")),
        Some(crate::inventory::Allocation::Unknown(&unlisted))
    );
    assert_eq!(stale(&inv), []);
    let listed = vec![block("192.168.185.0/26", ME, vec![])];
    assert_eq!(
        stale(&inventory("192.168.185.0", listed, vec![])),
        [TunnelAllocation::Free {
            block: "192-168-185-0-26".into()
        }]
    );
}

#[test]
fn a_pod_on_a_stale_tunnel_address_is_the_pods_collision_besides_the_nodes_finding() {
    let blocks = vec![block("192.168.185.0/26", ME, vec![(0, web())])];
    let inv = inventory(
        "192.168.185.0",
        blocks,
        vec![pod("web", ME, &["192.168.185.0"])],
    );
    let mut got = rows(&detect(&inv));
    got.sort();
    assert_eq!(
        got,
        [
            row(
                TunnelIpCollision,
                SameNode,
                "192.168.185.0",
                "web",
                ME,
                Tunnel,
                None
            ),
            row(
                UnallocatedTunnelAddress,
                SameNode,
                "192.168.185.0",
                "",
                ME,
                Tunnel,
                None
            ),
        ]
    );
}

#[test]
fn look_alikes_give_nothing() {
    // No blocks read: the agent, or `check` without --ipamblocks.
    assert_eq!(stale(&inventory("192.168.185.0", vec![], vec![])), []);
    // host-local IPAM (usePodCIDR): the tunnel address comes from the
    // podCIDR, which no block holds.
    let blocks = vec![block("192.168.185.0/26", OTHER, vec![])];
    let mut inv = inventory("10.244.4.1", blocks.clone(), vec![]);
    Arc::make_mut(&mut inv.cluster.calico).pools.push(IpPool {
        cidr: net("10.244.0.0/16"),
        ..pool()
    });
    assert_eq!(stale(&inv), []);
    // Outside every block and pool: not Calico's IPAM.
    assert_eq!(stale(&inventory("172.16.0.1", blocks.clone(), vec![])), []);
    // A disabled pool allocates nothing.
    let mut inv = inventory("192.168.186.1", blocks, vec![]);
    Arc::make_mut(&mut inv.cluster.calico).pools[0].disabled = true;
    assert_eq!(stale(&inv), []);
}

/// calico#3589: `tunl0` on the 26th address of one of the node's two blocks.
fn issue3589_blocks() -> Vec<IpamBlock> {
    vec![
        block(
            "100.66.141.128/26",
            ME,
            vec![(0, web()), (25, tunnel(ME, TunnelKind::Ipip))],
        ),
        block("100.66.141.192/26", ME, vec![]),
    ]
}

#[test]
fn a_pod_on_a_blocks_tunnel_address_is_found_on_both_sides_though_not_the_first_and_not_annotated()
{
    let pods = vec![
        pod("crashing", ME, &["100.66.141.153"]),
        pod("elsewhere", OTHER, &["100.66.141.153"]),
        pod("fine", ME, &["100.66.141.128"]),
    ];
    let inv = Inventory {
        node: ME.into(),
        cluster: ClusterState {
            pods: Arc::new(pods),
            calico: Arc::new(CalicoIpam::new(issue3589_blocks(), vec![])),
            ..Default::default()
        },
        ..Inventory::default()
    };
    let findings = detect(&inv);
    let mut got = rows(&findings);
    got.sort();
    assert_eq!(
        got,
        [
            row(
                TunnelIpCollision,
                SameNode,
                "100.66.141.153",
                "crashing",
                ME,
                Tunnel,
                None
            ),
            row(
                TunnelIpCollision,
                CrossNode,
                "100.66.141.153",
                "elsewhere",
                ME,
                Tunnel,
                None
            ),
        ]
    );
    for f in &findings {
        assert_eq!(f.owner.source, Source::CalicoIpamBlock);
        assert!(matches!(f.remedy, Remedy::CheckCalicoIpam { ref node } if node == ME));
    }
}

#[test]
fn the_audit_finds_the_blocks_collisions_and_stale_addresses_under_each_pods_node() {
    let mut annotated = CniNode {
        name: OTHER.into(),
        ..CniNode::default()
    };
    // OTHER announces an address its block left unallocated.
    annotated.add(ip("100.66.141.200"), Tunnel, Source::CalicoNodeAnnotation);
    let mut blocks = issue3589_blocks();
    blocks[1]
        .allocated
        .push((1, tunnel(OTHER, TunnelKind::Wireguard)));
    let state = ClusterState {
        pods: Arc::new(vec![
            pod("crashing", ME, &["100.66.141.153"]),
            pod("remote", ME, &["100.66.141.193"]),
        ]),
        annotated_nodes: Arc::new(vec![annotated]),
        calico: Arc::new(CalicoIpam::new(blocks, vec![])),
        ..ClusterState::default()
    };
    let result = audit(&state, "cilium_host", &mut |_, _| {});
    // A pod on its own node's tunnel address is as urgent as on Cilium's router IP.
    assert_eq!(crate::detect::audit::rank(&result.nodes[0].findings[0]), 0);
    let mut got: Vec<_> = result
        .nodes
        .iter()
        .flat_map(|n| {
            rows(&n.findings)
                .into_iter()
                .map(move |r| (n.node.clone(), r))
        })
        .collect();
    got.sort();
    let at = |node: &str, r| (node.to_owned(), r);
    assert_eq!(
        got,
        [
            at(
                ME,
                row(
                    TunnelIpCollision,
                    SameNode,
                    "100.66.141.153",
                    "crashing",
                    ME,
                    Tunnel,
                    None
                )
            ),
            at(
                ME,
                row(
                    TunnelIpCollision,
                    CrossNode,
                    "100.66.141.193",
                    "remote",
                    OTHER,
                    Tunnel,
                    None
                )
            ),
            at(
                OTHER,
                row(
                    UnallocatedTunnelAddress,
                    SameNode,
                    "100.66.141.200",
                    "",
                    OTHER,
                    Tunnel,
                    None
                )
            ),
        ]
    );
}
