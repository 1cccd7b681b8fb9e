//! The cases of Calico's IPAM: a node's tunnel address no IPAMBlock
//! allocates to its tunnel, each way IPAM may hold it; a pod on a tunnel
//! address read from a block; its refusals (an address assigned already, no
//! address left).

use super::{
    super::{Reader, note, render_for},
    cases::{Mode, collision, ip, node_finding},
};
use crate::{
    detect::{
        CalicoFix, Cause, FindingKind, IpamKind, KubeletReport, NodeProblem, PodRef, PodSite,
        Remedy, Role, Scope, TunnelAllocation,
    },
    inventory::{IpSource, Source},
};

const NODE: &str = "worker-node-a";

/// Every way IPAM holds a stale tunnel address, and a pod on a block's tunnel address.
pub(super) fn cases() -> Vec<(Mode, crate::detect::Finding)> {
    let block = || "10-42-0-0-26".to_owned();
    let mut out: Vec<_> = [
        TunnelAllocation::Free { block: block() },
        TunnelAllocation::NoBlock {
            pool: "default-ipv4-ippool".into(),
        },
        TunnelAllocation::Pod {
            block: block(),
            pod: "tenant/web-7d9f8b6c5d-x2x4q".into(),
        },
        TunnelAllocation::OtherTunnel {
            block: block(),
            node: "worker-node-b".into(),
            device: "vxlan.calico",
        },
        TunnelAllocation::Other {
            block: block(),
            handle: Some("k8s-pod-network.4bcae222a79b7ef46f048e435d5ab62d".into()),
        },
        TunnelAllocation::Other {
            block: block(),
            handle: None,
        },
        TunnelAllocation::Unmarked { block: block() },
    ]
    .into_iter()
    .map(|a| {
        let mut f = node_finding(
            FindingKind::UnallocatedTunnelAddress,
            NodeProblem::Calico(a),
            Remedy::Calico(CalicoFix::ReallocateTunnel {
                node: NODE.into(),
                ip: ip("10.42.0.1"),
            }),
        );
        f.ip = Some(ip("10.42.0.1"));
        f.owner.role = Role::Tunnel;
        f.owner.source = Source::CalicoNodeAnnotation;
        (Mode::Calico, f)
    })
    .collect();
    out.extend(refusals());
    // The kernel's tunnel address the Node does not announce.
    let mut f = node_finding(
        FindingKind::UnallocatedTunnelAddress,
        NodeProblem::Calico(TunnelAllocation::Free { block: block() }),
        Remedy::Calico(CalicoFix::RemoveLeftover {
            node: NODE.into(),
            ip: ip("10.42.0.5"),
            device: "tunl0".into(),
        }),
    );
    f.ip = Some(ip("10.42.0.5"));
    f.owner.role = Role::Tunnel;
    f.owner.device = Some("tunl0".into());
    f.owner.source = Source::Kernel;
    out.push((Mode::Calico, f));
    let mut f = collision(
        Role::Tunnel,
        Scope::CrossNode,
        Remedy::CheckCalicoIpam { node: NODE.into() },
    );
    f.ip = Some(ip("10.42.0.17"));
    f.owner.device = None;
    f.owner.source = Source::CalicoIpamBlock;
    out.push((Mode::Calico, f));
    out
}

/// Calico IPAM's refusals (calico#5337, #11358, harvester#7326's words).
fn refusals() -> Vec<(Mode, crate::detect::Finding)> {
    let kubelet = |message: &str| KubeletReport {
        count: 9,
        message: message.into(),
    };
    let holder = PodRef {
        namespace: "tenant".into(),
        name: "redis-0".into(),
        uid: "u".into(),
    };
    let mut out = Vec::new();
    for held in [true, false] {
        let a = ip("172.16.102.20");
        let mut f = node_finding(
            if held {
                FindingKind::DuplicatePodIp
            } else {
                FindingKind::StaleCalicoAllocation
            },
            NodeProblem::Calico(TunnelAllocation::Unmarked { block: "b".into() }),
            Remedy::Calico(CalicoFix::AssignedAddress {
                node: NODE.into(),
                ip: a,
                held,
            }),
        );
        f.ip = Some(a);
        f.owner.role = if held { Role::Pod } else { Role::Node };
        f.cause = Cause::Refused {
            site: PodSite {
                pod: PodRef {
                    namespace: "tenant".into(),
                    name: "redis-testbug-0".into(),
                    uid: "v".into(),
                },
                node: NODE.into(),
                ip_source: IpSource::Event,
                created: None,
                controller: None,
            },
            kubelet: kubelet("error getting IP from IPAM: resource already exists: 172.16.102.20"),
            holder: held.then(|| holder.clone()),
        };
        out.push((Mode::Calico, f));
    }
    let exhausted = NodeProblem::Exhausted {
        pods: vec![holder],
        refused_pods: 2,
        kubelet: kubelet(
            "plugin type=\"calico\" failed (add): cannot allocate new block due to per host \
             block limit",
        ),
        ipam: IpamKind::Calico,
    };
    let remedy = Remedy::Calico(CalicoFix::CheckPools { node: NODE.into() });
    let f = node_finding(FindingKind::PodIpExhaustion, exhausted, remedy);
    out.push((Mode::Calico, f));
    out
}

#[test]
fn calicos_refusals_are_told_as_calicos_with_calicos_fix_and_no_other_cnis_words() {
    for (_, f) in refusals() {
        for reader in [Reader::Operator, Reader::Node, Reader::Namespace("tenant")] {
            for text in [render_for(&f, reader), note(&f, reader, None)] {
                let lower = text.to_ascii_lowercase();
                for foreign in ["cilium", "kube-ovn", "host-local", "endpoint"] {
                    assert!(!lower.contains(foreign), "{foreign}: {text}");
                }
                assert!(text.contains("Calico"), "{text}");
                let fix = match f.kind {
                    FindingKind::DuplicatePodIp => "cni.projectcalico.org/ipAddrs",
                    FindingKind::StaleCalicoAllocation => {
                        "calicoctl ipam release --ip=172.16.102.20"
                    }
                    _ => "maxBlocksPerHost",
                };
                assert!(text.contains(fix), "{fix}: {text}");
            }
        }
    }
}

#[test]
fn a_stale_tunnel_address_is_told_with_where_ipam_has_it_and_calicos_own_fix() {
    for (_, f) in cases().into_iter().filter(|(_, f)| {
        f.kind == FindingKind::UnallocatedTunnelAddress
            && matches!(f.remedy, Remedy::Calico(CalicoFix::ReallocateTunnel { .. }))
    }) {
        let n = note(&f, Reader::Node, None);
        assert!(
            n.starts_with("Node worker-node-a's Calico tunnel address 10.42.0.1 is "),
            "{n}"
        );
        assert!(n.contains("restart calico-node on worker-node-a"), "{n}");
        assert!(n.contains("calicoctl ipam check"), "{n}");
        let m = render_for(&f, Reader::Operator);
        assert!(
            m.contains("the Node's projectcalico.org annotations"),
            "{m}"
        );
        assert!(m.contains("takes a new address from IPAM"), "{m}");
        let NodeProblem::Calico(a) = (match &f.cause {
            crate::detect::Cause::Node(p) => p,
            other => panic!("{other:?}"),
        }) else {
            panic!("{f:?}")
        };
        let says = match a {
            TunnelAllocation::Free { .. } => "unallocated in IPAM block 10-42-0-0-26",
            TunnelAllocation::NoBlock { .. } => "in no IPAM block (IPPool default-ipv4-ippool)",
            TunnelAllocation::Pod { .. } => "allocated to pod tenant/web-7d9f8b6c5d-x2x4q",
            TunnelAllocation::OtherTunnel { .. } => {
                "allocated to node worker-node-b's vxlan.calico"
            }
            TunnelAllocation::Other {
                handle: Some(_), ..
            } => "allocated to handle k8s-pod-network.",
            TunnelAllocation::Other { handle: None, .. } => "allocated to an unknown owner",
            TunnelAllocation::Unmarked { .. } => "allocated with neither handle nor attributes",
        };
        assert!(n.contains(says), "{n}");
    }
}

#[test]
fn a_pod_on_a_blocks_tunnel_address_names_the_block_as_the_source() {
    let (_, f) = cases().pop().expect("a case");
    let m = render_for(&f, Reader::Operator);
    assert!(m.contains("Calico's IPAMBlocks"), "{m}");
    assert!(note(&f, Reader::Node, None).contains("calicoctl ipam check"));
}

#[test]
fn a_tunnel_address_only_the_kernel_holds_is_told_to_go_and_how_by_hand() {
    let (_, f) = cases()
        .into_iter()
        .find(|(_, f)| matches!(f.remedy, Remedy::Calico(CalicoFix::RemoveLeftover { .. })))
        .expect("a leftover case");
    let n = note(&f, Reader::Node, None);
    assert!(n.contains("restart calico-node on worker-node-a"), "{n}");
    assert!(n.contains("`ip addr del 10.42.0.5/32 dev tunl0`"), "{n}");
    assert!(
        n.starts_with(
            "Node worker-node-a's tunl0 holds 10.42.0.5, which its Node does not announce"
        ),
        "{n}"
    );
    let m = render_for(&f, Reader::Operator);
    assert!(m.contains("announces no tunnel address 10.42.0.5"), "{m}");
    assert!(
        m.contains("tunnel device tunl0 on node worker-node-a holds 10.42.0.5"),
        "{m}"
    );
    assert!(m.contains("`ip addr del 10.42.0.5/32 dev tunl0`"), "{m}");
}
