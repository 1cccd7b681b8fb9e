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
    .chain(router_ports())
    .collect()
}

/// A pod on an ovn-kubernetes node's join or transit address, each source.
fn router_ports() -> impl Iterator<Item = (Mode, Finding)> {
    [
        ("100.64.0.4", Scope::SameNode, Source::OvnJoinAnnotation),
        ("100.64.0.3", Scope::CrossNode, Source::OvnNodeId),
        ("100.88.0.3", Scope::CrossNode, Source::OvnTransitAnnotation),
    ]
    .into_iter()
    .map(|(a, scope, source)| {
        let by = Reserver::OvnRouterPort;
        let mut f = collision(Role::OvnRouterPort, scope, Remedy::ReservedAddress { by });
        f.ip = Some(ip(a));
        f.owner.source = source;
        (Mode::OvnOrBridge, f)
    })
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

/// A refused pod of `tenant` on `worker-node-a`: its site.
fn refused_site() -> crate::detect::PodSite {
    crate::detect::PodSite {
        pod: pod_ref("tenant", "web-0"),
        node: "worker-node-a".into(),
        ip_source: crate::inventory::IpSource::Event,
        created: None,
        controller: None,
    }
}

/// Calico's refusal (a leftover veth, a live pod on the address) and the
/// bridge plugin's (its old address known, or not).
pub(super) fn leftovers() -> Vec<(Mode, Finding)> {
    let node = || "worker-node-a".to_owned();
    let veth = || Some("calif6cb5368383".to_owned());
    let holder = Some(crate::detect::PodRef {
        namespace: "other".into(),
        name: "db-0".into(),
        uid: "u".into(),
    });
    let kubelet = KubeletReport {
        count: 7,
        message: "plugin type=\"calico\" failed (add): error adding host side routes for \
                  interface: calid29a1cadef5, error: route (Ifindex: 131, Dst: 172.25.136.1/32, \
                  Scope: link) already exists for an interface other than 'calid29a1cadef5'"
            .into(),
    };
    let mut out = Vec::new();
    for holder in [None, holder] {
        let cause = crate::detect::Cause::Leftover {
            site: refused_site(),
            kubelet: kubelet.clone(),
            interface: veth(),
            holder: holder.clone(),
            wanted: None,
            seen: true,
        };
        let remedy = Remedy::ClearCalicoRoute {
            node: node(),
            ip: ip("172.25.136.1"),
            interface: veth(),
            holder,
        };
        out.push((
            Mode::Calico,
            leftover(FindingKind::PodRouteTaken, cause, remedy),
        ));
    }
    let wanted = Some("10.244.0.1/24".parse().expect("net"));
    let old: ipnet::IpNet = "10.244.3.1/24".parse().expect("net");
    let bridge_kubelet = KubeletReport {
        count: 4,
        message: "failed to set bridge addr: \"cni0\" already has an IP address different from \
                  10.244.0.1/24"
            .into(),
    };
    for seen in [true, false] {
        let cause = crate::detect::Cause::Leftover {
            site: refused_site(),
            kubelet: bridge_kubelet.clone(),
            interface: Some("cni0".into()),
            holder: None,
            wanted,
            seen,
        };
        let remedy = if seen {
            Remedy::DeleteBridgeAddress {
                node: node(),
                bridge: "cni0".into(),
                address: old,
            }
        } else {
            Remedy::RecreateBridge {
                node: node(),
                bridge: "cni0".into(),
                gateway: wanted,
            }
        };
        let mut f = leftover(FindingKind::StaleBridgeAddress, cause, remedy);
        f.ip = Some(if seen { old.addr() } else { ip("10.244.0.1") });
        f.owner.role = Role::Node;
        f.owner.device = Some("cni0".into());
        out.push((Mode::OvnOrBridge, f));
    }
    out
}

fn leftover(kind: FindingKind, cause: crate::detect::Cause, remedy: Remedy) -> Finding {
    Finding {
        kind,
        scope: Scope::SameNode,
        ip: Some(ip("172.25.136.1")),
        owner: crate::detect::Owner {
            node: "worker-node-a".into(),
            role: Role::Local,
            device: Some("calif6cb5368383".into()),
            source: Source::Kernel,
        },
        cause,
        remedy,
        trust: crate::detect::Trust::Hint,
    }
}

#[test]
fn refusals_over_leftovers_name_the_address_the_interface_and_the_cnis_own_fix() {
    for (_, f) in leftovers() {
        let ip = f.ip_text();
        let device = f.owner.device.clone().unwrap_or_default();
        for reader in [Reader::Operator, Reader::Node, Reader::Namespace("tenant")] {
            for text in [render_for(&f, reader), note(&f, reader, None)] {
                assert!(text.contains(&device), "{text}");
                assert!(
                    text.contains(&ip) || !text.contains("still holds"),
                    "{text}"
                );
                let calico = f.kind == FindingKind::PodRouteTaken;
                assert_eq!(text.contains("calicoctl ipam check"), calico, "{text}");
                assert!(
                    text.contains(if calico { "Calico" } else { "bridge" }),
                    "{text}"
                );
                // The pod's namespace never reads another namespace's pod.
                if reader == Reader::Namespace("tenant") {
                    assert!(!text.contains("db-0"), "{text}");
                }
            }
        }
        // The fix in the CNI's own terms.
        let fix = super::super::fix(&f.remedy, Reader::Operator);
        match &f.remedy {
            Remedy::ClearCalicoRoute { holder: None, .. } => {
                assert!(fix.contains("`ip link delete calif6cb5368383`"), "{fix}");
            }
            Remedy::ClearCalicoRoute {
                holder: Some(_), ..
            } => {
                assert!(fix.contains("delete this pod"), "{fix}");
            }
            Remedy::DeleteBridgeAddress { .. } => {
                assert!(fix.contains("ip addr del 10.244.3.1/24 dev cni0"), "{fix}");
            }
            Remedy::RecreateBridge { .. } => assert!(fix.contains("cni0"), "{fix}"),
            other => panic!("{other:?}"),
        }
    }
}
