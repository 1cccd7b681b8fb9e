//! Cilium's IPAM as the inventory shows it: how a node gets its pod addresses
//! (a range of its own, or a pool cilium-operator fills), and how many nodes
//! the cluster pool has room for.

use std::collections::BTreeMap;

use ipnet::IpNet;

use super::{IpamKind, NodeProblem, PoolFit};
use crate::inventory::{CniNode, Inventory};

/// How `node` gets its pod addresses: cilium-config's `ipam` when it was
/// read, else what the node's CiliumNode shows.
pub(super) fn ipam_kind(inv: &Inventory, node: &str) -> IpamKind {
    let mode = inv.cluster.cilium_config.as_ref().map(|c| c.ipam.as_str());
    match mode.filter(|m| !m.is_empty()) {
        Some("eni" | "azure" | "alibabacloud" | "crd") => IpamKind::OperatorPool,
        Some("cluster-pool" | "kubernetes" | "multi-pool") => IpamKind::HostScope,
        Some(_) => IpamKind::Unknown,
        None => match inv.cluster.cilium_nodes.iter().find(|c| c.name == node) {
            Some(c) if c.operator_pool => IpamKind::OperatorPool,
            Some(c) if !c.pod_cidrs.is_empty() || !c.pool_cidrs.is_empty() => IpamKind::HostScope,
            _ => IpamKind::Unknown,
        },
    }
}

/// The cluster pool of one family against the per-node mask and the node
/// count; `None` unless cilium-config says cluster-pool and names the pool
/// (the pool's size is known nowhere else), or no mask is known.
pub(super) fn pool_fit(inv: &Inventory, v6: bool) -> Option<PoolFit> {
    let config = inv.cluster.cilium_config.as_ref()?;
    if config.ipam != "cluster-pool" {
        return None;
    }
    let pools: Vec<IpNet> = config
        .cluster_pool
        .iter()
        .filter(|p| p.addr().is_ipv6() == v6)
        .copied()
        .collect();
    if pools.is_empty() {
        return None;
    }
    let configured = if v6 {
        config.ipv6_mask_size
    } else {
        config.ipv4_mask_size
    };
    let (mask, mask_configured) = match configured {
        Some(m) => (m, true),
        None => (mask_in_use(inv, &pools)?, false),
    };
    let holds = pools
        .iter()
        .map(|p| {
            mask.checked_sub(p.prefix_len()).map_or(0, |bits| {
                1u128.checked_shl(u32::from(bits)).unwrap_or(u128::MAX)
            })
        })
        .fold(0u128, u128::saturating_add);
    Some(PoolFit {
        pools,
        mask,
        mask_configured,
        holds: u64::try_from(holds).unwrap_or(u64::MAX),
        nodes: inv.cluster.cilium_nodes.len() as u64,
    })
}

/// The per-node mask the operator uses, as the CiliumNodes show it: the most
/// common prefix length of their podCIDRs inside `pools`.
fn mask_in_use(inv: &Inventory, pools: &[IpNet]) -> Option<u8> {
    let mut seen: BTreeMap<u8, usize> = BTreeMap::new();
    for c in inv.cluster.cilium_nodes.iter().flat_map(|c| &c.pod_cidrs) {
        if pools.iter().any(|p| p.contains(c)) {
            *seen.entry(c.prefix_len()).or_default() += 1;
        }
    }
    seen.into_iter().max_by_key(|&(_, n)| n).map(|(m, _)| m)
}

/// The families whose cluster pool has room for no more nodes than the
/// cluster has. A fact about the cluster, not a node: told once, by the node
/// first by name among the CiliumNodes.
pub(super) fn nearly_full(inv: &Inventory, node: &str) -> Vec<PoolFit> {
    let first = inv.cluster.cilium_nodes.iter().map(|c| &*c.name).min();
    if first != Some(node) {
        return Vec::new();
    }
    [false, true]
        .into_iter()
        .filter_map(|v6| pool_fit(inv, v6))
        .filter(|f| f.holds <= f.nodes)
        .collect()
}

/// The cluster pool that explains cilium-operator's `error`, when it says
/// the allocator is full and the pool has no room for another node.
pub(super) fn explaining(inv: &Inventory, error: &str) -> Option<PoolFit> {
    if !error.to_ascii_lowercase().contains("full") {
        return None;
    }
    [false, true]
        .into_iter()
        .filter_map(|v6| pool_fit(inv, v6))
        .find(|f| f.holds <= f.nodes)
}

/// cluster-pool mode while `cn` keeps podCIDRs outside every pool of its family.
pub(super) fn migration_stuck(inv: &Inventory, cn: &CniNode) -> Option<NodeProblem> {
    let config = inv.cluster.cilium_config.as_ref()?;
    if config.ipam != "cluster-pool" || config.cluster_pool.is_empty() {
        return None;
    }
    let family = |n: &IpNet| matches!(n, IpNet::V6(_));
    let outside: Vec<IpNet> = cn
        .pod_cidrs
        .iter()
        .filter(|c| {
            // A family without a pool is not this finding (the operator would not allocate it).
            let mut pools = config
                .cluster_pool
                .iter()
                .filter(|p| family(p) == family(c))
                .peekable();
            pools.peek().is_some() && !pools.any(|p| p.contains(*c))
        })
        .copied()
        .collect();
    // kubernetes mode copies the Node's spec.podCIDRs: a range that is not
    // the Node's came from an earlier cluster pool (cilium#27245).
    let pool_change = inv
        .node_facts
        .as_ref()
        .filter(|n| n.name == cn.name)
        .is_some_and(|n| !outside.iter().all(|c| n.pod_cidrs.contains(c)));
    (!outside.is_empty()).then(|| NodeProblem::MigrationStuck {
        pod_cidrs: outside,
        pools: config.cluster_pool.clone(),
        operator_error: cn.operator_error.clone(),
        pool_change,
    })
}
