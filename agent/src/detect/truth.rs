//! The evidence and the remedies of the kernel-truth findings: what the
//! namespaces behind the host's interfaces hold against what the host routes
//! and what the API says (issue 24). Typed, rendered by `report::message::kernel`.

use std::net::IpAddr;

use super::finding::{PodRef, PodSite};
use crate::inventory::{Holder, TruthRow};

/// What the kernel shows about one address, as a finding's cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelTruth {
    /// The pod the API places at the address on this node; `None` for a
    /// leaked sandbox (no pod of this node has the address).
    pub site: Option<PodSite>,
    /// The truth-table row: the namespaces holding the address, the host's
    /// per-pod route to it, the pods the API places there.
    pub row: TruthRow,
    /// Where the host's route leads instead (a misdirected route): the
    /// namespace behind its interface.
    pub reached: Option<Holder>,
    /// The pod that namespace is, by its addresses; for a leaked sandbox, a
    /// pod elsewhere in the cluster with the address.
    pub other_pod: Option<PodRef>,
}

/// How to fix what the kernel shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelFix {
    /// Point the pod's host route at the interface whose namespace holds the address.
    RepointRoute {
        /// The node.
        node: String,
        /// The address.
        ip: IpAddr,
        /// The interface whose namespace holds it, if one does.
        to: Option<String>,
    },
    /// Tear down the stale sandbox among several holding the address.
    RemoveDuplicate {
        /// The node.
        node: String,
        /// The host interfaces of the namespaces holding it.
        ifaces: Vec<String>,
    },
    /// Tear down the sandbox no pod owns.
    TearDownSandbox {
        /// The node.
        node: String,
        /// The host interface leading to it.
        iface: String,
    },
    /// Recreate the pod: no namespace on its node holds its address.
    RecreatePod {
        /// The pod.
        pod: PodRef,
    },
    /// Remove the other holder on the pod's link, then recreate the pod so its
    /// address is added again and passes duplicate address detection.
    RedoDad {
        /// The node.
        node: String,
        /// The pod.
        pod: PodRef,
        /// The host interfaces of the other namespaces of this node holding it.
        others: Vec<String>,
    },
    /// Remove the other holder of the node's address on its link, then add
    /// the address again so that its DAD runs anew.
    RedoNodeDad {
        /// The node.
        node: String,
        /// The node's device holding the address.
        device: String,
        /// The host interfaces of the pod namespaces of this node holding it.
        others: Vec<String>,
    },
    /// Let the pod's link end DAD (its carrier, its DAD sysctls), else
    /// recreate the pod so its address is added again.
    FinishDad {
        /// The node.
        node: String,
        /// The pod.
        pod: PodRef,
        /// The host interface of the pod's link.
        iface: String,
    },
    /// Bring the pod's interface back, or recreate the pod.
    RestoreLink {
        /// The node.
        node: String,
        /// The interface that is down.
        iface: String,
    },
}
