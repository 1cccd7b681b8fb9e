//! The cases of other CNIs' addresses: Calico's tunnels, ovn-kubernetes' and
//! bridges' gateways; host-local out of addresses.

use super::{
    super::{Reader, note, render_for},
    cases::{Mode, collision, ip, node_finding, pod_ref},
};
use crate::{
    detect::{
        Finding, FindingKind, IpamKind, KubeletReport, NodeProblem, Remedy, Reserver, Role, Scope,
    },
    inventory::Source,
};

/// A pod on Calico's tunnel address: of this node's `tunl0`, and of another
/// node as its annotation says.
pub(super) fn calico() -> Vec<(Mode, Finding)> {
    [
        (Scope::SameNode, Some("tunl0"), Source::Kernel),
        (Scope::CrossNode, None, Source::CalicoNodeAnnotation),
    ]
    .into_iter()
    .map(|(scope, device, source)| {
        let remedy = Remedy::CheckCalicoIpam {
            node: "worker-node-a".into(),
        };
        let mut f = collision(Role::Tunnel, scope, remedy);
        f.ip = Some(ip("10.42.0.1"));
        f.owner.device = device.map(str::to_owned);
        f.owner.source = source;
        (Mode::Calico, f)
    })
    .collect()
}

/// A bridge that kept its previous pod range's gateway, with and without pods behind it.
pub(super) fn bridges() -> Vec<(Mode, Finding)> {
    [true, false]
        .into_iter()
        .map(|with_pods| {
            let address: ipnet::IpNet = "10.244.1.1/24".parse().expect("net");
            let pods: Vec<_> = with_pods
                .then(|| crate::detect::PodRef {
                    namespace: "other".into(),
                    name: "web-0".into(),
                    uid: "u".into(),
                })
                .into_iter()
                .collect();
            let f = Finding {
                kind: crate::detect::FindingKind::StaleBridgeAddress,
                scope: Scope::SameNode,
                ip: Some(address.addr()),
                owner: crate::detect::Owner {
                    node: "worker-node-a".into(),
                    role: Role::Node,
                    device: Some("cni0".into()),
                    source: Source::Kernel,
                },
                cause: crate::detect::Cause::Node(crate::detect::NodeProblem::StaleBridge {
                    bridge: "cni0".into(),
                    address,
                    own: vec!["10.244.5.0/24".parse().expect("net")],
                    owner: "node-b".into(),
                    unreachable: pods.len(),
                    pods,
                }),
                remedy: Remedy::DeleteBridgeAddress {
                    node: "worker-node-a".into(),
                    bridge: "cni0".into(),
                    address,
                },
                trust: crate::detect::Trust::Kernel,
            };
            (Mode::OvnOrBridge, f)
        })
        .collect()
}

/// A pod on the pod gateway or ovn-kubernetes' management port.
pub(super) fn gateways() -> Vec<(Mode, Finding)> {
    [
        (
            Role::ManagementPort,
            Scope::SameNode,
            Some("ovn-k8s-mp0"),
            Source::Kernel,
            Reserver::OvnKubernetes,
        ),
        (
            Role::Gateway,
            Scope::CrossNode,
            None,
            Source::OvnNodeAnnotation,
            Reserver::OvnKubernetes,
        ),
        (
            Role::Gateway,
            Scope::SameNode,
            Some("cni0"),
            Source::Kernel,
            Reserver::Bridge,
        ),
    ]
    .into_iter()
    .map(|(role, scope, device, source, by)| {
        let mut f = collision(role, scope, Remedy::ReservedAddress { by });
        f.ip = Some(ip("10.128.0.2"));
        f.owner.device = device.map(str::to_owned);
        f.owner.source = source;
        (Mode::OvnOrBridge, f)
    })
    .collect()
}

/// host-local's range full on a flannel node (aks-engine#4435's wording).
pub(super) fn host_local() -> Vec<(Mode, Finding)> {
    let problem = NodeProblem::Exhausted {
        pods: vec![pod_ref("tenant", "web-0")],
        refused_pods: 3,
        kubelet: KubeletReport {
            count: 40,
            message: "plugin type=\"flannel\" failed (add): failed to allocate for range 0: no IP \
                      addresses available in range set: 10.244.1.1-10.244.1.254"
                .into(),
        },
        ipam: IpamKind::HostLocal,
    };
    let remedy = Remedy::ReleaseHostLocal {
        node: "worker-node-a".into(),
    };
    vec![(
        Mode::OvnOrBridge,
        node_finding(FindingKind::PodIpExhaustion, problem, remedy),
    )]
}

#[test]
fn host_locals_exhaustion_is_told_in_host_locals_terms_with_no_cilium_words() {
    for (_, f) in host_local() {
        for reader in [Reader::Operator, Reader::Node, Reader::Namespace("tenant")] {
            for text in [render_for(&f, reader), note(&f, reader, None)] {
                assert!(!text.to_ascii_lowercase().contains("cilium"), "{text}");
                assert!(text.contains("/var/lib/cni/networks/"), "{text}");
                assert!(text.contains("--max-pods"), "{text}");
            }
        }
    }
}
