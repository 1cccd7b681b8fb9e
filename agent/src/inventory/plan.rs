//! The cluster's address plan: every range an allocator hands out or a
//! component binds, each with its owner (the object to change) and its
//! purpose. Read by `audit` from the API or files; detection finds the ranges
//! that will collide before any pod is hurt.

use std::{fmt, net::IpAddr};

use serde::Serialize;

use super::IpRange;

/// A kind of the address plan that could not be listed: its ranges are not
/// checked, and the plan's verdict is partial. Serialized as is in `audit`'s JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unlisted {
    /// The resource (`ipaddresspools.metallb.io`).
    pub resource: String,
    /// Why, and what to do (`forbidden: grant list on it`).
    pub reason: String,
}

/// A pod's address on a secondary network, as Multus records it in the
/// pod's `k8s.v1.cni.cncf.io/network-status` annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondaryIp {
    /// The attachment: `namespace/name` of its NetworkAttachmentDefinition.
    pub network: String,
    /// The pod's interface on it (`net1`).
    pub interface: Option<String>,
    /// The address.
    pub ip: IpAddr,
}

/// What a range is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// Pods' primary addresses, from a pool any node may draw on.
    Pods,
    /// One node's pod range (`spec.podCIDRs`, a CiliumNode's): its own pods
    /// only; other allocators' pools may hold it by design.
    NodePods,
    /// Services' cluster IPs.
    Services,
    /// Load-balancer IPs a controller hands to Services.
    LoadBalancer,
    /// A node's own address (`status.addresses`).
    NodeAddress,
    /// Addresses of a secondary network (a NetworkAttachmentDefinition).
    Secondary,
    /// A network plugin's own internal subnet (ovn-kubernetes' join, transit
    /// and masquerade subnets): its routers and the hosts hold addresses
    /// there; nothing else on the cluster's network may be given one.
    Internal,
}

impl Purpose {
    /// In words, for messages.
    #[must_use]
    pub fn words(self) -> &'static str {
        match self {
            Self::Pods => "pod addresses",
            Self::NodePods => "the node's pod range",
            Self::Services => "Service cluster IPs",
            Self::LoadBalancer => "load-balancer IPs",
            Self::NodeAddress => "a node's address",
            Self::Secondary => "secondary-network addresses",
            Self::Internal => "the network plugin's internal subnet",
        }
    }
}

/// The object that declares a range: the one to change.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct PlanOwner {
    /// The allocator or component (`MetalLB`, `Cilium LB-IPAM`, `Kubernetes`).
    pub allocator: &'static str,
    /// The object's kind (`IPAddressPool`, `Node`).
    pub kind: &'static str,
    /// `namespace/name` or `name`.
    pub object: String,
    /// Whether a tenant may have written it: an object of a namespaced kind
    /// that namespace admins create (Multus' NetworkAttachmentDefinitions).
    /// An overlap with it rests on a range a tenant chose. Said by the
    /// finding's trust, not in the JSON of the range.
    #[serde(skip)]
    pub tenant: bool,
    /// The field the range is written in (`spec.addresses`).
    pub field: &'static str,
}

impl fmt::Display for PlanOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({})", self.kind, self.object, self.field)
    }
}

/// One range of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Whose it is.
    pub owner: PlanOwner,
    /// What it is for.
    pub purpose: Purpose,
    /// The addresses.
    pub range: IpRange,
    /// As written (`192.168.9.1-192.168.9.5`, `10.96.0.0/12`).
    pub text: String,
    /// Where its addresses live apart from others': two ranges in different
    /// domains never meet (a secondary network's interface, a VPC). `None`:
    /// the cluster's one network.
    pub domain: Option<String>,
    /// Addresses of the range its owner never hands out.
    pub exclude: Vec<IpRange>,
    /// Ranges with the same key never hand out one address twice, however
    /// they overlap: one record of allocations covers them all (whereabouts'
    /// cluster-wide reservations of one `network_name`).
    pub shared: Option<String>,
    /// The node it belongs to, for a node's range or address.
    pub node: Option<String>,
    /// Its addresses go on a node's own interface, beside the node's (a
    /// macvlan or ipvlan on its `master`): a node's address in it may be
    /// handed to a pod, whatever its domain.
    pub on_node_interface: bool,
}

impl Planned {
    /// A range of the cluster's one network, with nothing excluded.
    #[must_use]
    pub fn new(owner: PlanOwner, purpose: Purpose, range: IpRange, text: String) -> Self {
        Self {
            owner,
            purpose,
            range,
            text,
            domain: None,
            exclude: Vec::new(),
            shared: None,
            node: None,
            on_node_interface: false,
        }
    }

    /// Whether its owner may hand out (or binds) `ip`.
    #[must_use]
    pub fn gives(&self, ip: IpAddr) -> bool {
        self.range.contains(ip) && !self.exclude.iter().any(|r| r.contains(ip))
    }
}
