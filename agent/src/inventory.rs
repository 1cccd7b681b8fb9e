//! One snapshot of everything detection looks at: the node's own network (from
//! netlink) and the cluster objects that matter (from Kubernetes or files).
//!
//! These are plain data; the adapters in `netlink/` and `kube/` fill them in and
//! `detect` reads them. Nothing here does I/O.

use std::{collections::BTreeMap, fmt, net::IpAddr, sync::Arc};

use ipnet::IpNet;
use serde::Serialize;

/// Device name Cilium puts its router IP on.
pub const DEFAULT_ROUTER_DEVICE: &str = "cilium_host";
/// Annotation kube-ovn writes with the IP(s) it assigned, before the pod has a status IP.
pub const DEFAULT_POD_IP_ANNOTATION: &str = "ovn.kubernetes.io/ip_address";

#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// This node's name (`spec.nodeName` of its pods, name of its CiliumNode).
    pub node: String,
    /// The device holding Cilium's router IP on this node.
    pub router_device: String,
    pub host: HostNetwork,
    // Shared with the sources' state: a reconcile copies no object.
    pub pods: Arc<Vec<Pod>>,
    pub cilium_nodes: Arc<Vec<CiliumNode>>,
    /// kube-ovn Subnets (empty when the CRD is absent).
    pub subnets: Arc<Vec<Subnet>>,
}

/// What netlink says about this node.
#[derive(Clone, Debug, Default)]
pub struct HostNetwork {
    pub links: Vec<Link>,
    pub addresses: Vec<LocalAddress>,
    /// Routes of every table (main, local, others), both families.
    pub routes: Vec<Route>,
    /// FIB lookups (`ip route get`) for the IPs of this node's pods.
    pub fib: BTreeMap<IpAddr, FibResult>,
}

impl HostNetwork {
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
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// `veth`, `dummy`, `bridge`, … (IFLA_INFO_KIND); `None` for plain devices like `lo`.
    pub kind: Option<String>,
    /// IFLA_LINK: for a veth the peer's index (in the peer's namespace).
    pub peer_index: Option<u32>,
    /// IFLA_LINK_NETNSID: set when the peer lives in another namespace.
    pub peer_netns_id: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalAddress {
    pub ip: IpAddr,
    pub prefix_len: u8,
    pub ifindex: u32,
    pub device: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub table: u32,
    pub dst: IpNet,
    pub kind: RouteKind,
    pub oif: Option<u32>,
    pub gateway: Option<IpAddr>,
}

pub const TABLE_MAIN: u32 = 254;
pub const TABLE_LOCAL: u32 = 255;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteKind {
    Unicast,
    Local,
    Broadcast,
    Anycast,
    Multicast,
    Blackhole,
    Unreachable,
    Prohibit,
    Throw,
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
    Local { oif: Option<u32> },
    /// Forwarded out of a device, possibly via a gateway.
    Unicast {
        oif: Option<u32>,
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
    /// The route kind a host-to-pod packet dies on, if it dies.
    pub fn blackhole_kind(&self) -> Option<&'static str> {
        match self {
            Self::Blackhole => Some("blackhole"),
            Self::Unreachable => Some("unreachable"),
            Self::Prohibit => Some("prohibit"),
            Self::NoRoute => Some("no route"),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `spec.nodeName`; `None` while unscheduled.
    pub node: Option<String>,
    pub ips: Vec<PodIp>,
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodIp {
    pub ip: IpAddr,
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
    pub first: IpAddr,
    pub last: IpAddr,
}

impl IpRange {
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
