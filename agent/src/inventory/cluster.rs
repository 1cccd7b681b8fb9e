//! The Kubernetes side of one snapshot, as the adapters hand it over, and the
//! problems they found in objects from outside.

use std::{fmt, sync::Arc};

use super::{CiliumConfig, CiliumNode, NodeFacts, Pod, SandboxFailure, Subnet};

/// The Kubernetes objects one reconcile looks at.
#[derive(Clone, Debug, Default)]
pub struct ClusterState {
    /// This node's pods and pods elsewhere that hold one of its addresses.
    pub pods: Arc<Vec<Pod>>,
    /// Every CiliumNode of the cluster.
    pub cilium_nodes: Arc<Vec<CiliumNode>>,
    /// Cilium's addresses from the Nodes' annotations (`network.cilium.io/*`,
    /// legacy `io.cilium.network.*`), one entry per annotated node.
    pub annotated_nodes: Arc<Vec<CiliumNode>>,
    /// kube-ovn Subnets (empty when the CRD is absent).
    pub subnets: Arc<Vec<Subnet>>,
    /// Nodes as detection needs them: this node's (the agent), or every Node
    /// of a file (`check`), looked up by name.
    pub nodes: Arc<Vec<NodeFacts>>,
    /// kubelet's sandbox refusals (`FailedCreatePodSandBox`) ipshadow diagnoses.
    pub sandbox: Arc<Vec<SandboxFailure>>,
    /// Cilium's configuration (`cilium-config`), when read.
    pub cilium_config: Option<Arc<CiliumConfig>>,
    /// What routes to pods, for the impact of findings (empty when not read).
    pub routes: Arc<super::Routes>,
    /// The addresses Services claim, as far as they were read.
    pub services: Arc<super::ServiceAddresses>,
    /// Calico's IPAMBlocks and IPPools, when read (never by the agent's watches).
    pub calico: Arc<super::CalicoIpam>,
    /// Objects (or fields) skipped as malformed in the last read.
    pub invalid: Vec<Invalid>,
}

/// What the adapters read (from files, one list, or the watch caches), before
/// it becomes a [`ClusterState`]: each field as in the state, except `pods`,
/// which are as listed.
#[derive(Clone, Debug, Default)]
pub struct ClusterReads {
    /// The pods as listed.
    pub pods: Arc<Vec<Pod>>,
    /// Every CiliumNode.
    pub cilium_nodes: Arc<Vec<CiliumNode>>,
    /// Cilium's addresses from the Nodes' annotations.
    pub annotated_nodes: Arc<Vec<CiliumNode>>,
    /// kube-ovn Subnets.
    pub subnets: Arc<Vec<Subnet>>,
    /// The Nodes detection needs.
    pub nodes: Arc<Vec<NodeFacts>>,
    /// kubelet's sandbox refusals.
    pub sandbox: Arc<Vec<SandboxFailure>>,
    /// `cilium-config`, when read.
    pub cilium_config: Option<Arc<CiliumConfig>>,
    /// What routes to pods.
    pub routes: Arc<super::Routes>,
    /// The addresses Services claim.
    pub services: Arc<super::ServiceAddresses>,
    /// Calico's IPAMBlocks and IPPools.
    pub calico: Arc<super::CalicoIpam>,
    /// Objects (or fields) skipped as malformed.
    pub invalid: Vec<Invalid>,
}

impl From<ClusterReads> for ClusterState {
    /// The one place a state is put together, whatever it was read from: a pod
    /// still waiting for an address gets the one its refused sandbox named
    /// (Cilium's own IPAM gave it, and it shows nowhere else).
    fn from(read: ClusterReads) -> Self {
        let pods = if read.sandbox.is_empty() {
            read.pods
        } else {
            Arc::new(super::with_refused_addresses(&read.pods, &read.sandbox))
        };
        let mut invalid = read.invalid;
        invalid.extend(read.services.unreadable.iter().cloned());
        Self {
            pods,
            cilium_nodes: read.cilium_nodes,
            annotated_nodes: read.annotated_nodes,
            subnets: read.subnets,
            nodes: read.nodes,
            sandbox: read.sandbox,
            cilium_config: read.cilium_config,
            routes: read.routes,
            services: read.services,
            calico: read.calico,
            invalid,
        }
    }
}

impl ClusterState {
    /// What a read of the Services found, asked for after the rest: its
    /// unreadable Services join the malformed objects.
    pub fn set_services(&mut self, services: super::ServiceAddresses) {
        self.invalid.extend(services.unreadable.iter().cloned());
        self.services = Arc::new(services);
    }
}

/// A problem with one object from outside, for a warning and a metric.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Invalid {
    /// `pods`, `ciliumnodes`, `subnets`, `nodes`.
    pub resource: &'static str,
    /// `namespace/name`, `name`, or `items[i]` when the object has no name.
    pub object: String,
    /// What is wrong, and what was done about it.
    pub problem: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.resource, self.object, self.problem)
    }
}

/// One source's name as metrics label it, and whether its last read worked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceStatus {
    /// `pods`, `ciliumnodes`, `subnets`, `nodes`.
    pub source: &'static str,
    /// Whether the last read worked.
    pub up: bool,
    /// The resource does not exist here (its CRD is not installed): nothing
    /// to read, so no series.
    pub absent: bool,
}
