//! Calico's refusals other than its routes', each with Calico's fix and
//! never Cilium's: its IPAM's address assigned already (a live pod holds it,
//! or none does) and its IPAM out of addresses. The messages are real
//! (`tests/corpus/realworld/sandbox/event-messages-issue39.json`).

use std::sync::Arc;

use super::*;
use crate::inventory::{
    CiliumConfig, SandboxFailure, SandboxRefusal,
    fixtures::{ME, OTHER, ip, pod},
};

/// calico#11358 (no pod holds it) and calico#5337 (another pod does).
const ASSIGNED_LEAKED: &str = "2025-11-11 14:20:51.622 [ERROR][485762] ipam.go 921: Failed to \
    assign address 90.0.0.1: resource already exists: 90.0.0.1: Address already assigned in block";
const ASSIGNED_HELD: &str = "networkPlugin cni failed to set up pod \"redis-testbug-172-16-102-20_default\" \
    network: error getting IP from IPAM: resource already exists: 172.16.102.20";
/// harvester#7326.
const BLOCK_LIMIT: &str = "plugin type=\"calico\" failed (add): cannot allocate new block due to \
    per host block limit";

/// A Pending pod `name` of this node refused with `refusal`, beside `others`,
/// in a Calico cluster (no Cilium ranges: the agent reads no IPPools, so no
/// pod range is known) that runs Cilium's cluster-pool too when `cilium`.
fn refused(
    name: &str,
    refusal: SandboxRefusal,
    message: &str,
    others: Vec<crate::inventory::Pod>,
    cilium: bool,
) -> Inventory {
    let mut p = pod(name, ME, &[]);
    p.phase = Some("Pending".into());
    let failures = vec![SandboxFailure {
        namespace: "tenant".into(),
        pod: name.into(),
        uid: format!("uid-{name}"),
        refusal,
        count: 4,
        message: message.into(),
    }];
    let mut pods = vec![p];
    pods.extend(others);
    let mut inv = Inventory {
        node: ME.into(),
        cluster: crate::inventory::ClusterState {
            pods: Arc::new(crate::inventory::with_refused_addresses(&pods, &failures)),
            sandbox: Arc::new(failures),
            ..Default::default()
        },
        ..Inventory::default()
    };
    if cilium {
        inv.cluster.cilium_config = Some(Arc::new(CiliumConfig {
            ipam: "cluster-pool".into(),
            ..CiliumConfig::default()
        }));
    }
    inv
}

#[test]
fn an_address_calicos_ipam_keeps_for_no_pod_is_a_stale_calico_allocation_with_calicos_fix() {
    let a = ip("90.0.0.1");
    let inv = refused(
        "fixed",
        SandboxRefusal::AddressAssigned(a),
        ASSIGNED_LEAKED,
        vec![],
        false,
    );
    let f = detect(&inv);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].kind, f[0].ip, f[0].trust),
        (StaleCalicoAllocation, Some(a), Trust::Hint)
    );
    assert_eq!(
        f[0].remedy,
        Remedy::Calico(CalicoFix::AssignedAddress {
            node: ME.into(),
            ip: a,
            held: false
        })
    );
    assert!(
        matches!(&f[0].cause, Cause::Refused { holder: None, kubelet, .. } if kubelet.count == 4)
    );
}

#[test]
fn an_address_calicos_ipam_refused_that_another_pod_holds_is_a_duplicate_with_calicos_fix() {
    let a = ip("172.16.102.20");
    let holder = pod("redis", OTHER, &["172.16.102.20"]);
    for cilium in [false, true] {
        let inv = refused(
            "redis-testbug",
            SandboxRefusal::AddressAssigned(a),
            ASSIGNED_HELD,
            vec![holder.clone()],
            cilium,
        );
        let f: Vec<Finding> = detect(&inv)
            .into_iter()
            .filter(|f| f.kind == DuplicatePodIp)
            .collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(
            (f[0].scope, f[0].owner.node.as_str()),
            (Scope::CrossNode, OTHER)
        );
        assert_eq!(
            f[0].remedy,
            Remedy::Calico(CalicoFix::AssignedAddress {
                node: ME.into(),
                ip: a,
                held: true
            }),
            "never Cilium's ReallocateDuplicate"
        );
    }
}

#[test]
fn calicos_ipam_out_of_blocks_is_exhaustion_with_calicos_fix_whatever_cilium_runs() {
    for cilium in [false, true] {
        let inv = refused(
            "web",
            SandboxRefusal::PoolsExhausted,
            BLOCK_LIMIT,
            vec![],
            cilium,
        );
        let f = detect(&inv);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].kind, f[0].trust), (PodIpExhaustion, Trust::Hint));
        assert_eq!(
            f[0].remedy,
            Remedy::Calico(CalicoFix::CheckPools { node: ME.into() })
        );
        assert!(matches!(
            &f[0].cause,
            Cause::Node(NodeProblem::Exhausted {
                ipam: IpamKind::Calico,
                refused_pods: 1,
                ..
            })
        ));
    }
    // Cilium's own "range is full" is still Cilium's, not Calico's.
    let cilium = refused(
        "web",
        SandboxRefusal::NoAddressLeft,
        "range is full",
        vec![],
        true,
    );
    let f = detect(&cilium);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(!matches!(f[0].remedy, Remedy::Calico(_)), "{f:#?}");
}
