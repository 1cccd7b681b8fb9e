//! Prometheus metrics (OpenMetrics text via prometheus-client).
//!
//! Agent health metrics are ordinary registered metrics; the per-finding ones
//! are produced at scrape time by a collector over the latest reconcile, so a
//! cleared finding's series simply stops being written.

mod collector;
mod labels;

use self::labels::BuildLabels;
pub use self::labels::{
    AuthLabels, ListenerLabels, Outcome, RemediationLabels, ResourceLabels, ResultLabels,
    SourceLabels, TaskLabels, WriteLabels, WriteResult,
};

use std::sync::Arc;

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::{Registry, Unit},
};

use super::traffic::Traffic;
use crate::detect::Finding;

/// The Content-Type of `/metrics` in OpenMetrics, what Prometheus asks for first.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic Prometheus text format (0.0.4), for clients that do not ask for
/// OpenMetrics (curl, promtool, older scrapers): counters' HELP and TYPE carry
/// the `_total` name there, which its parser requires.
pub const PROMETHEUS_TEXT: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// What the collector exposes: the latest findings and traffic totals.
#[derive(Clone, Debug, Default)]
pub struct FindingsView {
    /// The findings of the last reconcile.
    pub findings: Arc<Vec<Finding>>,
    /// The traffic series and their totals.
    pub traffic: Arc<Traffic>,
    /// What breaks behind each pod with a finding, as last looked up.
    pub impacts: Arc<crate::report::Impacts>,
}

/// Where the collector reads the latest [`FindingsView`] at each scrape: what
/// the subsystems publish, never a copy they keep in step.
pub type ViewSource = Box<dyn Fn() -> FindingsView + Send + Sync>;

/// The agent's metrics and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    /// `ipshadow_ebpf_attached`.
    pub ebpf_attached: Gauge,
    /// `ipshadow_source_up`.
    pub source_up: Family<SourceLabels, Gauge>,
    /// `ipshadow_invalid_objects_total`.
    pub invalid_objects: Family<ResourceLabels, Counter>,
    /// `ipshadow_reconciles_total`.
    pub reconciles: Family<ResultLabels, Counter>,
    /// `ipshadow_reconcile_duration_seconds`.
    pub reconcile_duration: Histogram,
    /// `ipshadow_last_reconcile_timestamp_seconds`.
    pub last_reconcile: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// `ipshadow_event_writes_total`.
    pub event_writes: Family<WriteLabels, Counter>,
    /// `ipshadow_node_condition_writes_total`.
    pub condition_writes: Family<WriteLabels, Counter>,
    /// `ipshadow_remediations_total`.
    pub remediations: Family<RemediationLabels, Counter>,
    /// `ipshadow_events_pending`.
    pub events_pending: Gauge,
    /// `ipshadow_http_connections_rejected_total`.
    pub http_rejected: Family<ListenerLabels, Counter>,
    /// `ipshadow_task_up`.
    pub task_up: Family<TaskLabels, Gauge>,
    /// `ipshadow_http_auth_total`.
    pub http_auth: Family<AuthLabels, Counter>,
}

impl Metrics {
    /// Every metric registered, the per-finding ones through a collector
    /// that reads `view` at each scrape.
    pub fn new(view: ViewSource) -> Self {
        let mut registry = Registry::default();
        let ebpf_attached = Gauge::default();
        let source_up = Family::<SourceLabels, Gauge>::default();
        let invalid_objects = Family::<ResourceLabels, Counter>::default();
        let reconciles = Family::<ResultLabels, Counter>::default();
        let reconcile_duration = Histogram::new([
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
        ]);
        let last_reconcile = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        let (http_rejected, task_up, http_auth) = register_process(&mut registry);
        let (event_writes, events_pending, condition_writes) = register_writes(&mut registry);
        let remediations = Family::<RemediationLabels, Counter>::default();
        registry.register(
            "ipshadow_remediations",
            "Remediation actions (--remediate), by action (dry-run, evict) and result",
            remediations.clone(),
        );
        // A gauge fixed at 1 rather than an OpenMetrics `info`: promtool and
        // Prometheus' text parser (2.42) reject the `info` type.
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
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
        registry.register_collector(Box::new(collector::FindingsCollector::new(view)));
        // Series that start at zero rather than appear on the first increment, so
        // increase() and alerts see 0, not "no data".
        for resource in ["pods", "ciliumnodes", "subnets", "nodes"] {
            let _ = invalid_objects.get_or_create(&ResourceLabels { resource });
        }
        for result in [Outcome::ok, Outcome::error] {
            let _ = reconciles.get_or_create(&ResultLabels { result });
        }
        Self {
            registry,
            ebpf_attached,
            source_up,
            invalid_objects,
            reconciles,
            reconcile_duration,
            last_reconcile,
            event_writes,
            condition_writes,
            remediations,
            events_pending,
            http_rejected,
            task_up,
            http_auth,
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

/// `ipshadow_http_connections_rejected_total` (both listeners' series at zero)
/// `ipshadow_task_up` and `ipshadow_http_auth_total`.
fn register_process(
    registry: &mut Registry,
) -> (
    Family<ListenerLabels, Counter>,
    Family<TaskLabels, Gauge>,
    Family<AuthLabels, Counter>,
) {
    let task_up = Family::<TaskLabels, Gauge>::default();
    registry.register(
        "ipshadow_task_up",
        "1 while a long-lived task of the agent runs, 0 once it stopped (then /healthz fails)",
        task_up.clone(),
    );
    let rejected = Family::<ListenerLabels, Counter>::default();
    registry.register(
        "ipshadow_http_connections_rejected",
        "HTTP connections closed at accept because the listener, or the client's address, \
         held its maximum at once",
        rejected.clone(),
    );
    for (listener, limit) in [
        ("metrics", "listener"),
        ("metrics", "peer"),
        ("health", "listener"),
    ] {
        let _ = rejected.get_or_create(&ListenerLabels { listener, limit });
    }
    let auth = Family::<AuthLabels, Counter>::default();
    registry.register(
        "ipshadow_http_auth",
        "Requests to the metrics listener reviewed with --metrics-auth kubernetes, by result",
        auth.clone(),
    );
    (rejected, task_up, auth)
}

/// `ipshadow_event_writes_total` (every result at zero), `ipshadow_events_pending`
/// and `ipshadow_node_condition_writes_total`.
fn register_writes(
    registry: &mut Registry,
) -> (
    Family<WriteLabels, Counter>,
    Gauge,
    Family<WriteLabels, Counter>,
) {
    let event_writes = Family::<WriteLabels, Counter>::default();
    let events_pending = Gauge::default();
    registry.register(
        "ipshadow_event_writes",
        "Event writes to the API server, by result (created, patched, failed, dropped)",
        event_writes.clone(),
    );
    registry.register(
        "ipshadow_events_pending",
        "Event series and resolutions not written yet (the API server refused or was away)",
        events_pending.clone(),
    );
    for result in [
        WriteResult::created,
        WriteResult::patched,
        WriteResult::failed,
        WriteResult::dropped,
    ] {
        let _ = event_writes.get_or_create(&WriteLabels { result });
    }
    let condition_writes = Family::<WriteLabels, Counter>::default();
    registry.register(
        "ipshadow_node_condition_writes",
        "Writes of the Node condition PodIPsShadowed, by result (patched, failed)",
        condition_writes.clone(),
    );
    // Both results present from the start: a restarted agent exports the same series.
    for result in [WriteResult::patched, WriteResult::failed] {
        let _ = condition_writes.get_or_create(&WriteLabels { result });
    }
    (event_writes, events_pending, condition_writes)
}

impl Default for Metrics {
    /// Every metric registered, with no findings to show.
    fn default() -> Self {
        Self::new(Box::new(FindingsView::default))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        detect::{Owner, PodRef, PodSite, Remedy, Role, Scope},
        inventory::{DeadEnd, IpSource, Source},
        report::traffic::{Counters, SeriesKey},
    };

    fn site() -> PodSite {
        PodSite {
            pod: PodRef {
                namespace: "ns".into(),
                name: "p".into(),
                uid: "u".into(),
            },
            node: "n".into(),
            ip_source: IpSource::Status,
            created: None,
            controller: None,
        }
    }

    #[test]
    fn findings_and_traffic_are_exposed_in_both_formats() {
        let shared = Arc::new(std::sync::Mutex::new(FindingsView::default()));
        let source = Arc::clone(&shared);
        let m = Metrics::new(Box::new(move || source.lock().expect("lock").clone()));
        {
            let mut v = shared.lock().expect("lock");
            let owner = Owner {
                node: "n".into(),
                role: Role::Router,
                device: Some("cilium_host".into()),
                source: Source::SpecAddresses,
            };
            v.findings = Arc::new(vec![
                Finding::collision(
                    Scope::SameNode,
                    "10.0.0.1".parse().expect("ip"),
                    owner,
                    site(),
                    (None, None),
                    Remedy::ReallocatePod { node: "n".into() },
                ),
                Finding::blackhole(
                    "10.0.0.2".parse().expect("ip"),
                    site(),
                    DeadEnd::Blackhole,
                    None,
                    false,
                ),
            ]);
            v.traffic = Arc::new(vec![(
                SeriesKey {
                    ip: "10.0.0.1".parse().expect("ip"),
                    namespace: "ns".into(),
                    pod: "p".into(),
                },
                Counters {
                    packets: 4,
                    bytes: 256,
                    tcp_syns: 2,
                    refused: 2,
                    ..Counters::default()
                },
            )]);
        }
        let om = m.encode(true).expect("encodes");
        assert!(om.ends_with("# EOF\n"), "{om}");
        for line in [
            "ipshadow_collisions{kind=\"RouterIPCollision\",scope=\"same-node\"} 1",
            "ipshadow_collisions{kind=\"HealthIPCollision\",scope=\"cross-node\"} 0",
            "ipshadow_host_route_blackholes 1",
            "ipshadow_allocator_overlaps 0",
            "ipshadow_ipam_problems{kind=\"PodIPExhaustion\"} 0",
            "ipshadow_ipam_problems{kind=\"IngressIPNotMasqueraded\"} 0",
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
        shared.lock().expect("lock").findings = Arc::default();
        let om = m.encode(true).expect("encodes");
        assert!(!om.contains("ipshadow_collision_info{"), "{om}");
        assert!(
            om.contains("ipshadow_collisions{kind=\"RouterIPCollision\",scope=\"same-node\"} 0")
        );
    }
}
