//! What detection reports, as types: the kind of collision, who holds the
//! address, where the pod is, and the remedy that fits. Text is rendered from
//! these by the reporting layer (`report::message`), never parsed back.

use std::{fmt, net::IpAddr};

use ipnet::IpNet;
use serde::Serialize;

pub use super::cause::{Cause, IpamKind, KubeletReport, NodeProblem, PoolFit, Remedy};
pub use super::remedy::Reserver;
pub use super::trust::Trust;
pub use crate::inventory::InfraAddress;
pub use crate::inventory::Role;
use crate::inventory::{DeadEnd, IpRange, IpSource, Source};

/// The kinds of finding (DESIGN.md); their names are Event reasons and metric
/// labels (the same in JSON through serde and in text through strum).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumIter,
)]
pub enum FindingKind {
    /// The pod's IP is Cilium's router IP (`CiliumInternalIP`) of a node.
    #[serde(rename = "RouterIPCollision")]
    #[strum(serialize = "RouterIPCollision")]
    RouterIpCollision,
    /// The pod's IP is Cilium's Ingress IP of a node.
    #[serde(rename = "IngressIPCollision")]
    #[strum(serialize = "IngressIPCollision")]
    IngressIpCollision,
    /// The pod's IP is Cilium's health endpoint IP of a node.
    #[serde(rename = "HealthIPCollision")]
    #[strum(serialize = "HealthIPCollision")]
    HealthIpCollision,
    /// The pod's IP is a node's tunnel address (Calico's IPIP, VXLAN or WireGuard).
    #[serde(rename = "TunnelIPCollision")]
    #[strum(serialize = "TunnelIPCollision")]
    TunnelIpCollision,
    /// The pod's IP is a node's own in its pod subnet: a bridge's gateway,
    /// ovn-kubernetes' gateway or management port.
    #[serde(rename = "GatewayIPCollision")]
    #[strum(serialize = "GatewayIPCollision")]
    GatewayIpCollision,
    /// The pod's IP is another local address of a node.
    LocalAddressCollision,
    /// A bridge kept an address of a pod range that is no longer this node's:
    /// the host sends that range (another node's pods) into its bridge.
    StaleBridgeAddress,
    /// The node's route to its own pod goes nowhere.
    HostRouteBlackhole,
    /// The CNI refused the pod: the host routes its address through another
    /// interface (Calico's "route … already exists for an interface other than").
    PodRouteTaken,
    /// Latent: Cilium's infrastructure addresses (or the range it takes them
    /// from) lie in a range another allocator hands to pods.
    AllocatorOverlap,
    /// Cilium refused the pod's address as in use by another live pod.
    #[serde(rename = "DuplicatePodIP")]
    #[strum(serialize = "DuplicatePodIP")]
    DuplicatePodIp,
    /// Cilium refused the pod's address as in use, and nothing owns it: an
    /// endpoint Cilium keeps for a pod that is gone.
    StaleCiliumEndpoint,
    /// The node's pod allocator had no address left for a pod.
    #[serde(rename = "PodIPExhaustion")]
    #[strum(serialize = "PodIPExhaustion")]
    PodIpExhaustion,
    /// Latent: the node's pod range holds fewer usable addresses than kubelet accepts pods.
    #[serde(rename = "PodIPCapacityShortfall")]
    #[strum(serialize = "PodIPCapacityShortfall")]
    PodIpCapacityShortfall,
    /// cilium-operator could not allocate for the node (`status.ipam.operator-status.error`).
    #[serde(rename = "CiliumIPAMError")]
    #[strum(serialize = "CiliumIPAMError")]
    CiliumIpamError,
    /// Cilium runs cluster-pool, but the node keeps a podCIDR outside every pool.
    #[serde(rename = "IPAMMigrationStuck")]
    #[strum(serialize = "IPAMMigrationStuck")]
    IpamMigrationStuck,
    /// The node's Cilium Ingress IP lies outside every Subnet kube-ovn masquerades.
    #[serde(rename = "IngressIPNotMasqueraded")]
    #[strum(serialize = "IngressIPNotMasqueraded")]
    IngressIpNotMasqueraded,
    /// Latent: Cilium's cluster pool has room for no more nodes than the cluster has.
    ClusterPoolNearlyFull,
    /// The host routes the pod's address into a namespace that does not hold it.
    PodRouteMisdirected,
    /// The host's route to the pod goes out an interface that is down.
    PodRouteDeadEnd,
    /// Two namespaces on the node hold the pod's address.
    PodAddressHeldTwice,
    /// A namespace holds an address no pod of this node has: a leaked sandbox.
    LeakedSandboxAddress,
    /// No namespace on the pod's node holds its address.
    PodAddressNotHeld,
    /// Another node's InternalIP/ExternalIP held here or claimed by a Service.
    NodeAddressShadowed,
    /// A node's Calico tunnel address that no IPAMBlock allocates to its tunnel.
    UnallocatedTunnelAddress,
}

impl FindingKind {
    /// Every kind, in order.
    pub fn all() -> impl Iterator<Item = Self> {
        <Self as strum::IntoEnumIterator>::iter()
    }

    /// The name used in JSON, Event reasons and metric labels.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The collision kind of an address with this role.
    pub fn for_role(role: Role) -> Self {
        match role {
            Role::Router => Self::RouterIpCollision,
            Role::Ingress => Self::IngressIpCollision,
            Role::Health => Self::HealthIpCollision,
            Role::Tunnel => Self::TunnelIpCollision,
            Role::Gateway | Role::ManagementPort | Role::OvnRouterPort => Self::GatewayIpCollision,
            Role::Local | Role::Node => Self::LocalAddressCollision,
            Role::Pod => Self::DuplicatePodIp,
            Role::Endpoint => Self::StaleCiliumEndpoint,
        }
    }

    /// Whether findings of this kind are about a node (its Event goes on the
    /// Node); a pod's refusal of such a kind is the pod's ([`Finding::is_node_level`]).
    pub fn is_node_level(self) -> bool {
        matches!(
            self,
            Self::AllocatorOverlap
                | Self::PodIpExhaustion
                | Self::PodIpCapacityShortfall
                | Self::CiliumIpamError
                | Self::IpamMigrationStuck
                | Self::IngressIpNotMasqueraded
                | Self::ClusterPoolNearlyFull
                | Self::StaleBridgeAddress
                | Self::LeakedSandboxAddress
                | Self::NodeAddressShadowed
                | Self::UnallocatedTunnelAddress
        )
    }
}

/// Whether the address's owner is the pod's own node.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumIter,
)]
#[strum(serialize_all = "kebab-case")]
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
        self.into()
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
    /// Its controller (`Kind/name` of the owner reference with `controller:
    /// true`): what recreates it when it is evicted.
    pub controller: Option<String>,
}

/// One finding: a pod IP shadowed (or about to be) by an address a node holds,
/// or a pod its own node cannot reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The kind.
    pub kind: FindingKind,
    /// Same-node or cross-node.
    pub scope: Scope,
    /// The colliding (or unreachable) IP; `None` for node findings about no one address.
    pub ip: Option<IpAddr>,
    /// Who holds the address.
    pub owner: Owner,
    /// What exactly was found.
    pub cause: Cause,
    /// What fixes it.
    pub remedy: Remedy,
    /// Who could have written what it rests on: what the agent may do with it.
    pub trust: Trust,
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
        let trust = Trust::of_source(owner.source).max(Trust::of_ip(&site.ip_source));
        Self {
            kind: FindingKind::for_role(owner.role),
            scope,
            ip: Some(ip),
            owner,
            cause: Cause::Collision {
                site,
                fib,
                shadowed_route,
                kubelet: None,
                service: None,
                held_behind: None,
            },
            remedy,
            trust,
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
        let trust = Trust::Kernel.max(Trust::of_ip(&site.ip_source));
        let remedy = if dead_end == DeadEnd::NoRoute {
            Remedy::RestoreRoute { node, kube_ovn }
        } else {
            Remedy::DeleteStaleRoute { node, dead_end }
        };
        Self {
            kind: FindingKind::HostRouteBlackhole,
            scope: Scope::SameNode,
            ip: Some(ip),
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
            trust,
        }
    }

    /// Cilium's addresses (held now, `ip` first), or `ip` it may take from
    /// `cilium_range` (`addresses` empty), that `subnet` may hand to a pod.
    pub fn overlap(
        ip: IpAddr,
        owner: Owner,
        subnet: String,
        block: Option<IpNet>,
        cilium_range: Option<(IpNet, &'static str)>,
        addresses: Vec<InfraAddress>,
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
        let trust = Trust::of_source(owner.source);
        Self {
            kind: FindingKind::AllocatorOverlap,
            scope: Scope::SameNode,
            ip: Some(ip),
            owner,
            cause: Cause::Overlap {
                subnet,
                block,
                cilium_range,
                held: !addresses.is_empty(),
                addresses,
            },
            remedy,
            trust,
        }
    }

    /// Whether this finding is about a node (its Event goes on the Node): a
    /// node kind, unless a pod was refused over it (a stale bridge address
    /// refuses pods, and each refused pod is told).
    pub fn is_node_level(&self) -> bool {
        self.kind.is_node_level() && self.site().is_none()
    }

    /// The IP as text; empty for a node finding about no one address.
    pub fn ip_text(&self) -> String {
        self.ip.map_or_else(String::new, |ip| ip.to_string())
    }

    /// The pod side, for pod findings.
    pub fn site(&self) -> Option<&PodSite> {
        match &self.cause {
            Cause::Collision { site, .. }
            | Cause::Blackhole { site, .. }
            | Cause::Refused { site, .. }
            | Cause::Leftover { site, .. }
            | Cause::Duplicate { site, .. } => Some(site),
            Cause::Kernel(k) => k.site.as_ref(),
            Cause::Overlap { .. } | Cause::Node(_) => None,
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
    pub fn sort_key(&self) -> (FindingKind, Option<IpAddr>, Option<&PodRef>) {
        (self.kind, self.ip, self.pod())
    }
}
