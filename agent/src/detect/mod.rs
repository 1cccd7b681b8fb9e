//! Detection: a pure function from one [`Inventory`] to the findings it shows.
//!
//! Rules:
//! - this node's pods are checked against every address this node holds (its
//!   kernel's FIB answer first, then its addresses and CiliumNode) and against
//!   the Cilium infrastructure addresses of every other node;
//! - pods on other nodes are checked only against this node's addresses;
//! - one finding per (pod, IP), never two kinds for the same collision; a
//!   shadowing address wins over a blackhole route;
//! - pods that cannot receive traffic (hostNetwork, Succeeded, Failed) are skipped,
//!   and so are pods being deleted (`metadata.deletionTimestamp`).

pub mod audit;
mod bridge;
mod calico;
mod cause;
mod collision;
mod finding;
mod forged;
pub mod impact;
mod kernel;
pub mod kind;
mod leftover;
mod node;
mod overlap;
mod owners;
pub mod plan;
mod plan_sources;
mod pool;
mod refused;
mod remedy;
mod secondary;
mod trust;
mod truth;
pub mod vip;

use std::{collections::HashSet, net::IpAddr};

pub use bridge::foreign_bridge_ranges;
pub use calico::{CalicoFix, TunnelAllocation};
pub use finding::{
    Cause, Finding, FindingKind, InfraAddress, IpamKind, KubeletReport, NodeProblem, Owner, PodRef,
    PodSite, PoolFit, Remedy, Reserver, Role, Scope, Trust,
};
pub use kernel::{truth_report, truth_table};
pub use owners::Index;
use owners::Owners;
pub use truth::{KernelFix, KernelTruth};

use crate::inventory::{Inventory, IpSource, Pod, TruthRow, TruthTable};

/// Every finding `inv` shows, in a stable order (see [`Finding::sort_key`]).
pub fn detect(inv: &Inventory) -> Vec<Finding> {
    detect_with_truth(inv).0
}

/// [`detect`] and [`truth_report`] of `inv` at once: the truth table is built
/// once for both.
pub fn detect_with_truth(inv: &Inventory) -> (Vec<Finding>, TruthTable) {
    let index = Index::of(inv);
    let (findings, rows) = findings_and_rows(inv, &index, Pods::All);
    (findings, kernel::report_of(inv, rows))
}

/// Whose pods a node's detection looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pods {
    /// The agent's: its node's pods, and pods elsewhere holding one of its addresses.
    All,
    /// An audit's: only the node's own pods; a pod elsewhere is checked under its own node.
    Own,
}

/// [`detect`] on a prebuilt [`Index`] of every node's Cilium addresses, which
/// an audit builds once for all nodes.
pub fn detect_with<'a>(inv: &'a Inventory, index: &'a Index<'a>, pods: Pods) -> Vec<Finding> {
    findings_and_rows(inv, index, pods).0
}

/// [`detect_with`]'s findings, and the truth table's rows they were found in.
fn findings_and_rows<'a>(
    inv: &'a Inventory,
    index: &'a Index<'a>,
    pods: Pods,
) -> (Vec<Finding>, Vec<TruthRow>) {
    let owners = Owners::new(inv, index);
    let mut seen = HashSet::new();
    let mut findings = Vec::new();
    for pod in inv.cluster.pods.iter().filter(|p| p.reportable()) {
        let Some(pod_node) = pod.node.as_deref() else {
            continue;
        };
        for pip in &pod.ips {
            if forged::outside_its_subnet(inv, pod, pip) || forged::refused_outright(inv, pip) {
                continue;
            }
            if !seen.insert((
                pod.uid.as_str(),
                pod.namespace.as_str(),
                pod.name.as_str(),
                pip.ip,
            )) {
                continue;
            }
            // The pod's side is built (strings cloned) only for a finding.
            let site = || PodSite::new(pod, pod_node, pip.source.clone());
            let finding = if pod_node == inv.node {
                collision::check_own_pod(inv, &owners, pod, site, pip)
            } else if pods == Pods::Own {
                None
            } else {
                collision::check_foreign_pod(inv, &owners, site, pip)
            };
            findings.extend(finding);
        }
    }
    let (kernel, rows) = kernel::kernel_findings(inv, &seen_findings(&findings));
    findings.extend(kernel);
    findings.extend(kernel::node_dad_failed(inv));
    findings.extend(overlap::allocator_overlaps(inv, &owners));
    if pods == Pods::All {
        // An audit finds the plan's overlaps once, cluster-wide.
        findings.extend(plan::node_overlaps(inv));
    }
    findings.extend(node::node_findings(inv, &inv.node));
    findings.extend(bridge::stale_bridges(inv));
    findings.extend(leftover::leftovers(inv));
    findings.extend(vip::held_node_addresses(inv));
    findings.extend(calico::unallocated_tunnels(inv));
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    (findings, rows)
}

/// The (pod uid, IP) pairs that already have a finding: one finding per (pod, IP).
fn seen_findings(findings: &[Finding]) -> HashSet<(&str, IpAddr)> {
    findings
        .iter()
        .filter_map(|f| Some((f.pod()?.uid.as_str(), f.ip?)))
        .collect()
}

/// A pod's addresses from its status (kubelet's word, not a hint).
fn status_ips(p: &Pod) -> impl Iterator<Item = IpAddr> + '_ {
    p.ips
        .iter()
        .filter(|i| i.source == IpSource::Status)
        .map(|i| i.ip)
}

/// This node's pods that may be reported.
fn own(inv: &Inventory) -> impl Iterator<Item = &Pod> {
    inv.cluster
        .pods
        .iter()
        .filter(|p| p.node.as_deref() == Some(inv.node.as_str()) && p.reportable())
}

/// The IPs whose FIB answer detection needs: those of `node`'s pods.
pub fn lookups<'a>(node: &'a str, pods: &'a [Pod]) -> impl Iterator<Item = IpAddr> + 'a {
    pods.iter()
        .filter(move |p| p.node.as_deref() == Some(node) && p.reportable())
        .flat_map(|p| p.ips.iter().map(|i| i.ip))
}

#[cfg(test)]
#[path = "tests/props.rs"]
mod props;
#[cfg(test)]
mod tests;
