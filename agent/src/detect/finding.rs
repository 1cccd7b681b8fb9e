//! What detection reports: the JSON contract of `ipshadow check --output json`
//! (DESIGN.md). Fields may be added, never renamed.

use std::{fmt, net::IpAddr};

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum FindingKind {
    #[serde(rename = "RouterIPCollision")]
    RouterIpCollision,
    #[serde(rename = "IngressIPCollision")]
    IngressIpCollision,
    #[serde(rename = "HealthIPCollision")]
    HealthIpCollision,
    LocalAddressCollision,
    HostRouteBlackhole,
    /// Latent: Cilium's infrastructure addresses (or the range it takes them
    /// from) lie in a range another allocator hands to pods.
    AllocatorOverlap,
}

impl FindingKind {
    pub const ALL: [Self; 6] = [
        Self::RouterIpCollision,
        Self::IngressIpCollision,
        Self::HealthIpCollision,
        Self::LocalAddressCollision,
        Self::HostRouteBlackhole,
        Self::AllocatorOverlap,
    ];

    /// The name used in JSON, Event reasons and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RouterIpCollision => "RouterIPCollision",
            Self::IngressIpCollision => "IngressIPCollision",
            Self::HealthIpCollision => "HealthIPCollision",
            Self::LocalAddressCollision => "LocalAddressCollision",
            Self::HostRouteBlackhole => "HostRouteBlackhole",
            Self::AllocatorOverlap => "AllocatorOverlap",
        }
    }

    pub(crate) fn for_role(role: Role) -> Self {
        match role {
            Role::Router => Self::RouterIpCollision,
            Role::Ingress => Self::IngressIpCollision,
            Role::Health => Self::HealthIpCollision,
            Role::Local => Self::LocalAddressCollision,
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Scope {
    /// The address's owner is the node the pod runs on.
    #[serde(rename = "same-node")]
    SameNode,
    /// The address belongs to another node than the pod's.
    #[serde(rename = "cross-node")]
    CrossNode,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SameNode => "same-node",
            Self::CrossNode => "cross-node",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the shadowing address is to its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Router,
    Ingress,
    Health,
    Local,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Router => "router",
            Self::Ingress => "ingress",
            Self::Health => "health",
            Self::Local => "local",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Who holds the address that shadows the pod IP.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Owner {
    pub node: String,
    pub role: Role,
    /// The kernel device holding it; `None` where no device does (Cilium's
    /// Ingress IP lives only in its endpoint manager, a blackhole has no device).
    pub device: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub scope: Scope,
    pub ip: IpAddr,
    pub pod: Option<PodRef>,
    pub owner: Owner,
    pub message: String,
    /// The node the pod runs on (added field; `owner.node` is the address's owner).
    pub pod_node: Option<String>,
    /// Where the pod IP came from: `status` or `annotation` (pod not started yet).
    pub ip_source: Option<crate::inventory::IpSource>,
    /// The host's FIB answer for the IP, as `ip route get` would summarise it
    /// (`local dev cilium_host`, `blackhole`, …), when one was looked up.
    pub fib: Option<String>,
    /// A pod route that the local address shadows, e.g. `10.244.1.5/32 dev lxc1`.
    pub shadowed_route: Option<String>,
    /// AllocatorOverlap: the kube-ovn Subnet that may hand the address out.
    pub subnet: Option<String>,
    /// AllocatorOverlap: Cilium's allocation range (`CiliumNode.spec.ipam.podCIDRs`) involved.
    pub cilium_range: Option<String>,
    /// Host traffic to the IP that the eBPF classifier saw delivered locally.
    pub evidence: Option<crate::evidence::Evidence>,
}

impl Finding {
    /// Stable order for output and comparisons: by kind, IP, pod.
    pub fn sort_key(&self) -> (FindingKind, IpAddr, Option<&PodRef>) {
        (self.kind, self.ip, self.pod.as_ref())
    }
}
