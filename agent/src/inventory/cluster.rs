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
    /// Objects (or fields) skipped as malformed in the last read.
    pub invalid: Vec<Invalid>,
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
}
