//! What detection reports, as types: the kind of collision, who holds the
//! address, where the pod is, and the remedy that fits. Text is rendered from
//! these by the reporting layer (`report::message`), never parsed back.

use std::{fmt, net::IpAddr};

use serde::Serialize;

pub use super::cause::{Cause, IpamKind, KubeletReport, NodeProblem, PoolFit, Remedy};
use super::kind::{About, Spec};
pub use super::remedy::Reserver;
pub use super::trust::Trust;
pub use crate::inventory::InfraAddress;
pub use crate::inventory::Role;
use crate::inventory::{DeadEnd, IpSource, Pod, Source};

/// The kinds of finding. Each is declared once beside its detector (a
/// [`Spec`]): its name is the Event reason, metric label and JSON value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, strum::EnumIter)]
#[allow(missing_docs, reason = "each kind's Spec says what it is")]
pub enum FindingKind {
    RouterIpCollision,
    IngressIpCollision,
    HealthIpCollision,
    TunnelIpCollision,
    GatewayIpCollision,
    LocalAddressCollision,
    StaleBridgeAddress,
    HostRouteBlackhole,
    PodRouteTaken,
    AllocatorOverlap,
    DuplicatePodIp,
    StaleCiliumEndpoint,
    StaleCalicoAllocation,
    PodIpExhaustion,
    PodIpCapacityShortfall,
    CiliumIpamError,
    IpamMigrationStuck,
    IngressIpNotMasqueraded,
    ClusterPoolNearlyFull,
    PodRouteMisdirected,
    PodRouteDeadEnd,
    PodAddressHeldTwice,
    LeakedSandboxAddress,
    PodAddressNotHeld,
    PodAddressDadFailed,
    PodAddressTentative,
    NodeAddressDadFailed,
    NodeAddressShadowed,
    UnallocatedTunnelAddress,
    AddressPlanOverlap,
    DuplicateSecondaryIp,
}

impl FindingKind {
    /// Its declaration: the one place a kind is registered.
    pub fn spec(self) -> &'static Spec {
        use super::{
            bridge, calico, collision, kernel, leftover, node, overlap, plan, refused, secondary,
            vip,
        };
        match self {
            Self::RouterIpCollision => &collision::ROUTER,
            Self::IngressIpCollision => &collision::INGRESS,
            Self::HealthIpCollision => &collision::HEALTH,
            Self::TunnelIpCollision => &collision::TUNNEL,
            Self::GatewayIpCollision => &collision::GATEWAY,
            Self::LocalAddressCollision => &collision::LOCAL,
            Self::StaleBridgeAddress => &bridge::STALE_BRIDGE,
            Self::HostRouteBlackhole => &collision::BLACKHOLE,
            Self::PodRouteTaken => &leftover::ROUTE_TAKEN,
            Self::AllocatorOverlap => &overlap::OVERLAP,
            Self::DuplicatePodIp => &refused::DUPLICATE,
            Self::StaleCiliumEndpoint => &refused::STALE_ENDPOINT,
            Self::StaleCalicoAllocation => &refused::STALE_CALICO,
            Self::PodIpExhaustion => &node::EXHAUSTION,
            Self::PodIpCapacityShortfall => &node::CAPACITY,
            Self::CiliumIpamError => &node::OPERATOR_ERROR,
            Self::IpamMigrationStuck => &node::MIGRATION_STUCK,
            Self::IngressIpNotMasqueraded => &node::NOT_MASQUERADED,
            Self::ClusterPoolNearlyFull => &node::POOL_NEARLY_FULL,
            Self::PodRouteMisdirected => &kernel::MISDIRECTED,
            Self::PodRouteDeadEnd => &kernel::DEAD_END,
            Self::PodAddressHeldTwice => &kernel::HELD_TWICE,
            Self::LeakedSandboxAddress => &kernel::LEAKED,
            Self::PodAddressNotHeld => &kernel::NOT_HELD,
            Self::PodAddressDadFailed => &kernel::DAD_FAILED,
            Self::PodAddressTentative => &kernel::DAD_STUCK,
            Self::NodeAddressDadFailed => &kernel::NODE_DAD,
            Self::NodeAddressShadowed => &vip::NODE_ADDRESS,
            Self::UnallocatedTunnelAddress => &calico::UNALLOCATED,
            Self::AddressPlanOverlap => &plan::PLAN,
            Self::DuplicateSecondaryIp => &secondary::DUPLICATE_SECONDARY,
        }
    }

    /// Every kind, in order.
    pub fn all() -> impl Iterator<Item = Self> {
        <Self as strum::IntoEnumIterator>::iter()
    }

    /// The name used in JSON, Event reasons and metric labels.
    pub fn as_str(self) -> &'static str {
        self.spec().name
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
        self.spec().about == About::Node
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FindingKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
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

    /// Same-node where the pod's `node` is the owner's `owner`.
    pub fn between(node: &str, owner: &str) -> Self {
        if node == owner {
            Self::SameNode
        } else {
            Self::CrossNode
        }
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

impl From<&Pod> for PodRef {
    fn from(p: &Pod) -> Self {
        Self {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            uid: p.uid.clone(),
        }
    }
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

impl Owner {
    /// `node`'s address of `role`, on `device`, read from `source`.
    pub fn new(
        node: impl Into<String>,
        role: Role,
        device: Option<String>,
        source: Source,
    ) -> Self {
        Self {
            node: node.into(),
            role,
            device,
            source,
        }
    }
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

impl PodSite {
    /// `pod` on `node`, its address read from `ip_source`.
    pub fn new(pod: &Pod, node: &str, ip_source: IpSource) -> Self {
        Self {
            pod: PodRef::from(pod),
            node: node.to_owned(),
            ip_source,
            created: pod.created,
            controller: pod.controller.clone(),
        }
    }
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
            owner: Owner::new(site.node.clone(), Role::Local, None, Source::Kernel),
            cause: Cause::Blackhole {
                site,
                dead_end,
                route,
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
            Cause::Overlap { .. } | Cause::Node(_) | Cause::Plan(_) => None,
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
