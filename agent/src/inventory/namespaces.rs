//! The kernel's truth about the pods: every host interface whose peer lives in
//! another network namespace (veth, netkit), what that namespace holds, and
//! the node's truth table built from it (address → the namespaces holding it,
//! the host route reaching it, the pods the API places there).
//!
//! Plain data: `netlink::peers` fills [`PodNamespaces`] in; `detect::kernel`
//! builds the [`TruthRow`]s and compares them.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use serde::Serialize;

/// A link's operational state (`IFLA_OPERSTATE`), as `ip link` prints it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, strum::Display,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum OperState {
    /// Up and running.
    Up,
    /// Administratively or physically down.
    Down,
    /// The device below is down (a veth whose peer is down).
    #[serde(rename = "lowerlayerdown")]
    LowerLayerDown,
    /// Not reported (loopback and some virtual devices): treated as up.
    #[default]
    Unknown,
    /// Any other state (dormant, testing, not present).
    Other,
}

impl OperState {
    /// Whether packets sent to the link can go anywhere.
    pub fn carries(self) -> bool {
        matches!(self, Self::Up | Self::Unknown)
    }
}

/// A host interface whose peer is in another network namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostIface {
    /// Its ifindex in the host namespace.
    pub index: u32,
    /// Its name (`vethXXXX`, `lxc…`, `cali…`).
    pub name: String,
    /// `veth`, `netkit`, … (`IFLA_INFO_KIND`); empty when not reported.
    pub kind: String,
    /// Its operational state.
    pub state: OperState,
    /// Whether it is administratively up (`IFF_UP`): only the host sets that.
    /// Its operational state also follows the peer's (a pod that sets its
    /// `eth0` down makes it `down` or `lowerlayerdown`).
    pub admin_up: bool,
    /// The bridge or OVS port it is enslaved to (`IFLA_MASTER`), by ifindex.
    pub master: Option<u32>,
    /// The peer namespace's id as the host namespace knows it (`IFLA_LINK_NETNSID`).
    pub nsid: i32,
    /// The peer's ifindex in that namespace (`IFLA_LINK`).
    pub peer_index: u32,
}

/// A link inside a peer namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NsLink {
    /// Its ifindex in its namespace.
    pub index: u32,
    /// Its name (`eth0`).
    pub name: String,
    /// Its operational state.
    pub state: OperState,
    /// The link it is paired with or stacked on in another namespace, where
    /// the kernel names one (`IFLA_LINK` with `IFLA_LINK_NETNSID`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower: Option<Lower>,
}

/// The link a peer namespace's link is paired with (a veth's peer) or stacked
/// on (a macvlan's, ipvlan's or VLAN's parent), in another namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Lower {
    /// That namespace's nsid, as the reading (host) namespace numbers it: the
    /// host's own nsid where the link is the host's.
    pub nsid: i32,
    /// The link's ifindex in that namespace.
    pub index: u32,
    /// Whether the link is stacked on it and shares its network (macvlan,
    /// macvtap, ipvlan, ipvtap, VLAN), not a veth's or netkit's peer.
    pub stacked: bool,
}

/// An address inside a peer namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NsAddress {
    /// The address (`IFA_LOCAL`, else `IFA_ADDRESS`).
    pub ip: IpAddr,
    /// Its prefix length.
    pub prefix_len: u8,
    /// The ifindex of the link holding it, in its namespace.
    pub index: u32,
    /// IPv6 duplicate address detection failed (`IFA_F_DADFAILED`): the kernel
    /// keeps the address but never uses it.
    pub dad_failed: bool,
    /// IPv6 duplicate address detection has not ended [`DAD_STUCK_AFTER`]
    /// after the kernel made the address (`IFA_F_TENTATIVE` still): the kernel
    /// uses it for nothing meanwhile. It ends within seconds where it runs.
    pub dad_stuck: bool,
}

/// How long an address may stay tentative: DAD takes `dad_transmits` (1)
/// times `retrans_time_ms` (1 s) after a random delay of at most 1 s.
pub const DAD_STUCK_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// One peer namespace, read from the host namespace by its nsid.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PeerNamespace {
    /// Its links (loopback left out).
    pub links: Vec<NsLink>,
    /// Its addresses that can carry pod traffic: no loopback, no link-local.
    pub addresses: Vec<NsAddress>,
    /// Whether a bound cut the read short.
    pub truncated: bool,
}

impl PeerNamespace {
    /// The link with `index`.
    pub fn link(&self, index: u32) -> Option<&NsLink> {
        self.links.iter().find(|l| l.index == index)
    }

    /// Whether the namespace holds `ip` on any link.
    pub fn holds(&self, ip: IpAddr) -> bool {
        self.addresses.iter().any(|a| a.ip == ip)
    }
}

/// A peer namespace that could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unread {
    /// Its nsid.
    pub nsid: i32,
    /// The host interface it was reached through.
    pub iface: String,
    /// What failed.
    pub reason: String,
}

/// What the kernel says about the namespaces behind the host's interfaces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodNamespaces {
    /// Whether they were read at all (`false`: kernel too old, or not asked).
    pub read: bool,
    /// Why they were not read, when they were not.
    pub skipped: Option<String>,
    /// Every host interface with a peer in another namespace.
    pub ifaces: Vec<HostIface>,
    /// The peer namespaces, by nsid (shared with the reader's copy of its
    /// last read: a pass that reads none of them copies none).
    pub namespaces: BTreeMap<i32, Arc<PeerNamespace>>,
    /// Namespaces that could not be read.
    pub unread: Vec<Unread>,
    /// How many namespaces were read afresh in this pass (new, changed, or
    /// all after a resync); the others were kept from an earlier read.
    pub reread: usize,
    /// How many namespaces a resync wants read again are still served from
    /// their last read (read in the next passes, a slice at a time).
    pub stale_left: usize,
}

impl PodNamespaces {
    /// The host interfaces whose namespace holds `ip`.
    pub fn holders(&self, ip: IpAddr) -> impl Iterator<Item = &HostIface> + '_ {
        // One namespace reached through several interfaces counts once: its first.
        let mut seen = Vec::new();
        self.ifaces.iter().filter(move |i| {
            let held = self.namespaces.get(&i.nsid).is_some_and(|n| n.holds(ip));
            if held && !seen.contains(&i.nsid) {
                seen.push(i.nsid);
                true
            } else {
                false
            }
        })
    }
}

/// A namespace holding an address, as the truth table shows it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Holder {
    /// The host interface leading there.
    pub iface: String,
    /// Its ifindex.
    pub iface_index: u32,
    /// The peer's name in its namespace (`eth0`), when read.
    pub peer: Option<String>,
    /// The peer's ifindex in its namespace.
    pub peer_index: u32,
    /// The namespace's nsid.
    pub nsid: i32,
    /// The host interface's state.
    pub state: OperState,
    /// The pod of this node whose name the interface's name is derived from,
    /// where the CNI derives it (Calico: `cali` + sha1 of `namespace.name`).
    pub named_for: Option<String>,
}

/// The host's per-pod route (`/32`, `/128`) to an address.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PodRoute {
    /// `ip route`-like text.
    pub route: String,
    /// Its output interface, by name.
    pub iface: Option<String>,
    /// Its output interface's ifindex.
    pub iface_index: Option<u32>,
    /// That interface's state, when it is a host interface with a peer.
    pub state: Option<OperState>,
    /// The nsid behind it, when it has a peer in another namespace.
    pub nsid: Option<i32>,
}

/// A pod the API places at an address, by `namespace/name`, with its phase.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PlacedPod {
    /// `namespace/name`.
    pub pod: String,
    /// The node it runs on.
    pub node: String,
    /// `status.phase`.
    pub phase: Option<String>,
}

/// One row of the node's truth table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TruthRow {
    /// The address.
    pub ip: IpAddr,
    /// The namespaces holding it.
    pub holders: Vec<Holder>,
    /// The host's per-pod route to it.
    pub route: Option<PodRoute>,
    /// The pods the API places there.
    pub pods: Vec<PlacedPod>,
}

/// The truth table as `check` shows it: the rows, and how much was read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TruthTable {
    /// Why the namespaces were not read (a kernel older than 4.20), if they were not.
    pub skipped: Option<String>,
    /// Host interfaces with a peer in another namespace.
    pub interfaces: usize,
    /// Peer namespaces read.
    pub namespaces: usize,
    /// Namespaces that could not be read, and why.
    pub unread: Vec<Unread>,
    /// One row per address.
    pub rows: Vec<TruthRow>,
}
