//! Advice that fits Cilium's IPAM mode: exhaustion in a pool cilium-operator
//! fills, a new pool CIDR told from a mode switch, a cluster pool with room
//! for too few nodes.

use std::sync::Arc;

use super::*;
use crate::inventory::{
    CiliumConfig, CniNode, NodeFacts, SandboxFailure, SandboxRefusal,
    fixtures::{ME, OTHER, inventory, net, pod},
};

/// A pod of this node refused for want of an address, in a cluster whose
/// cilium-config says `ipam` (none read when empty).
fn exhausted(ipam: &str) -> Inventory {
    let mut p = pod("web", ME, &[]);
    p.phase = Some("Pending".into());
    let mut inv = inventory(vec![p]);
    inv.cluster.sandbox = Arc::new(vec![SandboxFailure {
        namespace: "tenant".into(),
        pod: "web".into(),
        uid: "uid-web".into(),
        refusal: SandboxRefusal::NoAddressLeft,
        count: 3,
        message: "postIpamFailure No more IPs available".into(),
    }]);
    if !ipam.is_empty() {
        inv.cluster.cilium_config = Some(Arc::new(CiliumConfig {
            ipam: ipam.into(),
            ..CiliumConfig::default()
        }));
    }
    inv
}

fn only(inv: &Inventory, kind: FindingKind) -> Finding {
    let f: Vec<Finding> = detect(inv).into_iter().filter(|f| f.kind == kind).collect();
    assert_eq!(f.len(), 1, "{f:#?}");
    f[0].clone()
}

#[test]
fn exhaustion_in_an_operator_filled_pool_asks_to_check_the_operator_not_the_node_range() {
    for ipam in ["eni", "azure", "crd", "alibabacloud"] {
        let f = only(&exhausted(ipam), PodIpExhaustion);
        assert_eq!(
            f.remedy,
            Remedy::CheckOperatorPool { node: ME.into() },
            "{ipam}"
        );
        assert!(
            matches!(
                f.cause,
                Cause::Node(NodeProblem::Exhausted {
                    ipam: IpamKind::OperatorPool,
                    ..
                })
            ),
            "{ipam}"
        );
    }
    for ipam in ["cluster-pool", "kubernetes", "multi-pool", ""] {
        let f = only(&exhausted(ipam), PodIpExhaustion);
        assert!(
            matches!(f.remedy, Remedy::AddCapacity { .. }),
            "{ipam}: {f:?}"
        );
    }
    // No cilium-config: the CiliumNode's own pool tells.
    let mut inv = exhausted("");
    Arc::make_mut(&mut inv.cluster.cilium_nodes)[0] = CniNode {
        name: ME.into(),
        operator_pool: true,
        ..CniNode::default()
    };
    let f = only(&inv, PodIpExhaustion);
    assert_eq!(f.remedy, Remedy::CheckOperatorPool { node: ME.into() });
}

/// cluster-pool 100.65.0.0/16 while the CiliumNode keeps 10.244.4.0/24; the
/// Node's own `spec.podCIDRs` as given.
fn stuck_with_node_cidrs(node_cidrs: Option<&[&str]>) -> Finding {
    let mut inv = inventory(vec![]);
    inv.cluster.cilium_config = Some(Arc::new(CiliumConfig {
        ipam: "cluster-pool".into(),
        cluster_pool: vec![net("100.65.0.0/16")],
        ..CiliumConfig::default()
    }));
    inv.node_facts = node_cidrs.map(|c| NodeFacts {
        name: ME.into(),
        pod_cidrs: c.iter().map(|c| net(c)).collect(),
        ..NodeFacts::default()
    });
    only(&inv, IpamMigrationStuck)
}

#[test]
fn a_new_pool_cidr_is_told_from_a_mode_switch_by_the_nodes_own_pod_cidrs() {
    // kubernetes mode copied the Node's podCIDR: the mode switched.
    let f = stuck_with_node_cidrs(Some(&["10.244.4.0/24"]));
    assert_eq!(
        f.remedy,
        Remedy::ClearPodCidrsAfterRollout { node: ME.into() }
    );
    // The Node has another range, or none: the old range came from a pool.
    for node_cidrs in [&["10.96.0.0/24"][..], &[]] {
        let f = stuck_with_node_cidrs(Some(node_cidrs));
        assert!(
            matches!(
                f.cause,
                Cause::Node(NodeProblem::MigrationStuck {
                    pool_change: true,
                    ..
                })
            ),
            "{f:?}"
        );
        assert_eq!(
            f.remedy,
            Remedy::KeepOldPoolOrReallocate {
                node: ME.into(),
                old: vec![net("10.244.4.0/24")]
            }
        );
    }
    // The Node unknown: the switch, as before.
    let f = stuck_with_node_cidrs(None);
    assert_eq!(
        f.remedy,
        Remedy::ClearPodCidrsAfterRollout { node: ME.into() }
    );
}

/// A cluster-pool cluster: pool 10.0.0.0/23, nodes with the given podCIDRs
/// (the last with the operator's "allocator full" when it has none), seen
/// from `me`; the mask from cilium-config when `mask` is set.
fn pool_cluster(me: &str, nodes: &[(&str, Option<&str>)], mask: Option<u8>) -> Inventory {
    let mut inv = inventory(vec![]);
    inv.node = me.into();
    inv.cluster.cilium_nodes = Arc::new(
        nodes
            .iter()
            .map(|(name, cidr)| CniNode {
                name: (*name).into(),
                pod_cidrs: cidr.iter().map(|c| net(c)).collect(),
                operator_error: cidr.is_none().then(|| "allocator full".to_owned()),
                ..CniNode::default()
            })
            .collect(),
    );
    inv.cluster.cilium_config = Some(Arc::new(CiliumConfig {
        ipam: "cluster-pool".into(),
        cluster_pool: vec![net("10.0.0.0/23")],
        ipv4_mask_size: mask,
        ..CiliumConfig::default()
    }));
    inv
}

#[test]
fn a_slash_23_pool_with_mask_24_holds_two_nodes_and_the_third_is_explained() {
    let three = [
        (ME, Some("10.0.0.0/24")),
        (OTHER, Some("10.0.1.0/24")),
        ("node-c", None),
    ];
    let fit = PoolFit {
        pools: vec![net("10.0.0.0/23")],
        mask: 24,
        mask_configured: true,
        holds: 2,
        nodes: 3,
    };
    // The latent finding once, from the node first by name.
    let f = only(&pool_cluster(ME, &three, Some(24)), ClusterPoolNearlyFull);
    assert_eq!(
        f.cause,
        Cause::Node(NodeProblem::PoolNearlyFull(fit.clone()))
    );
    assert_eq!(
        f.remedy,
        Remedy::GrowClusterPool {
            pools: vec![net("10.0.0.0/23")]
        }
    );
    assert!(
        !detect(&pool_cluster(OTHER, &three, Some(24)))
            .iter()
            .any(|f| f.kind == ClusterPoolNearlyFull)
    );
    // The node left without a range: the operator's error, and why.
    let f = only(&pool_cluster("node-c", &three, Some(24)), CiliumIpamError);
    assert_eq!(
        f.cause,
        Cause::Node(NodeProblem::OperatorError {
            error: "allocator full".into(),
            pool: Some(fit.clone()),
        })
    );
    // Exactly as many nodes as ranges: the next one gets nothing. The mask
    // from the CiliumNodes when cilium-config has none.
    let two = &three[..2];
    let f = only(&pool_cluster(ME, two, None), ClusterPoolNearlyFull);
    assert_eq!(
        f.cause,
        Cause::Node(NodeProblem::PoolNearlyFull(PoolFit {
            mask_configured: false,
            nodes: 2,
            ..fit
        }))
    );
    // Room to spare, or no mask known anywhere: nothing.
    assert!(
        !detect(&pool_cluster(ME, &three[..1], Some(24)))
            .iter()
            .any(|f| f.kind == ClusterPoolNearlyFull)
    );
    assert!(
        !detect(&pool_cluster(ME, &[(ME, None), (OTHER, None)], None))
            .iter()
            .any(|f| f.kind == ClusterPoolNearlyFull)
    );
}

#[test]
fn host_locals_range_set_full_is_exhaustion_with_host_locals_fix_and_no_ciliums() {
    let message = "failed to allocate for range 0: no IP addresses available in range set: \
                   10.244.1.1-10.244.1.254";
    let refusal = SandboxRefusal::RangeSetFull(Some((
        "10.244.1.1".parse().expect("ip"),
        "10.244.1.254".parse().expect("ip"),
    )));
    for ipam in ["", "cluster-pool"] {
        let mut inv = exhausted(ipam);
        let failures = Arc::make_mut(&mut inv.cluster.sandbox);
        failures[0].refusal = refusal.clone();
        failures[0].message = message.into();
        let f = only(&inv, PodIpExhaustion);
        assert_eq!(f.remedy, Remedy::ReleaseHostLocal { node: ME.into() });
        assert_eq!(f.trust, Trust::Hint, "an Event alone");
        assert!(
            matches!(
                f.cause,
                Cause::Node(NodeProblem::Exhausted {
                    ipam: IpamKind::HostLocal,
                    refused_pods: 1,
                    ..
                })
            ),
            "{f:?}"
        );
    }
}
