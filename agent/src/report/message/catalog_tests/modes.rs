//! The cases whose advice depends on Cilium's IPAM mode.

use super::{
    Mode,
    cases::{kubelet, net, node_finding, pod_ref},
};
use crate::detect::{Finding, FindingKind, IpamKind, NodeProblem, PoolFit, Remedy};

/// The node findings whose advice depends on Cilium's IPAM mode.
pub(super) fn by_ipam_mode() -> Vec<(Mode, Finding)> {
    let node = || "worker-node-a".to_owned();
    let pools = || vec![net("10.0.0.0/23")];
    let fit = |holds, nodes| PoolFit {
        pools: pools(),
        mask: 24,
        mask_configured: true,
        holds,
        nodes,
    };
    let exhausted = NodeProblem::Exhausted {
        pods: vec![pod_ref("tenant", "web-0")],
        refused_pods: 3,
        kubelet: kubelet(),
        ipam: IpamKind::OperatorPool,
    };
    let full = NodeProblem::OperatorError {
        error: "allocator full".into(),
        pool: Some(fit(2, 3)),
    };
    let moved = NodeProblem::MigrationStuck {
        pod_cidrs: vec![net("10.244.4.0/24")],
        pools: vec![net("100.65.0.0/16")],
        operator_error: None,
        pool_change: true,
    };
    let grow = || Remedy::GrowClusterPool { pools: pools() };
    [
        (
            FindingKind::PodIpExhaustion,
            exhausted,
            Remedy::CheckOperatorPool { node: node() },
        ),
        (FindingKind::CiliumIpamError, full, grow()),
        (
            FindingKind::ClusterPoolNearlyFull,
            NodeProblem::PoolNearlyFull(fit(2, 2)),
            grow(),
        ),
        (
            FindingKind::IpamMigrationStuck,
            moved,
            Remedy::KeepOldPoolOrReallocate {
                node: node(),
                old: vec![net("10.244.4.0/24")],
            },
        ),
    ]
    .into_iter()
    .map(|(k, p, r)| (Mode::CiliumOnly, node_finding(k, p, r)))
    .collect()
}
