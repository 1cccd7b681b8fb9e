//! One snapshot of everything detection looks at: the node's own network (from
//! netlink) and the cluster objects that matter (from Kubernetes or files).
//!
//! These are plain data; the adapters in `netlink/` and `kube/` fill them in and
//! `detect` reads them. Nothing here does I/O.

mod calico;
mod cluster;
#[cfg(test)]
pub(crate) mod fixtures;
mod host;
mod impact;
mod ip_range;
pub mod ip_text;
mod namespaces;
mod node;
mod objects;
mod plan;
#[cfg(test)]
pub(crate) mod ptp_fixtures;
mod ranges;
mod services;
pub mod text;

use std::sync::Arc;

pub use calico::{Allocation, CalicoIpam, IpPool, IpamBlock, IpamOwner, TunnelKind};
pub use cluster::{AsRead, Assembled, ClusterState, Invalid, SourceStatus};
pub use host::{
    DeadEnd, FibResult, HostNetwork, Link, LocalAddress, Route, RouteKind, TABLE_LOCAL, TABLE_MAIN,
};
pub use impact::{Caller, EndpointSlice, Routes, ServiceRef};
pub use ip_range::{IpRange, link_local, nth, step};
pub use namespaces::{
    DAD_STUCK_AFTER, Holder, HostIface, Lower, NsAddress, NsLink, OperState, PeerNamespace,
    PlacedPod, PodNamespaces, PodRoute, TruthRow, TruthTable, Unread,
};
pub use node::{
    CiliumConfig, ConditionSeen, NodeAddress, NodeFacts, SandboxCni, SandboxFailure,
    SandboxRefusal, with_refused_addresses,
};
pub use objects::{CniNode, InfraAddress, IpSource, Pod, PodIp, Role, Source, Subnet};
pub use plan::{PlanOwner, Planned, Purpose, SecondaryIp, Unlisted};
pub use services::{Covered, ServiceAddress, ServiceAddresses, ServiceField};

/// `mutex` locked, whoever panicked while holding it: what the agent keeps
/// behind a lock (caches, counts, the files' last good content) stays usable
/// after a panic elsewhere.
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Device name Cilium puts its router IP on.
pub const DEFAULT_ROUTER_DEVICE: &str = "cilium_host";
/// Annotation kube-ovn writes with the IP(s) it assigned, before the pod has a status IP.
pub const DEFAULT_POD_IP_ANNOTATION: &str = "ovn.kubernetes.io/ip_address";

/// Everything one reconcile looks at: one node's side, and the cluster.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// This node's name (`spec.nodeName` of its pods, name of its CiliumNode).
    pub node: String,
    /// The device holding Cilium's router IP on this node.
    pub router_device: String,
    /// This node's network (shared: a reconcile of cluster changes reuses it).
    pub host: Arc<HostNetwork>,
    /// This node's Node, when known (one of `cluster.nodes`).
    pub node_facts: Option<NodeFacts>,
    /// The cluster's objects, shared with the sources' state: a reconcile
    /// copies no object.
    pub cluster: ClusterState,
}

impl Inventory {
    /// Node `node`'s inventory: its network, its Node's `facts` and `cluster`.
    pub fn new(
        node: &str,
        router_device: &str,
        host: Arc<HostNetwork>,
        facts: Option<NodeFacts>,
        cluster: ClusterState,
    ) -> Self {
        Self {
            node: node.to_owned(),
            router_device: router_device.to_owned(),
            host,
            node_facts: facts,
            cluster,
        }
    }
}
