//! The Kubernetes side of one snapshot, as the adapters hand it over, and the
//! problems they found in objects from outside.

use std::{marker::PhantomData, sync::Arc};

use super::{CiliumConfig, CniNode, NodeFacts, Pod, SandboxFailure, Subnet};

/// The Kubernetes objects one reconcile looks at. The adapters (files, one
/// list, the watch caches) fill a `ClusterState<AsRead>`; detection reads the
/// `ClusterState` [`ClusterState::assemble`] makes of it, never changed after.
#[derive(Clone, Debug, Default)]
pub struct ClusterState<Stage = Assembled> {
    /// This node's pods and pods elsewhere that hold one of its addresses.
    pub pods: Arc<Vec<Pod>>,
    /// Every CiliumNode of the cluster.
    pub cilium_nodes: Arc<Vec<CniNode>>,
    /// Cilium's addresses from the Nodes' annotations (`network.cilium.io/*`,
    /// legacy `io.cilium.network.*`), one entry per annotated node.
    pub annotated_nodes: Arc<Vec<CniNode>>,
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
    /// The ranges of the address plan read from allocators' own objects
    /// (MetalLB, Cilium's pools, ServiceCIDRs, attachments), when read.
    pub plan: Arc<Vec<super::Planned>>,
    /// The plan's kinds that could not be listed (the rest stands).
    pub plan_unlisted: Arc<Vec<super::Unlisted>>,
    /// Objects (or fields) skipped as malformed in the last read (shared: an
    /// audit's inventory per node copies none).
    pub invalid: Arc<Vec<Invalid>>,
    /// Filled by an adapter ([`AsRead`]) or made by [`ClusterState::assemble`]
    /// ([`Assembled`]): a read reaches detection, or is assembled, once only.
    pub stage: PhantomData<Stage>,
}

/// The stage of a [`ClusterState`] as read: its pods as listed, the
/// unreadable Services not among `invalid` yet.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsRead;

/// The stage of a [`ClusterState`] detection reads (see [`ClusterState::assemble`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Assembled;

impl ClusterState {
    /// The one constructor, whatever `read` came from: a pod still waiting for
    /// an address gets the one its refused sandbox named (Cilium's own IPAM
    /// gave it, and it shows nowhere else), and the Services' unreadable
    /// objects join the malformed ones.
    pub fn assemble(read: ClusterState<AsRead>) -> Self {
        let pods = if read.sandbox.is_empty() {
            read.pods
        } else {
            Arc::new(super::with_refused_addresses(&read.pods, &read.sandbox))
        };
        let invalid = if read.services.unreadable.is_empty() {
            read.invalid
        } else {
            let mut all = Arc::unwrap_or_clone(read.invalid);
            all.extend(read.services.unreadable.iter().cloned());
            Arc::new(all)
        };
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
            plan: read.plan,
            plan_unlisted: read.plan_unlisted,
            invalid,
            stage: PhantomData,
        }
    }

    /// kube-ovn's primary Subnets: where its pods get addresses.
    pub fn primary_subnets(&self) -> impl Iterator<Item = &Subnet> + '_ {
        self.subnets.iter().filter(|s| s.primary)
    }

    /// The CiliumNodes, then Cilium's addresses from the Nodes' annotations.
    pub fn cni_nodes(&self) -> impl Iterator<Item = &CniNode> + '_ {
        self.cilium_nodes.iter().chain(self.annotated_nodes.iter())
    }
}

/// A problem with one object from outside, for a warning and a metric.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{resource} {object}: {problem}")]
pub struct Invalid {
    /// `pods`, `ciliumnodes`, `subnets`, `nodes`.
    pub resource: &'static str,
    /// `namespace/name`, `name`, or `items[i]` when the object has no name.
    pub object: String,
    /// What is wrong, and what was done about it.
    pub problem: String,
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
