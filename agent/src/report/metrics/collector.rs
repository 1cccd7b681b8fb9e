//! The scrape-time families: one series per finding and per traffic series,
//! written from the latest view, so a cleared finding's series simply stops.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
};

use super::FindingsView;
use crate::{
    detect::{
        FindingKind, Scope,
        impact::{Impact, Severity},
    },
    report::traffic::Counters,
};

#[derive(EncodeLabelSet)]
struct CollisionLabels {
    kind: &'static str,
    scope: &'static str,
}

// The derive takes no lifetimes: these own their strings (one scrape's worth).
#[derive(EncodeLabelSet)]
struct FindingLabels {
    kind: &'static str,
    scope: &'static str,
    namespace: String,
    pod: String,
    ip: String,
    owner_node: String,
    role: &'static str,
    device: String,
    ip_source: &'static str,
    /// `critical`, `high` or `warning` (what breaks behind the pod).
    severity: &'static str,
    /// Who could have written what it rests on: `kernel`, `cluster`,
    /// `unchecked`, `tenant-address` or `hint` (alerts leave hints out).
    trust: &'static str,
}

#[derive(EncodeLabelSet)]
struct TrafficLabels {
    ip: String,
    namespace: String,
    pod: String,
}

/// A traffic counter family: name, help, and which counter it exposes.
type TrafficMetric = (&'static str, &'static str, fn(&Counters) -> u64);

/// A count as a gauge value (saturating: a node never has 2^63 findings).
fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Writes the per-finding and traffic families from the latest view at every scrape.
pub(super) struct FindingsCollector {
    view: super::ViewSource,
}

impl std::fmt::Debug for FindingsCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FindingsCollector").finish_non_exhaustive()
    }
}

impl FindingsCollector {
    pub(super) fn new(view: super::ViewSource) -> Self {
        Self { view }
    }
}

/// The kinds counted in `ipshadow_ipam_problems`: the loud failures kubelet
/// and Cilium report, and the allocator problems behind them.
const IPAM_KINDS: [FindingKind; 11] = [
    FindingKind::DuplicatePodIp,
    FindingKind::StaleCiliumEndpoint,
    FindingKind::PodRouteTaken,
    FindingKind::PodIpExhaustion,
    FindingKind::PodIpCapacityShortfall,
    FindingKind::CiliumIpamError,
    FindingKind::IpamMigrationStuck,
    FindingKind::IngressIpNotMasqueraded,
    FindingKind::ClusterPoolNearlyFull,
    // The node's finding (the kernel shows it); each refused pod's is a hint.
    FindingKind::StaleBridgeAddress,
    // Calico's IPAM may hand the node's tunnel address to a pod.
    FindingKind::UnallocatedTunnelAddress,
];

#[derive(EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

/// The kinds counted in `ipshadow_kernel_truth_problems`: what the pods'
/// namespaces hold against the host's routes and the API.
const KERNEL_KINDS: [FindingKind; 5] = [
    FindingKind::PodRouteMisdirected,
    FindingKind::PodRouteDeadEnd,
    FindingKind::PodAddressHeldTwice,
    FindingKind::LeakedSandboxAddress,
    FindingKind::PodAddressNotHeld,
];

/// The kinds counted in `ipshadow_collisions`: an address held by two owners.
const COLLISION_KINDS: [FindingKind; 6] = [
    FindingKind::RouterIpCollision,
    FindingKind::IngressIpCollision,
    FindingKind::HealthIpCollision,
    FindingKind::TunnelIpCollision,
    FindingKind::GatewayIpCollision,
    FindingKind::LocalAddressCollision,
];

impl Collector for FindingsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let view = (self.view)();
        encode_collisions(&view, &mut encoder)?;
        encode_info(&view, &mut encoder)?;
        encode_counts(&view, &mut encoder)?;
        encode_hints(&view, &mut encoder)?;
        encode_traffic(&view, &mut encoder)
    }
}

/// Findings of `kind` (and `scope`, when given) the counts alerts fire on:
/// hints are left out, a tenant can forge those.
fn counted(view: &FindingsView, kind: FindingKind, scope: Option<Scope>) -> i64 {
    gauge(
        view.findings
            .iter()
            .filter(|f| f.trust.speaks_for_node())
            .filter(|f| f.kind == kind && scope.is_none_or(|s| f.scope == s))
            .count(),
    )
}

/// `ipshadow_collisions`: every kind × scope, zeros included.
fn encode_collisions(
    view: &FindingsView,
    encoder: &mut DescriptorEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(
        "ipshadow_collisions",
        "Pod IPs that collide with an address a node holds, by kind and scope",
        None,
        MetricType::Gauge,
    )?;
    for kind in COLLISION_KINDS {
        for scope in [Scope::SameNode, Scope::CrossNode] {
            let l = CollisionLabels {
                kind: kind.as_str(),
                scope: scope.as_str(),
            };
            ConstGauge::new(counted(view, kind, Some(scope))).encode(m.encode_family(&l)?)?;
        }
    }
    Ok(())
}

/// `ipshadow_collision_info`: one series per finding.
fn encode_info(
    view: &FindingsView,
    encoder: &mut DescriptorEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(
        "ipshadow_collision_info",
        "One series per active finding (value 1), with what collides with what",
        None,
        MetricType::Gauge,
    )?;
    for f in view.findings.iter() {
        let (namespace, pod) = f
            .pod()
            .map_or_else(Default::default, |p| (p.namespace.clone(), p.name.clone()));
        let l = FindingLabels {
            kind: f.kind.as_str(),
            scope: f.scope.as_str(),
            namespace,
            pod,
            ip: f.ip_text(),
            owner_node: f.owner.node.clone(),
            role: f.owner.role.as_str(),
            device: f.owner.device.clone().unwrap_or_default(),
            ip_source: f.site().map_or("", |s| s.ip_source.as_str()),
            severity: f
                .pod()
                .and_then(|p| view.impacts.get(p))
                .map_or(Severity::Warning, Impact::severity)
                .as_str(),
            trust: f.trust.as_str(),
        };
        ConstGauge::new(1i64).encode(m.encode_family(&l)?)?;
    }
    Ok(())
}

/// The per-node counts: blackholed host routes, allocator overlaps, and the
/// loud IPAM problems by kind (every kind always present).
fn encode_counts(
    view: &FindingsView,
    encoder: &mut DescriptorEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let m = encoder.encode_descriptor(
        "ipshadow_host_route_blackholes",
        "Pods on this node whose host route ends in blackhole, unreachable, prohibit or nowhere",
        None,
        MetricType::Gauge,
    )?;
    ConstGauge::new(counted(view, FindingKind::HostRouteBlackhole, None)).encode(m)?;
    let m = encoder.encode_descriptor(
        "ipshadow_allocator_overlaps",
        "Cilium ranges of this node overlapping a kube-ovn Subnet that may hand their addresses to pods (one per range and Subnet)",
        None,
        MetricType::Gauge,
    )?;
    ConstGauge::new(counted(view, FindingKind::AllocatorOverlap, None)).encode(m)?;
    let mut m = encoder.encode_descriptor(
        "ipshadow_ipam_problems",
        "Sandbox refusals and allocator problems of this node, by kind (every kind always present)",
        None,
        MetricType::Gauge,
    )?;
    for kind in IPAM_KINDS {
        let l = KindLabels {
            kind: kind.as_str(),
        };
        ConstGauge::new(counted(view, kind, None)).encode(m.encode_family(&l)?)?;
    }
    let mut m = encoder.encode_descriptor(
        "ipshadow_kernel_truth_problems",
        "Addresses where what this node's pod namespaces hold contradicts its per-pod routes or \
         the API, by kind (every kind always present)",
        None,
        MetricType::Gauge,
    )?;
    for kind in KERNEL_KINDS {
        let l = KindLabels {
            kind: kind.as_str(),
        };
        ConstGauge::new(counted(view, kind, None)).encode(m.encode_family(&l)?)?;
    }
    Ok(())
}

/// `ipshadow_hints`: what the counts above leave out, by kind.
fn encode_hints(
    view: &FindingsView,
    encoder: &mut DescriptorEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(
        "ipshadow_hints",
        "Findings resting on what a tenant can write (a pod's IP annotation, an Event), by kind: \
         reported, never counted above, never acted on",
        None,
        MetricType::Gauge,
    )?;
    for kind in FindingKind::all() {
        let hints = view
            .findings
            .iter()
            .filter(|f| f.kind == kind && !f.trust.speaks_for_node())
            .count();
        let l = KindLabels {
            kind: kind.as_str(),
        };
        ConstGauge::new(gauge(hints)).encode(m.encode_family(&l)?)?;
    }
    Ok(())
}

/// The traffic counter families, one series per traffic series.
fn encode_traffic(
    view: &FindingsView,
    encoder: &mut DescriptorEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let traffic: [TrafficMetric; 4] = [
        (
            "ipshadow_blackholed_packets",
            "Packets from this node's host to a shadowed pod IP, delivered locally instead of to the pod",
            |t| t.packets,
        ),
        (
            "ipshadow_blackholed_bytes",
            "Bytes from this node's host to a shadowed pod IP, delivered locally instead of to the pod",
            |t| t.bytes,
        ),
        (
            "ipshadow_blackholed_tcp_syns",
            "TCP connection attempts (SYN) from this node's host to a shadowed pod IP",
            |t| t.tcp_syns,
        ),
        (
            "ipshadow_refused_connections",
            "TCP connections to a shadowed pod IP refused (RST) by this node's own stack",
            |t| t.refused,
        ),
    ];
    for (name, help, pick) in traffic {
        let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (key, totals) in view.traffic.iter() {
            let l = TrafficLabels {
                ip: key.ip.to_string(),
                namespace: key.namespace.clone(),
                pod: key.pod.clone(),
            };
            ConstCounter::new(pick(totals)).encode(m.encode_family(&l)?)?;
        }
    }
    Ok(())
}
