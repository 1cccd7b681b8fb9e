//! The names of the enums are a contract: JSON fields, metric labels, Event
//! reasons, the words of messages. strum derives them; these tables pin every
//! variant's name as it was spelled by hand, and the match in each table is
//! exhaustive, so a new variant does not compile until its name is pinned.

use strum::IntoEnumIterator;

use super::super::{FindingKind, Scope, Trust, impact::Severity};
use crate::inventory::{DeadEnd, IpSource, Role, RouteKind, ServiceField, Source};

/// Every variant's `as_str` (if any), Display and, where `json` holds, its
/// serde name agree with `pinned`.
fn check<T: IntoEnumIterator + std::fmt::Display + std::fmt::Debug>(
    pinned: impl Fn(&T) -> &'static str,
    as_str: Option<fn(&T) -> &'static str>,
    json: Option<fn(&T) -> String>,
) {
    let mut seen = 0;
    for v in T::iter() {
        let want = pinned(&v);
        assert_eq!(v.to_string(), want, "Display of {v:?}");
        if let Some(as_str) = as_str {
            assert_eq!(as_str(&v), want, "as_str of {v:?}");
        }
        if let Some(json) = json {
            assert_eq!(json(&v), format!("\"{want}\""), "JSON of {v:?}");
        }
        seen += 1;
    }
    assert!(seen > 0, "an enum with no variants iterated");
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("a unit variant serializes")
}

#[test]
fn finding_kinds_keep_their_names_everywhere() {
    check::<FindingKind>(
        |k| match k {
            FindingKind::RouterIpCollision => "RouterIPCollision",
            FindingKind::IngressIpCollision => "IngressIPCollision",
            FindingKind::HealthIpCollision => "HealthIPCollision",
            FindingKind::TunnelIpCollision => "TunnelIPCollision",
            FindingKind::GatewayIpCollision => "GatewayIPCollision",
            FindingKind::LocalAddressCollision => "LocalAddressCollision",
            FindingKind::StaleBridgeAddress => "StaleBridgeAddress",
            FindingKind::HostRouteBlackhole => "HostRouteBlackhole",
            FindingKind::PodRouteTaken => "PodRouteTaken",
            FindingKind::AllocatorOverlap => "AllocatorOverlap",
            FindingKind::DuplicatePodIp => "DuplicatePodIP",
            FindingKind::StaleCiliumEndpoint => "StaleCiliumEndpoint",
            FindingKind::StaleCalicoAllocation => "StaleCalicoAllocation",
            FindingKind::PodIpExhaustion => "PodIPExhaustion",
            FindingKind::PodIpCapacityShortfall => "PodIPCapacityShortfall",
            FindingKind::CiliumIpamError => "CiliumIPAMError",
            FindingKind::IpamMigrationStuck => "IPAMMigrationStuck",
            FindingKind::IngressIpNotMasqueraded => "IngressIPNotMasqueraded",
            FindingKind::ClusterPoolNearlyFull => "ClusterPoolNearlyFull",
            FindingKind::PodRouteMisdirected => "PodRouteMisdirected",
            FindingKind::PodRouteDeadEnd => "PodRouteDeadEnd",
            FindingKind::PodAddressHeldTwice => "PodAddressHeldTwice",
            FindingKind::LeakedSandboxAddress => "LeakedSandboxAddress",
            FindingKind::PodAddressNotHeld => "PodAddressNotHeld",
            FindingKind::PodAddressDadFailed => "PodAddressDadFailed",
            FindingKind::PodAddressTentative => "PodAddressTentative",
            FindingKind::NodeAddressDadFailed => "NodeAddressDadFailed",
            FindingKind::NodeAddressShadowed => "NodeAddressShadowed",
            FindingKind::UnallocatedTunnelAddress => "UnallocatedTunnelAddress",
            FindingKind::AddressPlanOverlap => "AddressPlanOverlap",
            FindingKind::DuplicateSecondaryIp => "DuplicateSecondaryIP",
        },
        Some(|k| k.as_str()),
        Some(json),
    );
    // In declaration order (metrics and audits list them so), each name once:
    // one name for two kinds would merge their series and Events.
    let all: Vec<_> = FindingKind::all().map(FindingKind::as_str).collect();
    assert_eq!(all.first(), Some(&"RouterIPCollision"));
    let names: std::collections::BTreeSet<_> = all.iter().collect();
    assert_eq!(names.len(), all.len(), "{all:?}");
}

#[test]
fn scopes_trusts_and_severities_keep_their_names() {
    check::<Scope>(
        |s| match s {
            Scope::SameNode => "same-node",
            Scope::CrossNode => "cross-node",
        },
        Some(|s| s.as_str()),
        Some(json),
    );
    check::<Trust>(
        |t| match t {
            Trust::Kernel => "kernel",
            Trust::Cluster => "cluster",
            Trust::Unchecked => "unchecked",
            Trust::TenantAddress => "tenant-address",
            Trust::Hint => "hint",
        },
        Some(|t| t.as_str()),
        Some(json),
    );
    check::<Severity>(
        |s| match s {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Warning => "warning",
        },
        Some(|s| s.as_str()),
        Some(json),
    );
}

#[test]
fn roles_and_ip_sources_keep_their_names() {
    check::<Role>(
        |r| match r {
            Role::Router => "router",
            Role::Ingress => "ingress",
            Role::Health => "health",
            Role::Tunnel => "tunnel",
            Role::Gateway => "gateway",
            Role::ManagementPort => "management-port",
            Role::OvnRouterPort => "ovn-router-port",
            Role::Local => "local",
            Role::Pod => "pod",
            Role::Endpoint => "endpoint",
            Role::Node => "node",
        },
        Some(|r| r.as_str()),
        Some(json),
    );
    check::<IpSource>(
        |s| match s {
            IpSource::Status => "status",
            IpSource::Annotation => "annotation",
            IpSource::KubeOvnIp => "kube-ovn-ip",
            IpSource::Event => "event",
            IpSource::NetworkStatus => "network-status",
            IpSource::Kernel => "kernel",
        },
        Some(IpSource::as_str),
        Some(json),
    );
}

#[test]
fn sources_keep_their_words_and_their_json_names() {
    check::<Source>(
        |s| match s {
            Source::SpecAddresses => "CiliumNode.spec.addresses",
            Source::SpecIngress => "CiliumNode.spec.ingress",
            Source::SpecHealth => "CiliumNode.spec.health",
            Source::StatusIpamUsed => "CiliumNode.status.ipam.used",
            Source::NodeAnnotation => "the Node's network.cilium.io annotations",
            Source::LegacyNodeAnnotation => "the Node's legacy io.cilium.network annotations",
            Source::OvnNodeAnnotation => "the Node's k8s.ovn.org/node-subnets annotation",
            Source::OvnJoinAnnotation => {
                "the Node's k8s.ovn.org/node-gateway-router-lrp-ifaddr(s) annotation"
            }
            Source::OvnTransitAnnotation => {
                "the Node's k8s.ovn.org/node-transit-switch-port-ifaddr annotation"
            }
            Source::OvnNodeId => {
                "the Node's k8s.ovn.org/node-id in ovn-kubernetes' default join subnet"
            }
            Source::CalicoNodeAnnotation => "the Node's projectcalico.org annotations",
            Source::Kernel => "the node's kernel",
            Source::PodStatus => "the other pod's status.podIPs",
            Source::KubeletEvent => "kubelet's FailedCreatePodSandBox Event",
            Source::OperatorStatus => "CiliumNode.status.ipam.operator-status",
            Source::CiliumConfig => "the cilium-config ConfigMap",
            Source::NodeStatus => "the Node's status.allocatable",
            Source::Subnets => "kube-ovn's Subnets",
            Source::Services => "the Services' addresses",
            Source::CalicoIpamBlock => "Calico's IPAMBlocks",
            Source::AddressPlan => "the cluster's address plan",
            Source::PodNetworkStatus => "the other pod's network-status annotation",
        },
        Some(|s| s.as_str()),
        None,
    );
    // Its JSON names are serde's, not its words.
    for s in Source::iter() {
        let want = match s {
            Source::SpecAddresses => "ciliumnode.spec.addresses",
            Source::SpecIngress => "ciliumnode.spec.ingress",
            Source::SpecHealth => "ciliumnode.spec.health",
            Source::StatusIpamUsed => "ciliumnode.status.ipam.used",
            Source::NodeAnnotation => "node.annotations",
            Source::LegacyNodeAnnotation => "node.annotations.legacy",
            Source::OvnNodeAnnotation => "node.annotations.ovn-kubernetes",
            Source::OvnJoinAnnotation => "node.annotations.ovn-kubernetes.join",
            Source::OvnTransitAnnotation => "node.annotations.ovn-kubernetes.transit",
            Source::OvnNodeId => "node.annotations.ovn-kubernetes.node-id",
            Source::CalicoNodeAnnotation => "node.annotations.calico",
            Source::Kernel => "kernel",
            Source::PodStatus => "pod.status.podIPs",
            Source::KubeletEvent => "kubelet.event",
            Source::OperatorStatus => "ciliumnode.status.ipam.operator-status",
            Source::CiliumConfig => "cilium-config",
            Source::NodeStatus => "node.status.allocatable",
            Source::Subnets => "subnets",
            Source::Services => "services",
            Source::CalicoIpamBlock => "ipamblock.calico",
            Source::AddressPlan => "address-plan",
            Source::PodNetworkStatus => "pod.annotations.network-status",
        };
        assert_eq!(json(&s), format!("\"{want}\""), "JSON of {s:?}");
    }
}

#[test]
fn service_fields_and_route_kinds_keep_their_names() {
    check::<ServiceField>(
        |f| match f {
            ServiceField::ExternalIps => "spec.externalIPs",
            ServiceField::LoadBalancerIp => "spec.loadBalancerIP",
            ServiceField::LoadBalancerIngress => "status.loadBalancer.ingress",
            ServiceField::ClusterIps => "spec.clusterIPs",
        },
        Some(|f| f.as_str()),
        None,
    );
    check::<RouteKind>(
        |k| match k {
            RouteKind::Unicast => "unicast",
            RouteKind::Local => "local",
            RouteKind::Broadcast => "broadcast",
            RouteKind::Anycast => "anycast",
            RouteKind::Multicast => "multicast",
            RouteKind::Blackhole => "blackhole",
            RouteKind::Unreachable => "unreachable",
            RouteKind::Prohibit => "prohibit",
            RouteKind::Throw => "throw",
            RouteKind::Other => "other",
        },
        None,
        Some(json),
    );
    check::<DeadEnd>(
        |d| match d {
            DeadEnd::Blackhole => "blackhole",
            DeadEnd::Unreachable => "unreachable",
            DeadEnd::Prohibit => "prohibit",
            DeadEnd::NoRoute => "no route",
        },
        None,
        None,
    );
}
