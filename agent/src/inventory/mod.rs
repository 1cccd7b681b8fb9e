//! One snapshot of everything detection looks at: the node's own network (from
//! netlink) and the cluster objects that matter (from Kubernetes or files).
//!
//! These are plain data; the adapters in `netlink/` and `kube/` fill them in and
//! `detect` reads them. Nothing here does I/O.

use std::{collections::BTreeMap, fmt, fmt::Write as _, net::IpAddr, sync::Arc};

mod cluster;
#[cfg(test)]
pub(crate) mod fixtures;

pub use cluster::{ClusterState, Invalid, SourceStatus};

use ipnet::IpNet;
use serde::Serialize;

/// Device name Cilium puts its router IP on.
pub const DEFAULT_ROUTER_DEVICE: &str = "cilium_host";
/// Annotation kube-ovn writes with the IP(s) it assigned, before the pod has a status IP.
pub const DEFAULT_POD_IP_ANNOTATION: &str = "ovn.kubernetes.io/ip_address";

/// Everything one reconcile looks at.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// This node's name (`spec.nodeName` of its pods, name of its CiliumNode).
    pub node: String,
    /// The device holding Cilium's router IP on this node.
    pub router_device: String,
    /// This node's network.
    pub host: HostNetwork,
    // Shared with the sources' state: a reconcile copies no object.
    /// This node's pods, and pods elsewhere holding one of its addresses.
    pub pods: Arc<Vec<Pod>>,
    /// Every CiliumNode of the cluster.
    pub cilium_nodes: Arc<Vec<CiliumNode>>,
    /// kube-ovn Subnets (empty when the CRD is absent).
    pub subnets: Arc<Vec<Subnet>>,
}

/// What netlink says about this node.
#[derive(Clone, Debug, Default)]
pub struct HostNetwork {
    /// Every device.
    pub links: Vec<Link>,
    /// Every address.
    pub addresses: Vec<LocalAddress>,
    /// Routes of every table (main, local, others), both families.
    pub routes: Vec<Route>,
    /// FIB lookups (`ip route get`) for the IPs of this node's pods.
    pub fib: BTreeMap<IpAddr, FibResult>,
}

impl HostNetwork {
    /// The name of the device with `index`.
    pub fn link_name(&self, index: u32) -> Option<&str> {
        self.links
            .iter()
            .find(|l| l.index == index)
            .map(|l| l.name.as_str())
    }

    /// The most specific route of `table` containing `ip`, as the kernel's
    /// longest-prefix match would pick it within one table.
    pub fn best_route(&self, ip: IpAddr, table: u32) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| r.table == table && r.dst.contains(&ip))
            .max_by_key(|r| r.dst.prefix_len())
    }

    /// The most specific route of any table containing `ip` whose type is `kind`.
    pub fn best_route_of_kind(&self, ip: IpAddr, kind: RouteKind) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| r.kind == kind && r.dst.contains(&ip))
            .max_by_key(|r| r.dst.prefix_len())
    }

    /// `ip route`-like text: `10.244.1.5/32 dev lxc1`, `10.244.0.0/16 via 10.244.0.1 dev ovn0`.
    pub fn describe_route(&self, r: &Route) -> String {
        let mut s = match r.kind {
            RouteKind::Unicast => r.dst.to_string(),
            kind => format!("{kind} {}", r.dst),
        };
        if let Some(gw) = r.gateway {
            let _ = write!(s, " via {gw}");
        }
        if let Some(dev) = r.oif.and_then(|i| self.link_name(i)) {
            let _ = write!(s, " dev {dev}");
        }
        s
    }

    /// `ip route get`-like text of a FIB answer: `local dev cilium_host`, `blackhole`, …
    pub fn describe_fib(&self, fib: &FibResult) -> String {
        let dev = |oif: &Option<u32>| {
            oif.and_then(|i| self.link_name(i))
                .map(|d| format!(" dev {d}"))
                .unwrap_or_default()
        };
        match fib {
            FibResult::Local { oif } => format!("local{}", dev(oif)),
            FibResult::Unicast { oif, gateway } => {
                let via = gateway.map(|g| format!(" via {g}")).unwrap_or_default();
                format!("unicast{via}{}", dev(oif))
            }
            FibResult::Other(s) => s.clone(),
            dead => dead.dead_end().map_or_else(String::new, |d| d.to_string()),
        }
    }
}

/// A network device of this node: what routes and FIB answers name by index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The kernel's interface index.
    pub index: u32,
    /// The device name (`cilium_host`, `ovn0`, `lo`, …).
    pub name: String,
}

/// An address this node's kernel holds, and the device it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalAddress {
    /// The address.
    pub ip: IpAddr,
    /// The device holding it.
    pub device: String,
}

/// A route of any table, as dumped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The routing table (254 main, 255 local).
    pub table: u32,
    /// The destination prefix.
    pub dst: IpNet,
    /// The route type.
    pub kind: RouteKind,
    /// The output interface.
    pub oif: Option<u32>,
    /// The gateway.
    pub gateway: Option<IpAddr>,
}

/// The kernel's main routing table.
pub const TABLE_MAIN: u32 = 254;
/// The kernel's local table: addresses of this node, consulted first.
pub const TABLE_LOCAL: u32 = 255;

/// A route's type (`ip route` prints it before the prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteKind {
    /// A plain route.
    Unicast,
    /// Delivered to this host.
    Local,
    /// Broadcast.
    Broadcast,
    /// Anycast.
    Anycast,
    /// Multicast.
    Multicast,
    /// Drops silently.
    Blackhole,
    /// Drops with "host unreachable".
    Unreachable,
    /// Drops with "prohibited".
    Prohibit,
    /// Ends the lookup in this table.
    Throw,
    /// Any other type.
    Other,
}

impl fmt::Display for RouteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unicast => "unicast",
            Self::Local => "local",
            Self::Broadcast => "broadcast",
            Self::Anycast => "anycast",
            Self::Multicast => "multicast",
            Self::Blackhole => "blackhole",
            Self::Unreachable => "unreachable",
            Self::Prohibit => "prohibit",
            Self::Throw => "throw",
            Self::Other => "other",
        })
    }
}

/// The answer of one FIB lookup (RTM_GETROUTE for a single address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FibResult {
    /// Delivered to this host (`local X dev lo`): decided by the route type, not the table.
    Local {
        /// The output device, when the answer names one.
        oif: Option<u32>,
    },
    /// Forwarded out of a device, possibly via a gateway.
    Unicast {
        /// The output device.
        oif: Option<u32>,
        /// The next hop, if not on-link.
        gateway: Option<IpAddr>,
    },
    /// The kernel answered EINVAL: a `blackhole` route matched.
    Blackhole,
    /// EHOSTUNREACH: an `unreachable` route matched.
    Unreachable,
    /// EACCES: a `prohibit` route matched.
    Prohibit,
    /// ENETUNREACH: no route at all (or a `throw`).
    NoRoute,
    /// Any other answer, kept for the message.
    Other(String),
}

impl FibResult {
    /// Where a host-to-pod packet dies, if it dies.
    pub fn dead_end(&self) -> Option<DeadEnd> {
        match self {
            Self::Blackhole => Some(DeadEnd::Blackhole),
            Self::Unreachable => Some(DeadEnd::Unreachable),
            Self::Prohibit => Some(DeadEnd::Prohibit),
            Self::NoRoute => Some(DeadEnd::NoRoute),
            Self::Local { .. } | Self::Unicast { .. } | Self::Other(_) => None,
        }
    }
}

/// A FIB answer that drops the packet: the route type it hit, or no route at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeadEnd {
    /// A `blackhole` route (EINVAL).
    Blackhole,
    /// An `unreachable` route (EHOSTUNREACH).
    Unreachable,
    /// A `prohibit` route (EACCES).
    Prohibit,
    /// No route, or a `throw` route (ENETUNREACH).
    NoRoute,
}

impl DeadEnd {
    /// The route type that produces this answer (`throw` for no route).
    pub fn route_kind(self) -> RouteKind {
        match self {
            Self::Blackhole => RouteKind::Blackhole,
            Self::Unreachable => RouteKind::Unreachable,
            Self::Prohibit => RouteKind::Prohibit,
            Self::NoRoute => RouteKind::Throw,
        }
    }
}

impl fmt::Display for DeadEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Blackhole => "blackhole",
            Self::Unreachable => "unreachable",
            Self::Prohibit => "prohibit",
            Self::NoRoute => "no route",
        })
    }
}

/// A pod as detection needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pod {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.nodeName`; `None` while unscheduled.
    pub node: Option<String>,
    /// Its IPs, at most one per family in a sane object.
    pub ips: Vec<PodIp>,
    /// `spec.hostNetwork`: its IP is the node's.
    pub host_network: bool,
    /// `status.phase` (Pending, Running, Succeeded, Failed, Unknown).
    pub phase: Option<String>,
}

impl Pod {
    /// Pods that cannot receive traffic are not findings: host-network pods
    /// (their IP is the node's) and pods that have terminated.
    pub fn can_receive_traffic(&self) -> bool {
        !self.host_network && !matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }
}

/// One IP of a pod, and where it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodIp {
    /// The address.
    pub ip: IpAddr,
    /// Where it came from.
    pub source: IpSource,
}

/// Where a pod IP came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IpSource {
    /// `status.podIPs`.
    Status,
    /// A CNI annotation (kube-ovn's `ovn.kubernetes.io/ip_address`): the pod has
    /// no status IP yet, e.g. because its sandbox keeps failing.
    Annotation,
}

/// The infrastructure addresses Cilium holds on one node (`CiliumNode` spec).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CiliumNode {
    /// `metadata.name`: the node's name.
    pub name: String,
    /// `spec.addresses[type=CiliumInternalIP]`: the router IP on `cilium_host`.
    pub router: Vec<IpAddr>,
    /// `spec.ingress.ipv4/ipv6`: held by the reserved:ingress endpoint.
    pub ingress: Vec<IpAddr>,
    /// `spec.health.ipv4/ipv6`: the cilium-health endpoint.
    pub health: Vec<IpAddr>,
    /// `spec.ipam.podCIDRs`: the range Cilium takes those addresses from.
    pub pod_cidrs: Vec<IpNet>,
}

/// A kube-ovn `Subnet` (kubeovn.io/v1): the range another allocator hands pods from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subnet {
    /// `metadata.name`.
    pub name: String,
    /// `spec.cidrBlock`, comma-separated for dual stack.
    pub cidrs: Vec<IpNet>,
    /// `spec.excludeIps`: single IPs and `first..last` ranges, inclusive.
    pub exclude: Vec<IpRange>,
}

impl Subnet {
    /// Whether kube-ovn may hand `ip` to a pod: inside the block and not excluded.
    pub fn allocates(&self, ip: IpAddr) -> bool {
        self.cidrs.iter().any(|c| c.contains(&ip)) && !self.exclude.iter().any(|r| r.contains(ip))
    }
}

/// An inclusive range of addresses, as kube-ovn writes `first..last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpRange {
    /// The first address.
    pub first: IpAddr,
    /// The last address (inclusive).
    pub last: IpAddr,
}

impl IpRange {
    /// Whether `ip` lies in the range (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.first, self.last, ip) {
            (IpAddr::V4(a), IpAddr::V4(b), IpAddr::V4(x)) => a <= x && x <= b,
            (IpAddr::V6(a), IpAddr::V6(b), IpAddr::V6(x)) => a <= x && x <= b,
            _ => false,
        }
    }

    /// The whole of `net` as a range.
    pub fn of(net: &IpNet) -> Self {
        Self {
            first: net.network(),
            last: net.broadcast(),
        }
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}..{}", self.first, self.last)
        }
    }
}
