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
        CalicoIpam, ClusterState, CniNode, Inventory, IpSource, IpamOwner, Pod, PodIp, Role,
        Source, TunnelKind,
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
fn every_real_ipamblock_and_ippool_is_read_and_only_the_elided_attributes_warn() {
    let mut problems = Vec::new();
    let (partial, whole): (Vec<_>, Vec<_>) = calico("ipamblock-")
        .into_iter()
        .partition(|p| p.to_str().unwrap().ends_with("-partial.json"));
    let blocks: Vec<_> = whole
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
    let sizes: Vec<_> = pools.iter().map(|p| p.block_size).collect();
    assert_eq!(sizes, [Some(24), Some(26), Some(24), Some(26)], "{pools:?}");
    // Calico's LoadBalancer IPAM docs' pool: for Services, no workload.
    let lb: Vec<_> = pools.iter().filter(|p| p.load_balancer).collect();
    assert_eq!(lb.len(), 1, "{pools:?}");
    assert!(!lb[0].workloads, "{pools:?}");
    assert!(pools.iter().all(|p| !p.disabled));

    // calico#3589's pod block, its 62 attributes elided by the reporter: read,
    // each allocation kept with an unknown owner, one warning saying so.
    let mut problems = Vec::new();
    let elided: Vec<_> = partial
        .iter()
        .flat_map(|p| files::ipam_blocks(p, &mut problems).unwrap())
        .collect();
    assert_eq!(elided.len(), 1);
    assert_eq!(elided[0].allocated.len(), 62);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].to_string().starts_with(
            "ipamblocks 100-65-42-0-26: 62 of spec.allocations (the first at ordinal 0) point at \
             no entry of spec.attributes (0 entries)"
        ),
        "{problems:#?}"
    );
}

#[test]
fn calico_3589s_pod_block_holds_no_tunnel_so_a_node_announcing_one_of_its_addresses_is_stale() {
    let path = calico("ipamblock-issue3589").pop().unwrap();
    let blocks = files::ipam_blocks(&path, &mut Vec::new()).unwrap();
    for (announced, want) in [
        // Allocated (to one of the elided pod handles): not the tunnel's.
        ("100.65.42.0", "Other"),
        // Ordinal 9 is unallocated.
        ("100.65.42.9", "Free"),
    ] {
        let mut inv = inventory(announced, vec![]);
        inv.node = "kworker-fe-intg-iz2-bap002".into();
        Arc::make_mut(&mut inv.cluster.annotated_nodes)[0].name = inv.node.clone();
        inv.cluster.calico = Arc::new(CalicoIpam::new(blocks.clone(), vec![]));
        let found = detect(&inv);
        assert_eq!(found.len(), 1, "{found:#?}");
        let ipshadow::detect::Cause::Node(ipshadow::detect::NodeProblem::Calico(a)) =
            &found[0].cause
        else {
            panic!("{found:#?}")
        };
        let got = match a {
            TunnelAllocation::Other { handle: None, .. } => "Other",
            TunnelAllocation::Free { .. } => "Free",
            other => panic!("{other:?}"),
        };
        assert_eq!(got, want, "{announced}");
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
    let mut node = CniNode {
        name: "mac-k8s".into(),
        ..CniNode::default()
    };
    node.add(
        announced.parse().unwrap(),
        Role::Tunnel,
        Source::CalicoNodeAnnotation,
    );
    Inventory {
        node: "mac-k8s".into(),
        cluster: ClusterState {
            pods: Arc::new(pods),
            annotated_nodes: Arc::new(vec![node]),
            calico: Arc::new(after_nginx()),
            ..Default::default()
        },
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
    inv.cluster.annotated_nodes = Arc::default();
    let found = detect(&inv);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].kind, FindingKind::TunnelIpCollision);
    assert_eq!(found[0].owner.source, Source::CalicoIpamBlock);
}
