//! A cluster-wide audit from the API alone: every node's findings that need no
//! node's kernel, and pods that share a status IP anywhere in the cluster.
//!
//! Each pod is checked once, under its own node, on one [`Index`] of every
//! node's Cilium addresses built once: the work grows with pods plus nodes,
//! not their product (5,000 nodes and 150,000 pods in `cargo xtask bench`).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
    sync::Arc,
};

use super::{
    Finding, Index, PodRef, Pods, detect_with,
    impact::{Impact, Severity, impact},
    refused, status_ips,
};
use crate::inventory::{ClusterState, HostNetwork, Inventory, IpSource, NodeFacts, Pod, Routes};

/// One node's findings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAudit {
    /// The node.
    pub node: String,
    /// Its findings, most severe first.
    pub findings: Vec<Finding>,
}

/// What an audit found, and how much it looked at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Nodes with findings, the most severe first.
    pub nodes: Vec<NodeAudit>,
    /// Nodes checked (every Node, CiliumNode and pod's node).
    pub nodes_checked: usize,
    /// Pods checked.
    pub pods_checked: usize,
    /// What breaks behind each pod with a finding, once [`Audit::assess`] ran.
    pub impacts: BTreeMap<PodRef, Impact>,
    /// The address plan's overlaps, cluster-wide ([`super::plan`]).
    pub plan: Vec<Finding>,
    /// Ranges of the address plan checked.
    pub ranges_checked: usize,
    /// The plan's kinds that could not be listed: their ranges unchecked.
    pub plan_unlisted: Vec<crate::inventory::Unlisted>,
}

impl Audit {
    /// Namespaces of the pods with findings: where their Services are.
    #[must_use]
    pub fn namespaces(&self) -> BTreeSet<String> {
        self.findings()
            .filter_map(Finding::pod)
            .map(|p| p.namespace.clone())
            .collect()
    }

    /// Adds each pod's impact and orders by it: within a node, what the
    /// kube-apiserver calls through first; nodes by their worst.
    pub fn assess(&mut self, routes: &Routes) {
        for f in self.nodes.iter().flat_map(|n| n.findings.iter()) {
            if let Some(p) = f.pod()
                && !self.impacts.contains_key(p)
            {
                self.impacts.insert(p.clone(), impact(p, f.ip, routes));
            }
        }
        let impacts = &self.impacts;
        let key = |f: &Finding| {
            (
                f.pod()
                    .and_then(|p| impacts.get(p))
                    .map_or(Severity::Warning, Impact::severity),
                rank(f),
            )
        };
        order(&mut self.nodes, key);
    }

    /// Every finding, node by node.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.nodes.iter().flat_map(|n| n.findings.iter())
    }
}

/// How bad a finding is for the cluster today, for ordering: lower is worse
/// (its kind's rank; one resting on an IP annotation alone after every other).
#[must_use]
pub fn rank(f: &Finding) -> u8 {
    let unconfirmed = f
        .site()
        .is_some_and(|s| s.ip_source == IpSource::Annotation);
    (f.kind.spec().rank)(f) + if unconfirmed { 5 } else { 0 }
}

/// Audits every node of `state` (whose pods are all the cluster's), calling
/// `progress(done, total)` as nodes are checked.
pub fn audit(
    state: &ClusterState,
    router_device: &str,
    progress: &mut dyn FnMut(usize, usize),
) -> Audit {
    let index = Index::new(
        (
            &state.cilium_nodes,
            &state.annotated_nodes,
            &state.calico.tunnels,
        ),
        router_device,
    );
    let Roster { names, mut by_node } = Roster::of(state);
    let holders = status_holders(&state.pods);
    let check = NodeCheck::new(state, router_device, &index);
    let total = names.len();
    let mut found: BTreeMap<String, Vec<Finding>> = BTreeMap::new();
    for (done, name) in names.iter().enumerate() {
        let mut pods = by_node.remove(name).unwrap_or_default();
        pods.extend(refused_holders(&pods, name, &holders));
        let findings = check.run(name, pods);
        if !findings.is_empty() {
            found.insert((*name).to_owned(), findings);
        }
        progress(done + 1, total);
    }
    let services = &state.services;
    // A refused pod's duplicate is already diagnosed from kubelet's report.
    file(&mut found, refused::duplicates(&holders), |g, f| {
        g.kind == f.kind && g.pod() == f.pod() && g.ip == f.ip
    });
    file(&mut found, secondary_duplicates(state), |_, _| false);
    // A Service claiming a Node's address: under the node it cuts off.
    let claimed = super::vip::claimed_node_addresses(&state.nodes, services);
    file(&mut found, claimed, |_, _| false);
    // A Service claiming a pod's address: under the pod's node, once per (pod, IP).
    let on_services = super::vip::pods_on_service_addresses(&state.pods, services);
    file(&mut found, on_services, |g, f| {
        g.pod() == f.pod() && g.ip == f.ip
    });
    let (plan, ranges_checked) = super::plan::plan_overlaps(state);
    Audit {
        nodes: ranked(found),
        nodes_checked: total,
        pods_checked: state.pods.len(),
        impacts: BTreeMap::new(),
        plan,
        ranges_checked,
        plan_unlisted: state.plan_unlisted.to_vec(),
    }
}

/// Every node to check (every Node, CiliumNode and pod's node), and each one's pods.
struct Roster<'a> {
    names: BTreeSet<&'a str>,
    by_node: HashMap<&'a str, Vec<Pod>>,
}

impl<'a> Roster<'a> {
    fn of(state: &'a ClusterState) -> Self {
        let mut names: BTreeSet<&str> = state.nodes.iter().map(|n| n.name.as_str()).collect();
        names.extend(state.cni_nodes().map(|c| c.name.as_str()));
        let mut by_node: HashMap<&str, Vec<Pod>> = HashMap::new();
        for p in state.pods.iter() {
            if let Some(n) = p.node.as_deref() {
                names.insert(n);
                by_node.entry(n).or_default().push(p.clone());
            }
        }
        Self { names, by_node }
    }
}

/// The pods holding an address one of `pods` was refused, wherever they run
/// but on `node`: what tells a duplicate from a stale endpoint.
fn refused_holders(pods: &[Pod], node: &str, holders: &HashMap<IpAddr, Vec<&Pod>>) -> Vec<Pod> {
    let refused: BTreeSet<IpAddr> = pods
        .iter()
        .flat_map(|p| p.ips.iter().filter(|i| i.source == IpSource::Event))
        .map(|i| i.ip)
        .collect();
    refused
        .iter()
        .flat_map(|ip| holders.get(ip).into_iter().flatten())
        .filter(|h| h.node.as_deref() != Some(node))
        .map(|h| (*h).clone())
        .collect()
}

/// What one node's detection shares with every other's in an audit.
struct NodeCheck<'a> {
    state: &'a ClusterState,
    router_device: &'a str,
    index: &'a Index<'a>,
    facts: HashMap<&'a str, &'a NodeFacts>,
    /// No node's kernel: every lookup answers nothing, no address is local.
    host: Arc<HostNetwork>,
}

impl<'a> NodeCheck<'a> {
    fn new(state: &'a ClusterState, router_device: &'a str, index: &'a Index<'a>) -> Self {
        Self {
            state,
            router_device,
            index,
            facts: state.nodes.iter().map(|n| (n.name.as_str(), n)).collect(),
            host: Arc::new(HostNetwork::default()),
        }
    }

    /// The findings of node `name` with `pods` in view.
    fn run(&self, name: &str, pods: Vec<Pod>) -> Vec<Finding> {
        let facts = self.facts.get(name).map(|f| (*f).clone());
        let cluster = ClusterState {
            pods: Arc::new(pods),
            ..self.state.clone()
        };
        let host = Arc::clone(&self.host);
        let inv = Inventory::new(name, self.router_device, host, facts, cluster);
        detect_with(&inv, self.index, Pods::Own)
    }
}

/// Files `findings` under their nodes (the pod's, else the owner's), each
/// unless its node has one `known` says is the same.
fn file(
    found: &mut BTreeMap<String, Vec<Finding>>,
    findings: Vec<Finding>,
    known: impl Fn(&Finding, &Finding) -> bool,
) {
    for f in findings {
        let node = f.pod_node().unwrap_or(&f.owner.node).to_owned();
        let list = found.entry(node).or_default();
        if !list.iter().any(|g| known(g, &f)) {
            list.push(f);
        }
    }
}

/// The pods on one secondary address.
fn secondary_duplicates(state: &ClusterState) -> Vec<Finding> {
    // Which attachments hand addresses out across nodes, as their IPAM says.
    let cluster_wide = |network: &str| {
        state.plan.iter().any(|p| {
            p.owner.object == network && matches!(p.owner.allocator, "whereabouts" | "static")
        })
    };
    super::secondary::duplicates(&state.pods, cluster_wide)
}

/// The nodes with findings, each's worst first, the worst nodes first.
fn ranked(found: BTreeMap<String, Vec<Finding>>) -> Vec<NodeAudit> {
    let mut nodes: Vec<NodeAudit> = found
        .into_iter()
        .map(|(node, findings)| NodeAudit { node, findings })
        .collect();
    order(&mut nodes, rank);
    nodes
}

/// Each node's findings by `key` (worst first), then the nodes by their
/// worst, the one with more findings first.
fn order<K: Ord>(nodes: &mut [NodeAudit], key: impl Fn(&Finding) -> K) {
    for n in nodes.iter_mut() {
        n.findings
            .sort_by(|a, b| (key(a), a.sort_key()).cmp(&(key(b), b.sort_key())));
    }
    nodes.sort_by_key(|n| {
        (
            n.findings.iter().map(&key).min(),
            std::cmp::Reverse(n.findings.len()),
            n.node.clone(),
        )
    });
}

/// Live pods by the addresses their status gives them.
fn status_holders(pods: &[Pod]) -> HashMap<IpAddr, Vec<&Pod>> {
    let mut by_ip: HashMap<IpAddr, Vec<&Pod>> = HashMap::new();
    for p in pods
        .iter()
        .filter(|p| p.can_receive_traffic() && !p.terminating && p.node.is_some())
    {
        for ip in status_ips(p) {
            by_ip.entry(ip).or_default().push(p);
        }
    }
    by_ip
}

#[cfg(test)]
#[path = "tests/audit.rs"]
mod tests;
