//! Prometheus metrics (OpenMetrics text via prometheus-client).
//!
//! Agent health metrics are ordinary registered metrics, each subsystem's
//! registered and kept by it; the per-finding ones are produced at scrape
//! time by a collector over the latest reconcile, so a cleared finding's
//! series simply stops being written.

mod collector;
mod labels;

use self::labels::BuildLabels;
pub use self::labels::{
    AuthLabels, ListenerLabels, Outcome, RemediationLabels, ResourceLabels, ResultLabels,
    SourceLabels, TaskLabels, WriteLabels, WriteResult,
};

use std::sync::Arc;

use prometheus_client::metrics::{family::Family, gauge::Gauge};
pub use prometheus_client::registry::Registry;

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

/// The registry `/metrics` encodes. Each subsystem registers its own metrics
/// in it at start (`register` on its metrics struct) and keeps them; this
/// adds what belongs to no subsystem: the build and the scrape-time findings.
pub struct Exposition {
    registry: Registry,
}

impl Exposition {
    /// `registry` (every subsystem's metrics registered), plus
    /// `ipshadow_build_info` and the per-finding families, which a collector
    /// writes from `view` at each scrape.
    pub fn new(mut registry: Registry, view: ViewSource) -> Self {
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
        registry.register_collector(Box::new(collector::FindingsCollector::new(view)));
        Self { registry }
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

impl Default for Exposition {
    /// Nothing but the build and no findings.
    fn default() -> Self {
        Self::new(Registry::default(), Box::new(FindingsView::default))
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
        let m = Exposition::new(
            Registry::default(),
            Box::new(move || source.lock().expect("lock").clone()),
        );
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
