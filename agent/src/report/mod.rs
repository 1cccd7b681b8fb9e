//! Reporting: what findings become for people and machines — messages, Event
//! series, metrics, `check` output — and the traffic evidence that joins them.
//! Pure: the adapters write what this layer renders.

pub mod audit;
pub mod chain;
pub mod condition;
pub mod events;
pub mod evidence;
pub mod message;
pub mod metrics;
pub mod output;
pub mod remediate;
pub mod traffic;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
};

use self::evidence::Evidence;
use crate::{
    detect::{Finding, impact::Severity},
    inventory::{Invalid, NodeFacts},
};

/// The outcome of one check: findings, what the eBPF observer saw of their
/// IPs, and the input skipped as malformed.
#[derive(Debug, Default)]
pub struct Report {
    /// This node's name.
    pub node: String,
    /// What detection found.
    pub findings: Vec<Finding>,
    /// Traffic evidence by IP, for findings on addresses this node holds.
    pub evidence: BTreeMap<IpAddr, Evidence>,
    /// Objects (or fields) skipped as malformed.
    pub invalid: Vec<Invalid>,
    /// What breaks behind each pod with a finding, when routes were read.
    pub impacts: Impacts,
    /// The node's truth table (`check` only): what the pods' namespaces hold.
    pub truth: Option<crate::inventory::TruthTable>,
}

/// What the reconcile loop publishes after each reconcile, on one watch
/// channel: the one path every task that follows the findings reads.
#[derive(Clone, Debug, Default)]
pub struct Published {
    /// The findings of the last reconcile.
    pub findings: Arc<Vec<Finding>>,
    /// This node's addresses a pod elsewhere could hold: watched for traffic.
    pub claimable: Arc<BTreeSet<IpAddr>>,
    /// The uids of pods being deleted: their Event series end quietly.
    pub leaving: Arc<BTreeSet<String>>,
    /// Ranges this node's bridges route that are not its own: the agent looks
    /// up which Node owns each (it watches no other Node).
    pub foreign_ranges: Arc<Vec<ipnet::IpNet>>,
    /// Calico runs on this node: the agent watches its IPPools.
    pub calico: bool,
    /// This node's Node (its uid for Events about it, its condition as shown).
    pub node: Option<NodeFacts>,
    /// A reconcile has run.
    pub ready: bool,
}

/// What breaks behind each pod with a finding.
pub type Impacts = std::collections::BTreeMap<crate::detect::PodRef, crate::detect::impact::Impact>;

/// `critical`, `high` or `warning`: what breaks behind a pod, when known.
fn severity(impact: Option<&crate::detect::impact::Impact>) -> &'static str {
    impact
        .map_or(Severity::Warning, crate::detect::impact::Impact::severity)
        .as_str()
}

/// The plural ending of a noun counted `n`.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

impl Report {
    /// The evidence joined to `f`: traffic to its IP, if watched.
    pub fn evidence_of(&self, f: &Finding) -> Option<&Evidence> {
        self.evidence.get(&f.ip?)
    }
}
