//! Calico's real IPAMBlocks and IPPools (`tests/corpus/realworld/calico`,
//! provenance in its PROVENANCE.md), read by the agent's own lean readers:
//! every object is read with no warning, each allocation with its owner, and
//! detection over them finds what the objects say and nothing more.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use ipshadow::{
    detect::{FindingKind, TunnelAllocation, detect},
    inventory::{
        CalicoIpam, CiliumNode, Inventory, IpSource, IpamOwner, Pod, PodIp, Role, Source,
        TunnelKind,
    },
    kube::files,
};

fn calico(prefix: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/realworld/calico");
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with(prefix) && p.extension().is_some_and(|e| e == "json")
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_real_ipamblock_and_ippool_is_read_without_a_warning() {
    let mut problems = Vec::new();
    let blocks: Vec<_> = calico("ipamblock-")
        .iter()
        .flat_map(|p| files::ipam_blocks(p, &mut problems).unwrap())
        .collect();
    let pools: Vec<_> = calico("ippool-")
        .iter()
        .flat_map(|p| files::ip_pools(p, &mut problems).unwrap())
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        blocks.len() >= 2 && pools.len() >= 2,
        "{blocks:?} {pools:?}"
    );
    for b in &blocks {
        assert!(!b.allocated.is_empty(), "{}", b.name);
        // Every allocation is a tunnel or a pod with a name: real blocks carry attributes.
        for (ordinal, owner) in &b.allocated {
            assert!(b.address(*ordinal).is_some(), "{} {ordinal}", b.name);
            assert!(
                !matches!(owner, IpamOwner::Other { .. }),
                "{} {ordinal}: {owner:?}",
                b.name
            );
        }
    }
    for p in &pools {
        assert_eq!(p.block_size, Some(26), "{}", p.name);
        assert!(!p.disabled, "{}", p.name);
    }
}

/// The zhongmingmao block after nginx started: the VXLAN tunnel at ordinal 0
/// (`vxlan.calico` holds 192.168.185.0/32 in the same post), nginx at ordinal 16.
fn after_nginx() -> CalicoIpam {
    let path = calico("ipamblock-zhongmingmao-blog-vxlan-mac-k8s-after")
        .pop()
        .unwrap();
    let blocks = files::ipam_blocks(&path, &mut Vec::new()).unwrap();
    let pools = files::ip_pools(
        &calico("ippool-zhongmingmao").pop().unwrap(),
        &mut Vec::new(),
    )
    .unwrap();
    CalicoIpam::new(blocks, pools)
}

fn inventory(announced: &str, pods: Vec<Pod>) -> Inventory {
    let mut node = CiliumNode {
        name: "mac-k8s".into(),
        ..CiliumNode::default()
    };
    node.add(
        announced.parse().unwrap(),
        Role::Tunnel,
        Source::CalicoNodeAnnotation,
    );
    Inventory {
        node: "mac-k8s".into(),
        pods: Arc::new(pods),
        annotated_nodes: Arc::new(vec![node]),
        calico: Arc::new(after_nginx()),
        ..Inventory::default()
    }
}

fn pod(name: &str, ip: &str) -> Pod {
    Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        node: Some("mac-k8s".into()),
        ips: vec![PodIp {
            ip: ip.parse().unwrap(),
            source: IpSource::Status,
        }],
        phase: Some("Running".into()),
        ..Pod::default()
    }
}

#[test]
fn the_real_block_is_healthy_as_published_and_its_tunnel_is_read_from_it() {
    let ipam = after_nginx();
    let tunnel = &ipam.tunnels[0];
    assert_eq!(tunnel.name, "mac-k8s");
    assert_eq!(tunnel.addresses[0].ip.to_string(), "192.168.185.0");
    let b = &ipam.blocks()[0];
    assert_eq!(
        b.allocated[0].1,
        IpamOwner::Tunnel {
            node: "mac-k8s".into(),
            kind: TunnelKind::Vxlan
        }
    );
    let inv = inventory("192.168.185.0", vec![pod("nginx", "192.168.185.16")]);
    assert_eq!(detect(&inv), []);
}

#[test]
fn the_real_block_under_a_stale_annotation_and_a_pod_on_its_tunnel() {
    // The Node announces nginx's address as its tunnel's.
    let inv = inventory("192.168.185.16", vec![]);
    let found = detect(&inv);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].kind, FindingKind::UnallocatedTunnelAddress);
    assert!(matches!(
        &found[0].cause,
        ipshadow::detect::Cause::Node(ipshadow::detect::NodeProblem::Calico(
            TunnelAllocation::Pod { pod, .. }
        )) if pod == "default/nginx"
    ));
    // A pod on the block's tunnel address, which no annotation names here.
    let mut inv = inventory("192.168.185.0", vec![pod("intruder", "192.168.185.0")]);
    inv.annotated_nodes = Arc::default();
    let found = detect(&inv);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].kind, FindingKind::TunnelIpCollision);
    assert_eq!(found[0].owner.source, Source::CalicoIpamBlock);
}
