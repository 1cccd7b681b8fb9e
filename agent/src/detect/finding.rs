//! What detection reports, as types: the kind of collision, who holds the
//! address, where the pod is, and the remedy that fits. Text is rendered from
//! these by the reporting layer (`report::message`), never parsed back.

use std::{fmt, net::IpAddr};

use ipnet::IpNet;
use serde::Serialize;

use crate::inventory::{DeadEnd, IpRange, IpSource};

/// The kinds of finding (DESIGN.md); their names are Event reasons and metric labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum FindingKind {
    /// The pod's IP is Cilium's router IP (`CiliumInternalIP`) of a node.
    #[serde(rename = "RouterIPCollision")]
    RouterIpCollision,
    /// The pod's IP is Cilium's Ingress IP of a node.
    #[serde(rename = "IngressIPCollision")]
    IngressIpCollision,
    /// The pod's IP is Cilium's health endpoint IP of a node.
    #[serde(rename = "HealthIPCollision")]
    HealthIpCollision,
    /// The pod's IP is another local address of a node.
    LocalAddressCollision,
    /// The node's route to its own pod goes nowhere.
    HostRouteBlackhole,
    /// Latent: Cilium's infrastructure addresses (or the range it takes them
    /// from) lie in a range another allocator hands to pods.
    AllocatorOverlap,
}

impl FindingKind {
    /// Every kind, in order.
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

    /// The collision kind of an address with this role.
    pub fn for_role(role: Role) -> Self {
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

/// Whether the address's owner is the pod's own node.
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
    /// The name used in JSON and metric labels.
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
    /// Cilium's router IP, on `cilium_host`.
    Router,
    /// Cilium's Ingress IP, held by its endpoint manager only.
    Ingress,
    /// Cilium's health endpoint IP.
    Health,
    /// Any other address of the node.
    Local,
}

impl Role {
    /// The name used in JSON and metric labels.
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

/// A pod, by namespace, name and uid.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PodRef {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (empty when unknown).
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
    /// The node holding the address.
    pub node: String,
    /// What the address is to that node.
    pub role: Role,
    /// The kernel device holding it; `None` where no device does (Cilium's
    /// Ingress IP lives only in its endpoint manager, a blackhole has no device).
    pub device: Option<String>,
}

/// The pod side of a finding: which pod, on which node, and where its IP came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSite {
    /// The pod.
    pub pod: PodRef,
    /// The node it runs on.
    pub node: String,
    /// `status` or `annotation` (the pod has not started yet).
    pub ip_source: IpSource,
}

/// What detection found, beyond kind, IP and owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The pod's IP is an address a node holds.
    Collision {
        /// The pod.
        site: PodSite,
        /// The host's FIB answer for the IP, `ip route get`-like, when looked up.
        fib: Option<String>,
        /// A pod route the local address shadows, e.g. `10.244.1.5/32 dev lxc1`.
        shadowed_route: Option<String>,
    },
    /// The pod's own node routes its IP nowhere.
    Blackhole {
        /// The pod.
        site: PodSite,
        /// Where the packet dies.
        dead_end: DeadEnd,
        /// The route it dies on, `ip route`-like, when one is in the tables.
        route: Option<String>,
    },
    /// Cilium's address (or range) lies in a kube-ovn Subnet and is not excluded.
    Overlap {
        /// The Subnet's name.
        subnet: String,
        /// The Subnet's block holding the address.
        block: Option<IpNet>,
        /// Cilium's range (`CiliumNode.spec.ipam.podCIDRs`) involved.
        cilium_range: Option<IpNet>,
        /// Whether the IP is an address Cilium holds now (rather than one it may take).
        held: bool,
    },
}

/// What the operator should do; rendered into every message and Event note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// Give Cilium's IPAM a pool outside the range the pod allocator hands out.
    SeparateCiliumPool,
    /// Remove the local address, or exclude it from the pod allocator's range.
    RemoveLocalAddress,
    /// Restore the pod network's route on the node.
    RestoreRoute {
        /// The node missing the route.
        node: String,
    },
    /// Delete the stale route that drops the pod's traffic.
    DeleteStaleRoute {
        /// The node with the route.
        node: String,
        /// The route's type.
        dead_end: DeadEnd,
    },
    /// Exclude Cilium's addresses from the Subnet, or move Cilium's pool.
    ExcludeFromSubnet {
        /// The Subnet.
        subnet: String,
        /// The `excludeIps` entry that fixes it.
        exclude: IpRange,
        /// The Subnet block involved.
        block: Option<IpNet>,
    },
}

/// One finding: a pod IP shadowed (or about to be) by an address a node holds,
/// or a pod its own node cannot reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The kind.
    pub kind: FindingKind,
    /// Same-node or cross-node.
    pub scope: Scope,
    /// The colliding (or unreachable) IP.
    pub ip: IpAddr,
    /// Who holds the address.
    pub owner: Owner,
    /// What exactly was found.
    pub cause: Cause,
}

impl Finding {
    /// A pod IP that is an address `owner` holds; the kind follows the owner's role.
    pub fn collision(
        scope: Scope,
        ip: IpAddr,
        owner: Owner,
        site: PodSite,
        fib: Option<String>,
        shadowed_route: Option<String>,
    ) -> Self {
        Self {
            kind: FindingKind::for_role(owner.role),
            scope,
            ip,
            owner,
            cause: Cause::Collision {
                site,
                fib,
                shadowed_route,
            },
        }
    }

    /// A pod IP its own node routes into `dead_end`.
    pub fn blackhole(ip: IpAddr, site: PodSite, dead_end: DeadEnd, route: Option<String>) -> Self {
        Self {
            kind: FindingKind::HostRouteBlackhole,
            scope: Scope::SameNode,
            ip,
            owner: Owner {
                node: site.node.clone(),
                role: Role::Local,
                device: None,
            },
            cause: Cause::Blackhole {
                site,
                dead_end,
                route,
            },
        }
    }

    /// Cilium's address `ip` (held now, or one it may take from `cilium_range`)
    /// that `subnet` may hand to a pod.
    pub fn overlap(
        ip: IpAddr,
        owner: Owner,
        subnet: String,
        block: Option<IpNet>,
        cilium_range: Option<IpNet>,
        held: bool,
    ) -> Self {
        Self {
            kind: FindingKind::AllocatorOverlap,
            scope: Scope::SameNode,
            ip,
            owner,
            cause: Cause::Overlap {
                subnet,
                block,
                cilium_range,
                held,
            },
        }
    }

    /// The pod side, for pod findings.
    pub fn site(&self) -> Option<&PodSite> {
        match &self.cause {
            Cause::Collision { site, .. } | Cause::Blackhole { site, .. } => Some(site),
            Cause::Overlap { .. } => None,
        }
    }

    /// The pod; `None` for node-level findings.
    pub fn pod(&self) -> Option<&PodRef> {
        self.site().map(|s| &s.pod)
    }

    /// The node the pod runs on; `None` for node-level findings.
    pub fn pod_node(&self) -> Option<&str> {
        self.site().map(|s| s.node.as_str())
    }

    /// What fixes it.
    pub fn remedy(&self) -> Remedy {
        match &self.cause {
            Cause::Collision { .. } if self.owner.role == Role::Local => Remedy::RemoveLocalAddress,
            Cause::Collision { .. } => Remedy::SeparateCiliumPool,
            Cause::Blackhole {
                site,
                dead_end: DeadEnd::NoRoute,
                ..
            } => Remedy::RestoreRoute {
                node: site.node.clone(),
            },
            Cause::Blackhole { site, dead_end, .. } => Remedy::DeleteStaleRoute {
                node: site.node.clone(),
                dead_end: *dead_end,
            },
            Cause::Overlap {
                subnet,
                block,
                cilium_range,
                ..
            } => Remedy::ExcludeFromSubnet {
                subnet: subnet.clone(),
                exclude: cilium_range.as_ref().map_or(
                    IpRange {
                        first: self.ip,
                        last: self.ip,
                    },
                    IpRange::of,
                ),
                block: *block,
            },
        }
    }

    /// Stable order for output and comparisons: by kind, IP, pod.
    pub fn sort_key(&self) -> (FindingKind, IpAddr, Option<&PodRef>) {
        (self.kind, self.ip, self.pod())
    }
}
