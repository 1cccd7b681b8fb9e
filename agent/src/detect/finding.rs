//! What detection reports, as types: the kind of collision, who holds the
//! address, where the pod is, and the remedy that fits. Text is rendered from
//! these by the reporting layer (`report::message`), never parsed back.

use std::{fmt, net::IpAddr};

use ipnet::IpNet;
use serde::Serialize;

pub use crate::inventory::Role;
use crate::inventory::{DeadEnd, IpRange, IpSource, Source};

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
    /// Where the address was read.
    pub source: Source,
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
    /// When the pod was created (Unix seconds), if known.
    pub created: Option<i64>,
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
        /// Cilium's range involved, and the field it was read from.
        cilium_range: Option<(IpNet, &'static str)>,
        /// Whether the IP is an address Cilium holds now (rather than one it may take).
        held: bool,
    },
}

/// What the operator should do, decided from what the inventory shows of the
/// cluster; rendered into every message and Event note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// kube-ovn hands out pod addresses over Cilium's range: give Cilium a pool
    /// cut from the end of the Subnet's block and exclude it there.
    CarveCiliumPool {
        /// The Subnet that handed the address out.
        subnet: String,
        /// Its block holding the address.
        block: IpNet,
        /// A block at its end for Cilium's pool.
        pool: IpNet,
    },
    /// kube-ovn hands out pod addresses, but no Subnet known here holds this one.
    ExcludeInPodAllocator,
    /// Cilium is the only allocator and gave a pod an address it holds itself.
    ReallocatePod {
        /// The node whose allocator did it.
        node: String,
    },
    /// Remove the local address, or keep the pod allocator off it.
    RemoveLocalAddress {
        /// The device holding it.
        device: Option<String>,
        /// The kube-ovn Subnet that hands it out, if one does.
        subnet: Option<String>,
    },
    /// Restore the pod network's route on the node.
    RestoreRoute {
        /// The node missing the route.
        node: String,
        /// Whether kube-ovn lays the pod routes (one per subnet, via ovn0).
        kube_ovn: bool,
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
    /// What fixes it.
    pub remedy: Remedy,
}

impl Finding {
    /// A pod IP that is an address `owner` holds; the kind follows the owner's role.
    pub fn collision(
        scope: Scope,
        ip: IpAddr,
        owner: Owner,
        site: PodSite,
        (fib, shadowed_route): (Option<String>, Option<String>),
        remedy: Remedy,
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
            remedy,
        }
    }

    /// A pod IP its own node routes into `dead_end`.
    pub fn blackhole(
        ip: IpAddr,
        site: PodSite,
        dead_end: DeadEnd,
        route: Option<String>,
        kube_ovn: bool,
    ) -> Self {
        let node = site.node.clone();
        let remedy = if dead_end == DeadEnd::NoRoute {
            Remedy::RestoreRoute { node, kube_ovn }
        } else {
            Remedy::DeleteStaleRoute { node, dead_end }
        };
        Self {
            kind: FindingKind::HostRouteBlackhole,
            scope: Scope::SameNode,
            ip,
            owner: Owner {
                node: site.node.clone(),
                role: Role::Local,
                device: None,
                source: Source::Kernel,
            },
            cause: Cause::Blackhole {
                site,
                dead_end,
                route,
            },
            remedy,
        }
    }

    /// Cilium's address `ip` (held now, or one it may take from `cilium_range`)
    /// that `subnet` may hand to a pod.
    pub fn overlap(
        ip: IpAddr,
        owner: Owner,
        subnet: String,
        block: Option<IpNet>,
        cilium_range: Option<(IpNet, &'static str)>,
        held: bool,
    ) -> Self {
        let exclude = cilium_range.as_ref().map_or(
            IpRange {
                first: ip,
                last: ip,
            },
            |(r, _)| IpRange::of(r),
        );
        let remedy = Remedy::ExcludeFromSubnet {
            subnet: subnet.clone(),
            exclude,
            block,
        };
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
            remedy,
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

    /// Stable order for output and comparisons: by kind, IP, pod.
    pub fn sort_key(&self) -> (FindingKind, IpAddr, Option<&PodRef>) {
        (self.kind, self.ip, self.pod())
    }
}
