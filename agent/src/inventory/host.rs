//! What netlink says about this node: links, addresses, routes, FIB answers.

use std::{collections::BTreeMap, fmt::Write as _, net::IpAddr};

use ipnet::IpNet;
use serde::Serialize;

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
    /// The namespaces behind the host's veth/netkit interfaces and what they hold.
    pub namespaces: super::PodNamespaces,
    /// The node's global IPv6 addresses the kernel marks `dadfailed`: another
    /// holder on the link answered for each, and the node does not use it.
    pub dad_failed: Vec<IpAddr>,
}

impl HostNetwork {
    /// The name of the device with `index`.
    pub fn link_name(&self, index: u32) -> Option<&str> {
        self.links
            .iter()
            .find(|l| l.index == index)
            .map(|l| l.name.as_str())
    }

    /// The most specific route containing `ip` of those `of` accepts (one
    /// table's: as the kernel's longest-prefix match would pick it there).
    pub fn best_route(&self, ip: IpAddr, of: impl Fn(&Route) -> bool) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| of(r) && r.dst.contains(&ip))
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
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Serialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumIter,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
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
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumIter,
)]
#[strum(serialize_all = "lowercase")]
pub enum DeadEnd {
    /// A `blackhole` route (EINVAL).
    Blackhole,
    /// An `unreachable` route (EHOSTUNREACH).
    Unreachable,
    /// A `prohibit` route (EACCES).
    Prohibit,
    /// No route, or a `throw` route (ENETUNREACH).
    #[strum(serialize = "no route")]
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
