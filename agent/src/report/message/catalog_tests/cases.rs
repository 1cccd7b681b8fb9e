//! The cases: a finding of every kind, cause and remedy, in the modes it
//! occurs in.
use std::net::IpAddr;

use ipnet::IpNet;

use super::super::*;
use crate::{
    detect::{
        FindingKind, InfraAddress, IpamKind, KubeletReport, NodeProblem, Owner, PodSite, Remedy,
        Role, Scope, Trust,
    },
    inventory::{DeadEnd, ServiceAddress, ServiceField, Source},
};

/// What a case's cluster runs: whether kube-ovn's words may appear.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// kube-ovn hands out pod addresses beside Cilium.
    KubeOvn,
    /// Cilium alone.
    CiliumOnly,
    /// Calico alone: neither Cilium's nor kube-ovn's words.
    Calico,
    /// ovn-kubernetes, or a bridge CNI, alone: no Cilium, Calico or kube-ovn words.
    OvnOrBridge,
}

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

pub(super) fn net(s: &str) -> IpNet {
    s.parse().expect("net")
}

pub(super) fn pod_ref(ns: &str, name: &str) -> PodRef {
    PodRef {
        namespace: ns.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    }
}

fn site() -> PodSite {
    PodSite {
        pod: pod_ref("tenant", "postgres-cluster-0"),
        node: "worker-node-a".into(),
        ip_source: crate::inventory::IpSource::Status,
        created: None,
        controller: None,
    }
}

fn owner(role: Role, device: Option<&str>) -> Owner {
    Owner {
        node: "worker-node-a".into(),
        role,
        device: device.map(str::to_owned),
        source: Source::SpecAddresses,
    }
}

fn finding(kind: FindingKind, role: Role, scope: Scope, cause: Cause, remedy: Remedy) -> Finding {
    Finding {
        kind,
        scope,
        ip: Some(ip("10.244.4.251")),
        owner: owner(role, Some("cilium_host")),
        cause,
        remedy,
        trust: Trust::Cluster,
    }
}

pub(super) fn collision(role: Role, scope: Scope, remedy: Remedy) -> Finding {
    let cause = Cause::Collision {
        site: site(),
        fib: Some("local 10.244.4.251 dev lo table local".into()),
        shadowed_route: None,
        kubelet: None,
        service: None,
        // The longest text: the kernel's word on the pod's namespace too.
        held_behind: Some("lxc8e2f0a91c3d4".into()),
    };
    finding(FindingKind::for_role(role), role, scope, cause, remedy)
}

pub(super) fn kubelet() -> KubeletReport {
    KubeletReport {
        count: 12,
        message: "Failed to create pod sandbox: plugin type=\"cilium-cni\" failed (add): \
                  unable to create endpoint: [PUT /endpoint/{id}][400] putEndpointIdInvalid \
                  IP ipv4:10.244.4.251 is already in use"
            .into(),
    }
}

pub(super) fn carve() -> Remedy {
    Remedy::CarveCiliumPool {
        subnet: "ovn-default".into(),
        block: net("10.244.0.0/16"),
        pool: net("10.244.248.0/21"),
    }
}

pub(super) fn node_finding(kind: FindingKind, problem: NodeProblem, remedy: Remedy) -> Finding {
    let mut f = finding(
        kind,
        Role::Node,
        Scope::SameNode,
        Cause::Node(problem),
        remedy,
    );
    f.ip = None;
    f
}

/// The collisions of every role and scope, with the fixes each mode gives.
fn collisions() -> Vec<(Mode, Finding)> {
    let mut out = Vec::new();
    for role in [Role::Router, Role::Ingress, Role::Health] {
        for scope in [Scope::SameNode, Scope::CrossNode] {
            out.push((Mode::KubeOvn, collision(role, scope, carve())));
            out.push((
                Mode::KubeOvn,
                collision(role, scope, Remedy::ExcludeInPodAllocator),
            ));
            let reallocate = Remedy::ReallocatePod {
                node: "worker-node-a".into(),
            };
            out.push((Mode::CiliumOnly, collision(role, scope, reallocate)));
        }
    }
    out.extend(super::cni_cases::calico());
    out.extend(super::cni_cases::gateways());
    out.extend(super::cni_cases::bridges());
    let local = Remedy::RemoveLocalAddress {
        device: Some("kube-ipvs0".into()),
        subnet: None,
    };
    out.push((
        Mode::CiliumOnly,
        collision(Role::Local, Scope::SameNode, local),
    ));
    let local = Remedy::RemoveLocalAddress {
        device: Some(crate::cni::node_local_dns::DEVICE.into()),
        subnet: None,
    };
    let mut f = collision(Role::Local, Scope::CrossNode, local);
    f.owner.device = Some(crate::cni::node_local_dns::DEVICE.into());
    out.push((Mode::CiliumOnly, f));
    let local = Remedy::RemoveLocalAddress {
        device: Some("dummy0".into()),
        subnet: Some("ovn-default".into()),
    };
    out.push((
        Mode::KubeOvn,
        collision(Role::Local, Scope::CrossNode, local),
    ));
    for (ns, field) in [
        ("tenant", ServiceField::ExternalIps),
        ("kube-system", ServiceField::ExternalIps),
        ("kube-system", ServiceField::ClusterIps),
    ] {
        let service = ServiceAddress {
            service: crate::inventory::ServiceRef {
                namespace: ns.into(),
                name: "ingress-nginx-controller".into(),
            },
            field,
        };
        let mut f = collision(
            Role::Local,
            Scope::SameNode,
            Remedy::RemoveServiceAddress {
                ip: ip("10.244.4.251"),
                service: Some(service.clone()),
                device: Some("kube-ipvs0".into()),
            },
        );
        if let Cause::Collision { service: s, .. } = &mut f.cause {
            *s = Some(service);
        }
        out.push((Mode::CiliumOnly, f));
    }
    // The loud case: an Ingress IP kube-ovn's record gave the pod, kubelet's refusals.
    let mut loud = collision(Role::Ingress, Scope::SameNode, carve());
    if let Cause::Collision {
        site, kubelet: k, ..
    } = &mut loud.cause
    {
        site.ip_source = crate::inventory::IpSource::KubeOvnIp;
        *k = Some(kubelet());
    }
    out.push((Mode::KubeOvn, loud));
    // An owner read from the Node's annotations (no CiliumNodes).
    let mut annotated = collision(Role::Router, Scope::CrossNode, carve());
    annotated.owner.source = Source::LegacyNodeAnnotation;
    out.push((Mode::KubeOvn, annotated));
    let unknown = Remedy::RemoveServiceAddress {
        ip: ip("10.244.4.251"),
        service: None,
        device: Some("kube-ipvs0".into()),
    };
    out.push((
        Mode::CiliumOnly,
        collision(Role::Local, Scope::SameNode, unknown),
    ));
    out
}

/// Refusals, duplicates, blackholes and overlaps.
fn pod_troubles() -> Vec<(Mode, Finding)> {
    let mut out = Vec::new();
    for holder in [
        Some(pod_ref("tenant", "web-1")),
        Some(pod_ref("other", "x")),
        None,
    ] {
        let (kind, role, remedy) = if holder.is_some() {
            let node = "worker-node-a".into();
            (
                FindingKind::DuplicatePodIp,
                Role::Pod,
                Remedy::ReallocateDuplicate { node },
            )
        } else {
            let disconnect = Remedy::DisconnectEndpoint {
                node: "worker-node-a".into(),
                ip: ip("10.244.4.251"),
                cilium_pod: Some(pod_ref("kube-system", "cilium-x2v9q")),
            };
            (FindingKind::StaleCiliumEndpoint, Role::Endpoint, disconnect)
        };
        let cause = Cause::Refused {
            site: site(),
            kubelet: kubelet(),
            holder,
        };
        out.push((
            Mode::CiliumOnly,
            finding(kind, role, Scope::SameNode, cause, remedy),
        ));
    }
    let cause = Cause::Duplicate {
        site: site(),
        holder: pod_ref("tenant", "web-1"),
        network: None,
    };
    let remedy = Remedy::RecreateNewer {
        pod: pod_ref("tenant", "postgres-cluster-0"),
    };
    let dup = finding(
        FindingKind::DuplicatePodIp,
        Role::Pod,
        Scope::CrossNode,
        cause,
        remedy,
    );
    out.push((Mode::OvnOrBridge, super::plan::secondary(&dup)));
    out.push((Mode::OvnOrBridge, super::plan::secondary_from_kernel(&dup)));
    out.push((Mode::CiliumOnly, dup));
    for (dead_end, kube_ovn) in [
        (DeadEnd::NoRoute, true),
        (DeadEnd::NoRoute, false),
        (DeadEnd::Blackhole, false),
    ] {
        let mut f = Finding::blackhole(ip("10.244.4.99"), site(), dead_end, None, kube_ovn);
        f.owner.node = "worker-node-a".into();
        let mode = if kube_ovn {
            Mode::KubeOvn
        } else {
            Mode::CiliumOnly
        };
        out.push((mode, f));
    }
    let infra = |role, a: &str| InfraAddress {
        ip: ip(a),
        role,
        source: Source::SpecAddresses,
    };
    let three = vec![
        infra(Role::Router, "10.244.4.251"),
        infra(Role::Ingress, "10.244.4.12"),
        infra(Role::Health, "10.244.4.104"),
    ];
    let range = Some((net("10.244.4.0/24"), "spec.ipam.podCIDRs"));
    for (held, range) in [
        (vec![infra(Role::Router, "10.244.4.251")], None),
        (three, range),
        (vec![], range),
    ] {
        let o = owner(Role::Router, Some("cilium_host"));
        let f = Finding::overlap(
            ip("10.244.4.251"),
            o,
            "ovn-default".into(),
            Some(net("10.244.0.0/16")),
            range,
            held,
        );
        out.push((Mode::KubeOvn, f));
    }
    out
}

/// Every node finding.
fn node_troubles() -> Vec<(Mode, Finding)> {
    let node = || "worker-node-a".to_owned();
    let pods: Vec<PodRef> = (0..5)
        .map(|i| pod_ref("tenant", &format!("web-{i}")))
        .collect();
    let exhausted = |ipam| NodeProblem::Exhausted {
        pods: pods.clone(),
        refused_pods: 17,
        kubelet: kubelet(),
        ipam,
    };
    let stuck = |pool_change| NodeProblem::MigrationStuck {
        pod_cidrs: vec![net("10.244.4.0/24")],
        pools: vec![net("100.65.0.0/16")],
        operator_error: Some("allocator not configured".into()),
        pool_change,
    };

    let capacity = NodeProblem::Capacity {
        ranges: vec![net("10.244.4.0/27")],
        usable: 28,
        infra: 2,
        allocatable: 110,
    };
    let error = NodeProblem::OperatorError {
        error: "allocator not configured for the requested CIDR 10.244.4.0/24 of node \
                worker-node-a: unable to find a matching pool among 100.65.0.0/16, and a long tail \
                of words the operator added that no Event needs to carry along with it"
            .into(),
        pool: None,
    };

    let masq = || NodeProblem::NotMasqueraded {
        subnets: vec![("ovn-default".into(), vec![net("10.244.0.0/16")])],
    };
    let capacity_fix = Remedy::AddCapacity {
        node: node(),
        usable: Some(28),
    };
    let mut out = vec![
        (
            FindingKind::PodIpExhaustion,
            exhausted(IpamKind::HostScope),
            Remedy::AddCapacity {
                node: node(),
                usable: None,
            },
        ),
        (FindingKind::PodIpCapacityShortfall, capacity, capacity_fix),
        (
            FindingKind::CiliumIpamError,
            error,
            Remedy::FixOperatorAllocation { node: node() },
        ),
        (
            FindingKind::IpamMigrationStuck,
            stuck(false),
            Remedy::ClearPodCidrsAfterRollout { node: node() },
        ),
    ]
    .into_iter()
    .map(|(k, p, r)| (Mode::CiliumOnly, node_finding(k, p, r)))
    .collect::<Vec<_>>();
    for subnet in [Some(("ovn-default".to_owned(), net("10.244.0.0/16"))), None] {
        let mut f = node_finding(
            FindingKind::IngressIpNotMasqueraded,
            masq(),
            Remedy::PoolInMasqueradedSubnet { subnet },
        );
        f.ip = Some(ip("10.244.4.12"));
        out.push((Mode::KubeOvn, f));
    }
    out
}

pub(super) fn catalog() -> Vec<(Mode, Finding)> {
    let mut all = collisions();
    all.extend(pod_troubles());
    all.extend(node_troubles());
    all.extend(super::modes::by_ipam_mode());
    all.extend(super::kernel::cases());
    all.extend(super::cni_cases::host_local());
    all.extend(super::cni_cases::leftovers());
    all.extend(super::vip::cases());
    all.extend(super::calico_ipam::cases());
    all.extend(super::plan::cases());
    all
}
