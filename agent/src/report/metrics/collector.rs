//! The scrape-time families: one series per finding and per traffic series,
//! written from the latest view, so a cleared finding's series simply stops.

use std::collections::HashSet;

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _},
    metrics::{MetricType, gauge::ConstGauge},
};

use super::{FindingsView, Names, traffic};
use crate::{
    detect::{Finding, FindingKind, Scope, kind::Count},
    report::severity,
};

// The derive takes no lifetimes: these own their strings (one scrape's worth).
#[derive(Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
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

/// A count as a gauge value (saturating: a node never has 2^63 findings).
fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Writes the per-finding and traffic families of one scrape: the view as
/// last published, with or without the pods' names.
#[derive(Debug)]
pub(super) struct FindingsCollector {
    pub(super) view: FindingsView,
    pub(super) names: Names,
}

/// The kinds a per-node family counts (each kind's [`Count`]).
fn counted_in(family: Count) -> impl Iterator<Item = FindingKind> {
    FindingKind::all().filter(move |k| k.spec().count == family)
}

impl Collector for FindingsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let view = &self.view;
        encode_collisions(view, &mut encoder)?;
        encode_info(view, self.names, &mut encoder)?;
        encode_counts(view, &mut encoder)?;
        encode_hints(view, &mut encoder)?;
        traffic::encode(view, self.names, &mut encoder)
    }
}

/// Findings of every kind `family` counts: hints left out.
fn counted_all(view: &FindingsView, family: Count) -> i64 {
    counted_in(family).map(|k| counted(view, k, None)).sum()
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
    for kind in counted_in(Count::Collisions) {
        for scope in [Scope::SameNode, Scope::CrossNode] {
            let l = [("kind", kind.as_str()), ("scope", scope.as_str())];
            ConstGauge::new(counted(view, kind, Some(scope))).encode(m.encode_family(&l)?)?;
        }
    }
    Ok(())
}

/// `ipshadow_collision_info`: one series per finding; without the names, one
/// per finding that differs in anything else (an info series stays 1).
fn encode_info(
    view: &FindingsView,
    names: Names,
    encoder: &mut DescriptorEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let mut m = encoder.encode_descriptor(
        "ipshadow_collision_info",
        "One series per active finding (value 1), with what collides with what",
        None,
        MetricType::Gauge,
    )?;
    let mut seen = HashSet::new();
    for f in view.findings.iter() {
        let l = info_labels(view, f, names);
        if seen.insert(l.clone()) {
            ConstGauge::new(1i64).encode(m.encode_family(&l)?)?;
        }
    }
    Ok(())
}

/// `f`'s labels. Without the names, `namespace` and `pod` stay, empty: with
/// `honor_labels` (the ServiceMonitor's) an empty label keeps Prometheus from
/// filling in the scrape target's own (the agent's pod), and is then dropped.
fn info_labels(view: &FindingsView, f: &Finding, names: Names) -> FindingLabels {
    let (namespace, pod) = match (f.pod(), names) {
        (Some(p), Names::Shown) => (p.namespace.clone(), p.name.clone()),
        _ => Default::default(),
    };
    FindingLabels {
        kind: f.kind.as_str(),
        scope: f.scope.as_str(),
        namespace,
        pod,
        ip: f.ip_text(),
        owner_node: f.owner.node.clone(),
        role: f.owner.role.as_str(),
        device: f.owner.device.clone().unwrap_or_default(),
        ip_source: f.site().map_or("", |s| s.ip_source.as_str()),
        severity: severity(f.pod().and_then(|p| view.impacts.get(p))),
        trust: f.trust.as_str(),
    }
}

/// The per-node counts: blackholed host routes, allocator overlaps, and the
/// loud IPAM problems by kind (every kind always present).
fn encode_counts(
    view: &FindingsView,
    encoder: &mut DescriptorEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    for (name, help, family) in [
        (
            "ipshadow_host_route_blackholes",
            "Pods on this node whose host route ends in blackhole, unreachable, prohibit or nowhere",
            Count::HostRouteBlackholes,
        ),
        (
            "ipshadow_allocator_overlaps",
            "Overlaps of this node's ranges with a range that may hand their addresses out (Cilium's ranges in a kube-ovn Subnet, one per range and Subnet; the address plan's, one per pair of objects)",
            Count::AllocatorOverlaps,
        ),
    ] {
        let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        ConstGauge::new(counted_all(view, family)).encode(m)?;
    }
    for (name, help, family) in [
        (
            "ipshadow_ipam_problems",
            "Sandbox refusals and allocator problems of this node, by kind (every kind always present)",
            Count::IpamProblems,
        ),
        (
            "ipshadow_kernel_truth_problems",
            "Addresses where what this node's pod namespaces hold contradicts its per-pod routes or \
             the API, by kind (every kind always present)",
            Count::KernelTruth,
        ),
    ] {
        let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for kind in counted_in(family) {
            let l = [("kind", kind.as_str())];
            ConstGauge::new(counted(view, kind, None)).encode(m.encode_family(&l)?)?;
        }
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
        ConstGauge::new(gauge(hints)).encode(m.encode_family(&[("kind", kind.as_str())])?)?;
    }
    Ok(())
}
