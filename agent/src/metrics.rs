//! Prometheus metrics (OpenMetrics text via prometheus-client).
//!
//! Agent health metrics are ordinary registered metrics; the per-finding ones
//! are produced at scrape time by a collector over the latest reconcile, so a
//! cleared finding's series simply stops being written.

use std::sync::{Arc, RwLock};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{
        MetricType,
        counter::{ConstCounter, Counter},
        family::Family,
        gauge::{ConstGauge, Gauge},
        histogram::Histogram,
    },
    registry::{Registry, Unit},
};

use crate::{
    daemon::traffic::{SeriesKey, Totals},
    detect::{Finding, FindingKind, Scope},
};

/// The Content-Type of `/metrics` in OpenMetrics, what Prometheus asks for first.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic Prometheus text format (0.0.4), for clients that do not ask for
/// OpenMetrics (curl, promtool, older scrapers): counters' HELP and TYPE carry
/// the `_total` name there, which its parser requires.
pub const PROMETHEUS_TEXT: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

type Labels = Vec<(String, String)>;

/// What the collector exposes: the latest findings and traffic totals.
#[derive(Debug, Default)]
pub struct FindingsView {
    pub findings: Vec<Finding>,
    pub traffic: Vec<(SeriesKey, Totals)>,
}

pub struct Metrics {
    pub registry: Registry,
    pub view: Arc<RwLock<FindingsView>>,
    pub ebpf_attached: Gauge,
    pub source_up: Family<Labels, Gauge>,
    pub invalid_objects: Family<Labels, Counter>,
    pub reconciles: Family<Labels, Counter>,
    pub reconcile_duration: Histogram,
    pub last_reconcile: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let view = Arc::new(RwLock::new(FindingsView::default()));
        let ebpf_attached = Gauge::default();
        let source_up = Family::<Labels, Gauge>::default();
        let invalid_objects = Family::<Labels, Counter>::default();
        let reconciles = Family::<Labels, Counter>::default();
        let reconcile_duration = Histogram::new([
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
        ]);
        let last_reconcile = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        // A gauge fixed at 1 rather than an OpenMetrics `info`: promtool and
        // Prometheus' text parser (2.42) reject the `info` type.
        let build_info = Family::<Labels, Gauge>::default();
        build_info
            .get_or_create(&labels(&[("version", env!("CARGO_PKG_VERSION"))]))
            .set(1);
        registry.register(
            "ipshadow_build_info",
            "Build information of the running agent (value 1)",
            build_info,
        );
        registry.register(
            "ipshadow_ebpf_attached",
            "1 when the eBPF classifier is attached to lo, 0 when the agent runs netlink-only",
            ebpf_attached.clone(),
        );
        registry.register(
            "ipshadow_source_up",
            "1 when the last read of a source (netlink, pods, ciliumnodes, subnets) worked",
            source_up.clone(),
        );
        registry.register(
            "ipshadow_invalid_objects",
            "Malformed objects or fields skipped, by resource (counted once per distinct problem)",
            invalid_objects.clone(),
        );
        registry.register(
            "ipshadow_reconciles",
            "Reconciles run, by result (ok, error)",
            reconciles.clone(),
        );
        registry.register_with_unit(
            "ipshadow_reconcile_duration",
            "Time one reconcile takes: netlink read, FIB lookups, detection",
            Unit::Seconds,
            reconcile_duration.clone(),
        );
        registry.register_with_unit(
            "ipshadow_last_reconcile_timestamp",
            "Unix time of the last successful reconcile",
            Unit::Seconds,
            last_reconcile.clone(),
        );
        registry.register_collector(Box::new(FindingsCollector { view: view.clone() }));
        // Series that start at zero rather than appear on the first increment, so
        // increase() and alerts see 0, not "no data".
        for resource in ["pods", "ciliumnodes", "subnets", "nodes"] {
            let _ = invalid_objects.get_or_create(&labels(&[("resource", resource)]));
        }
        for result in ["ok", "error"] {
            let _ = reconciles.get_or_create(&labels(&[("result", result)]));
        }
        Self {
            registry,
            view,
            ebpf_attached,
            source_up,
            invalid_objects,
            reconciles,
            reconcile_duration,
            last_reconcile,
        }
    }

    /// Everything registered, as OpenMetrics or as Prometheus text.
    pub fn encode(&self, openmetrics: bool) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        if openmetrics {
            prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        }
        Ok(out)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[derive(Debug)]
struct FindingsCollector {
    view: Arc<RwLock<FindingsView>>,
}

/// The kinds counted in `ipshadow_collisions`: an address held by two owners.
const COLLISION_KINDS: [FindingKind; 4] = [
    FindingKind::RouterIpCollision,
    FindingKind::IngressIpCollision,
    FindingKind::HealthIpCollision,
    FindingKind::LocalAddressCollision,
];

impl Collector for FindingsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        // A poisoned lock only means a writer panicked mid-update; the data is still the last view.
        let view = self
            .view
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = |kind: FindingKind, scope: Option<Scope>| {
            view.findings
                .iter()
                .filter(|f| f.kind == kind && scope.is_none_or(|s| f.scope == s))
                .count() as i64
        };

        let mut m = encoder.encode_descriptor(
            "ipshadow_collisions",
            "Pod IPs that collide with an address a node holds, by kind and scope",
            None,
            MetricType::Gauge,
        )?;
        for kind in COLLISION_KINDS {
            for scope in [Scope::SameNode, Scope::CrossNode] {
                let l = labels(&[("kind", kind.as_str()), ("scope", scope.as_str())]);
                ConstGauge::new(count(kind, Some(scope))).encode(m.encode_family(&l)?)?;
            }
        }

        let mut m = encoder.encode_descriptor(
            "ipshadow_collision_info",
            "One series per active finding (value 1), with what collides with what",
            None,
            MetricType::Gauge,
        )?;
        for f in &view.findings {
            let (namespace, pod) = f
                .pod
                .as_ref()
                .map_or(("", ""), |p| (p.namespace.as_str(), p.name.as_str()));
            let ip = f.ip.to_string();
            let l = labels(&[
                ("kind", f.kind.as_str()),
                ("scope", f.scope.as_str()),
                ("namespace", namespace),
                ("pod", pod),
                ("ip", &ip),
                ("owner_node", &f.owner.node),
                ("role", f.owner.role.as_str()),
                ("device", f.owner.device.as_deref().unwrap_or("")),
            ]);
            ConstGauge::new(1i64).encode(m.encode_family(&l)?)?;
        }

        let m = encoder.encode_descriptor(
            "ipshadow_host_route_blackholes",
            "Pods on this node whose host route ends in blackhole, unreachable, prohibit or nowhere",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(count(FindingKind::HostRouteBlackhole, None)).encode(m)?;
        let m = encoder.encode_descriptor(
            "ipshadow_allocator_overlaps",
            "Cilium infrastructure addresses (or ranges) of this node that kube-ovn may hand to pods",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(count(FindingKind::AllocatorOverlap, None)).encode(m)?;

        type Pick = fn(&Totals) -> u64;
        let traffic: [(&str, &str, Pick); 4] = [
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
            for (key, totals) in &view.traffic {
                let ip = key.ip.to_string();
                let l = labels(&[
                    ("ip", &ip),
                    ("namespace", &key.namespace),
                    ("pod", &key.pod),
                ]);
                ConstCounter::new(pick(totals)).encode(m.encode_family(&l)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{Owner, PodRef, Role};

    fn finding(kind: FindingKind, scope: Scope, ip: &str) -> Finding {
        Finding {
            kind,
            scope,
            ip: ip.parse().expect("ip"),
            pod: Some(PodRef {
                namespace: "ns".into(),
                name: "p".into(),
                uid: "u".into(),
            }),
            owner: Owner {
                node: "n".into(),
                role: Role::Router,
                device: Some("cilium_host".into()),
            },
            message: String::new(),
            pod_node: None,
            ip_source: None,
            fib: None,
            shadowed_route: None,
            subnet: None,
            cilium_range: None,
            evidence: None,
        }
    }

    #[test]
    fn findings_and_traffic_are_exposed_in_both_formats() {
        let m = Metrics::new();
        {
            let mut v = m.view.write().expect("lock");
            v.findings = vec![
                finding(FindingKind::RouterIpCollision, Scope::SameNode, "10.0.0.1"),
                finding(FindingKind::HostRouteBlackhole, Scope::SameNode, "10.0.0.2"),
            ];
            v.traffic = vec![(
                SeriesKey {
                    ip: "10.0.0.1".parse().expect("ip"),
                    namespace: "ns".into(),
                    pod: "p".into(),
                },
                Totals {
                    packets: 4,
                    bytes: 256,
                    tcp_syns: 2,
                    refused: 2,
                },
            )];
        }
        let om = m.encode(true).expect("encodes");
        assert!(om.ends_with("# EOF\n"), "{om}");
        for line in [
            "ipshadow_collisions{kind=\"RouterIPCollision\",scope=\"same-node\"} 1",
            "ipshadow_collisions{kind=\"HealthIPCollision\",scope=\"cross-node\"} 0",
            "ipshadow_host_route_blackholes 1",
            "ipshadow_allocator_overlaps 0",
            "ipshadow_refused_connections_total{ip=\"10.0.0.1\",namespace=\"ns\",pod=\"p\"} 2",
            "ipshadow_blackholed_bytes_total{ip=\"10.0.0.1\",namespace=\"ns\",pod=\"p\"} 256",
            "ipshadow_build_info{version=",
        ] {
            assert!(om.contains(line), "{line} missing in\n{om}");
        }
        let text = m.encode(false).expect("encodes");
        // Prometheus text names counter families with their _total suffix.
        assert!(
            text.contains("# TYPE ipshadow_refused_connections_total counter"),
            "{text}"
        );
        assert!(!text.contains("# EOF"));

        // A cleared finding's series is gone on the next scrape.
        m.view.write().expect("lock").findings.clear();
        let om = m.encode(true).expect("encodes");
        assert!(!om.contains("ipshadow_collision_info{"), "{om}");
        assert!(
            om.contains("ipshadow_collisions{kind=\"RouterIPCollision\",scope=\"same-node\"} 0")
        );
    }
}
