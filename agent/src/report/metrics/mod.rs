//! Prometheus metrics (OpenMetrics text via prometheus-client).
//!
//! Agent health metrics are ordinary registered metrics, each subsystem's
//! registered and kept by it; the per-finding ones are produced at scrape
//! time by a collector over the latest reconcile, so a cleared finding's
//! series simply stops being written, and each scrape gets the pods' names
//! or not ([`Names`]).

mod collector;
mod labels;
mod traffic;

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

/// Whether a scrape's series carry the names tenants chose: a pod's
/// namespace and name (`namespace`, `pod`). Without them a series keeps
/// everything else (kind, ip, owner, …), and series left the same are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    /// With the pods' names.
    Shown,
    /// `namespace` and `pod` empty.
    Omitted,
}

/// The registry `/metrics` encodes. Each subsystem registers its own metrics
/// in it at start (`register` on its metrics struct) and keeps them; this
/// adds what belongs to no subsystem: the build and the scrape-time findings.
pub struct Exposition {
    registry: Registry,
    view: ViewSource,
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
                revision: env!("IPSHADOW_REVISION"),
            })
            .set(1);
        registry.register(
            "ipshadow_build_info",
            "Build information of the running agent (value 1)",
            build_info,
        );
        Self { registry, view }
    }

    /// Everything registered and the findings as last published, with the
    /// pods' names or without, as OpenMetrics or as Prometheus text.
    pub fn encode(&self, openmetrics: bool, names: Names) -> Result<String, std::fmt::Error> {
        // The findings' families in a registry of this scrape's own: what it
        // may read differs per scrape, what the subsystems registered does not.
        let mut findings = Registry::default();
        findings.register_collector(Box::new(collector::FindingsCollector {
            view: (self.view)(),
            names,
        }));
        let mut out = String::new();
        if openmetrics {
            use prometheus_client::encoding::text;
            text::encode_registry(&mut out, &self.registry)?;
            text::encode_registry(&mut out, &findings)?;
            text::encode_eof(&mut out)?;
        } else {
            use prometheus_client::encoding::prometheus_text;
            prometheus_text::encode(&mut out, &self.registry)?;
            prometheus_text::encode(&mut out, &findings)?;
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
mod tests;
