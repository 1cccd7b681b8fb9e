//! The reconcile loop's metrics: how reconciles end and take, and whether each
//! source was read.

use std::time::{Duration, SystemTime};

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Unit,
};
use strum::IntoEnumIterator as _;

use crate::{
    inventory::{SourceStatus, TruthTable},
    report::metrics::{Outcome, Registry, ResourceLabels, ResultLabels, SourceLabels},
};

/// The resources whose malformed objects are counted, at zero from the start
/// so increase() and alerts see 0, not "no data".
const RESOURCES: [&str; 5] = ["pods", "ciliumnodes", "subnets", "ippools", "nodes"];

/// What the loop counts.
#[derive(Clone, Debug)]
pub(crate) struct LoopMetrics {
    /// `ipshadow_source_up`.
    source_up: Family<SourceLabels, Gauge>,
    /// `ipshadow_invalid_objects_total`.
    invalid_objects: Family<ResourceLabels, Counter>,
    /// `ipshadow_reconciles_total`.
    reconciles: Family<ResultLabels, Counter>,
    /// `ipshadow_reconcile_duration_seconds`.
    duration: Histogram,
    /// `ipshadow_last_reconcile_timestamp_seconds`.
    last: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// `ipshadow_pod_namespaces`, `…_unread`, `ipshadow_pod_namespace_addresses`.
    namespaces: [Gauge; 3],
    /// `ipshadow_pod_namespace_reads_total`.
    namespace_reads: Counter,
    /// `ipshadow_host_reads_total`.
    host_reads: Counter,
}

impl LoopMetrics {
    /// Every one registered in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self {
            source_up: Family::default(),
            invalid_objects: Family::default(),
            reconciles: Family::default(),
            // A reconcile takes from half a millisecond (a cluster change on a
            // small node) to about a second (100k pods).
            duration: Histogram::new([
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            ]),
            last: Gauge::default(),
            namespaces: Default::default(),
            namespace_reads: Counter::default(),
            host_reads: Counter::default(),
        };
        registry.register(
            "ipshadow_source_up",
            "1 when the last read of a source (netlink, pods, ciliumnodes, subnets) worked",
            m.source_up.clone(),
        );
        registry.register(
            "ipshadow_invalid_objects",
            "Malformed objects or fields skipped, by resource (counted once per distinct problem)",
            m.invalid_objects.clone(),
        );
        registry.register(
            "ipshadow_reconciles",
            "Reconciles run, by result (ok, error)",
            m.reconciles.clone(),
        );
        registry.register_with_unit(
            "ipshadow_reconcile_duration",
            "Time one reconcile takes: netlink read, FIB lookups, detection",
            Unit::Seconds,
            m.duration.clone(),
        );
        registry.register_with_unit(
            "ipshadow_last_reconcile_timestamp",
            "Unix time of the last successful reconcile",
            Unit::Seconds,
            m.last.clone(),
        );
        m.register_reads(registry);
        for resource in RESOURCES {
            let _ = m
                .invalid_objects
                .get_or_create(&ResourceLabels { resource });
        }
        for result in Outcome::iter() {
            let _ = m.reconciles.get_or_create(&ResultLabels { result });
        }
        m
    }

    /// The metrics of what the host and its pods' namespaces hold and how often they are read.
    fn register_reads(&self, registry: &mut Registry) {
        let [read, unread, addresses] = self.namespaces.clone();
        registry.register(
            "ipshadow_pod_namespaces",
            "Network namespaces behind this node's veth/netkit interfaces read in the last reconcile",
            read,
        );
        registry.register(
            "ipshadow_pod_namespaces_unread",
            "Namespaces behind this node's interfaces that could not be read (gone mid-read, or the kernel ignored the target nsid)",
            unread,
        );
        registry.register(
            "ipshadow_pod_namespace_addresses",
            "Addresses the namespaces behind this node's interfaces hold (truth-table rows held by at least one)",
            addresses,
        );
        registry.register(
            "ipshadow_pod_namespace_reads",
            "Pod namespaces read afresh: new or changed host interfaces, and all of them at each resync (the others are kept from their last read)",
            self.namespace_reads.clone(),
        );
        registry.register(
            "ipshadow_host_reads",
            "Reads of this node's links, addresses and routes: one per netlink change and one per resync pass (a change of the cluster alone reuses the last)",
            self.host_reads.clone(),
        );
    }

    /// Whether each cluster source's last read worked; no series for one
    /// whose resource is not installed (a down before the 404 included).
    pub(crate) fn sources(&self, status: &[SourceStatus]) {
        for s in status {
            if s.absent {
                self.source_up.remove(&SourceLabels { source: s.source });
            } else {
                self.source_up(s.source, s.up);
            }
        }
    }

    /// Whether `source`'s last read worked.
    pub(crate) fn source_up(&self, source: &'static str, up: bool) {
        self.source_up
            .get_or_create(&SourceLabels { source })
            .set(i64::from(up));
    }

    /// A malformed object of `resource` seen for the first time.
    pub(crate) fn invalid(&self, resource: &'static str) {
        self.invalid_objects
            .get_or_create(&ResourceLabels { resource })
            .inc();
    }

    /// `n` namespaces were read afresh.
    pub(crate) fn namespaces_read(&self, n: usize) {
        let _ = self
            .namespace_reads
            .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// The host was read `n` more times.
    pub(crate) fn host_read(&self, n: u64) {
        let _ = self.host_reads.inc_by(n);
    }

    /// What the last reconcile read of the pods' namespaces.
    pub(crate) fn namespaces(&self, t: &TruthTable) {
        let held = t.rows.iter().filter(|r| !r.holders.is_empty()).count();
        for (g, n) in self
            .namespaces
            .iter()
            .zip([t.namespaces, t.unread.len(), held])
        {
            g.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// A reconcile ended: how long it took, `None` when reading the node failed.
    pub(crate) fn reconciled(&self, took: Option<Duration>) {
        let outcome = if took.is_some() {
            Outcome::ok
        } else {
            Outcome::error
        };
        self.reconciles
            .get_or_create(&ResultLabels { result: outcome })
            .inc();
        self.source_up("netlink", took.is_some());
        if let Some(took) = took {
            self.duration.observe(took.as_secs_f64());
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.last.set(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source_lines(registry: &Registry) -> Vec<String> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encodes");
        text.lines()
            .filter(|l| l.starts_with("ipshadow_source_up{"))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_source_not_installed_has_no_series_even_after_it_was_down() {
        let mut registry = Registry::default();
        let m = LoopMetrics::register(&mut registry);
        let status = |up, absent| {
            [SourceStatus {
                source: "ippools",
                up,
                absent,
            }]
        };
        // A 503 at start, then the 404 of a CRD that is not there.
        m.sources(&status(false, false));
        assert_eq!(
            source_lines(&registry),
            ["ipshadow_source_up{source=\"ippools\"} 0"]
        );
        m.sources(&status(false, true));
        assert_eq!(source_lines(&registry), Vec::<String>::new());
        // Installed later: read, up.
        m.sources(&status(true, false));
        assert_eq!(
            source_lines(&registry),
            ["ipshadow_source_up{source=\"ippools\"} 1"]
        );
    }
}
