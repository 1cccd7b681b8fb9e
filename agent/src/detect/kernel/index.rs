//! What the kernel-truth checks look up per address, built once per detection:
//! every lookup is a hash-map probe, so a node of 1,000 pods in a cluster of
//! 100,000 costs one pass over each input, not a pass per address.

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
};

use crate::cni::calico;
use crate::detect::{own, status_ips};
use crate::inventory::{HostIface, Inventory, Pod, PodNamespaces, Route, RouteKind, TABLE_MAIN};

/// The inventory, indexed by what the checks ask.
pub(super) struct Index<'a> {
    pub(super) inv: &'a Inventory,
    /// Host interfaces with a peer elsewhere, by ifindex.
    ifaces: HashMap<u32, &'a HostIface>,
    /// The host's per-pod routes, by destination address.
    routes: HashMap<IpAddr, &'a Route>,
    /// The destinations of the per-pod routes out each interface, by ifindex.
    via: HashMap<u32, Vec<IpAddr>>,
    /// Pods that may be reported, by status address (every node's): sorted
    /// by address, in the inventory's order within one (a list searched by
    /// halving, not a map of lists: no allocation per address).
    pods: Vec<(IpAddr, &'a Pod)>,
    /// The interfaces whose namespace holds an address (one per namespace),
    /// sorted by address, in the host's order within one.
    holders: Vec<(IpAddr, &'a HostIface)>,
    /// This node's pods by the host veth name Calico gives them, when any
    /// interface has such a name.
    calico: HashMap<String, &'a Pod>,
    /// Whether per-pod routes exist, IPv4 and IPv6.
    families: (bool, bool),
    /// Every address a pod of this node has in its status, whatever its
    /// phase: a terminating or finished pod's sandbox is not a leak.
    any_own: HashSet<IpAddr>,
    /// Whether a pod of this node waits for kubelet to post its address: its
    /// sandbox may hold an address no status names yet.
    starting: bool,
}

impl<'a> Index<'a> {
    pub(super) fn new(inv: &'a Inventory) -> Self {
        let ns = &inv.host.namespaces;
        let ifaces: HashMap<u32, &HostIface> = ns.ifaces.iter().map(|i| (i.index, i)).collect();
        let routes: HashMap<IpAddr, &Route> = inv
            .host
            .routes
            .iter()
            .filter(|r| {
                r.table == TABLE_MAIN
                    && r.kind == RouteKind::Unicast
                    && r.dst.prefix_len() == r.dst.max_prefix_len()
                    && r.oif.is_some_and(|i| ifaces.contains_key(&i))
            })
            .map(|r| (r.dst.addr(), r))
            .collect();
        let via = by_interface(&routes);
        let mut pods: Vec<(IpAddr, &Pod)> = inv
            .cluster
            .pods
            .iter()
            .filter(|p| p.reportable())
            .flat_map(|p| status_ips(p).map(move |ip| (ip, p)))
            .collect();
        // Stable: the inventory's order within one address.
        pods.sort_by_key(|(ip, _)| *ip);
        let holders = holders_of(ns);
        let calico = if ns
            .ifaces
            .iter()
            .any(|i| calico::POD_VETH.matches(&i.name, ""))
        {
            own(inv)
                .map(|p| (calico::pod_veth(&p.namespace, &p.name), p))
                .collect()
        } else {
            HashMap::new()
        };
        let families = (
            routes.keys().any(IpAddr::is_ipv4),
            routes.keys().any(IpAddr::is_ipv6),
        );
        let (any_own, starting) = own_addresses(inv);
        Self {
            inv,
            ifaces,
            routes,
            via,
            pods,
            holders,
            calico,
            families,
            any_own,
            starting,
        }
    }

    /// The host interface with `index`, if it has a peer elsewhere.
    pub(super) fn iface(&self, index: u32) -> Option<&'a HostIface> {
        self.ifaces.get(&index).copied()
    }

    /// The per-pod route to `ip`.
    pub(super) fn route(&self, ip: IpAddr) -> Option<&'a Route> {
        self.routes.get(&ip).copied()
    }

    /// Every per-pod route's destination.
    pub(super) fn routed(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.routes.keys().copied()
    }

    /// The reportable pods at `ip`, any node's.
    pub(super) fn pods_at(&self, ip: IpAddr) -> impl Iterator<Item = &'a Pod> + '_ {
        at(&self.pods, ip).iter().map(|(_, p)| *p)
    }

    /// This node's reportable pods at `ip`.
    pub(super) fn own_at(&self, ip: IpAddr) -> impl Iterator<Item = &'a Pod> + '_ {
        let node = self.inv.node.as_str();
        self.pods_at(ip)
            .filter(move |p| p.node.as_deref() == Some(node))
    }

    /// Whether a pod of this node may hold `ip`: one has it in its status,
    /// reportable or not (being deleted, finished), or one is still starting.
    pub(super) fn any_own_pod_at(&self, ip: IpAddr) -> bool {
        self.any_own.contains(&ip) || self.starting
    }

    /// The interfaces whose namespace holds `ip`.
    pub(super) fn holders(&self, ip: IpAddr) -> impl Iterator<Item = &'a HostIface> + '_ {
        at(&self.holders, ip).iter().map(|(_, i)| *i)
    }

    /// The pod of this node the interface `name` is named for (Calico), as `namespace/name`.
    pub(super) fn named_for(&self, name: &str) -> Option<&'a Pod> {
        self.calico.get(name).copied()
    }

    /// The pod of this node other than `not` that `iface` is, by what only the
    /// host and the cluster write: the CNI named the interface for it, or the
    /// host routes its status address out of it. What the namespace behind
    /// holds is not asked: a pod with NET_ADMIN writes that.
    pub(super) fn host_owner(&self, iface: &HostIface, not: &Pod) -> Option<&'a Pod> {
        let other = |p: &&Pod| p.uid != not.uid;
        self.named_for(&iface.name).filter(other).or_else(|| {
            self.via
                .get(&iface.index)?
                .iter()
                .flat_map(|ip| self.own_at(*ip))
                .find(other)
        })
    }

    /// Whether this node lays per-pod routes for `ip`'s family.
    pub(super) fn lays_pod_routes(&self, ip: IpAddr) -> bool {
        if ip.is_ipv4() {
            self.families.0
        } else {
            self.families.1
        }
    }
}

/// The entries of `sorted` (sorted by address) at `ip`.
fn at<T>(sorted: &[(IpAddr, T)], ip: IpAddr) -> &[(IpAddr, T)] {
    let start = sorted.partition_point(|(a, _)| *a < ip);
    let len = sorted[start..].partition_point(|(a, _)| *a == ip);
    &sorted[start..start + len]
}

/// The host interfaces whose namespace holds each address, by address: one
/// per namespace (its first in the host's order), in the host's order.
fn holders_of(ns: &PodNamespaces) -> Vec<(IpAddr, &HostIface)> {
    let mut all: Vec<(IpAddr, &HostIface)> = ns
        .ifaces
        .iter()
        .flat_map(|i| {
            let held = ns.namespaces.get(&i.nsid).map_or(&[][..], |n| &n.addresses);
            held.iter().map(move |a| (a.ip, i))
        })
        .collect();
    // Stable: the host's order within one address.
    all.sort_by_key(|(ip, _)| *ip);
    let mut kept: Vec<(IpAddr, &HostIface)> = Vec::with_capacity(all.len());
    for (ip, i) in all {
        if !at(&kept, ip).iter().any(|(_, k)| k.nsid == i.nsid) {
            kept.push((ip, i));
        }
    }
    kept
}

/// The per-pod routes' destinations by the interface they leave through, in order.
fn by_interface(routes: &HashMap<IpAddr, &Route>) -> HashMap<u32, Vec<IpAddr>> {
    let mut via: HashMap<u32, Vec<IpAddr>> = HashMap::new();
    for (ip, r) in routes {
        if let Some(oif) = r.oif {
            via.entry(oif).or_default().push(*ip);
        }
    }
    for v in via.values_mut() {
        v.sort_unstable();
    }
    via
}

/// Every status address of this node's pods, whatever their phase, and
/// whether one of them waits for its address.
fn own_addresses(inv: &Inventory) -> (HashSet<IpAddr>, bool) {
    let mine = || {
        inv.cluster
            .pods
            .iter()
            .filter(|p| p.node.as_deref() == Some(inv.node.as_str()))
    };
    let any_own = mine().flat_map(status_ips).collect();
    (any_own, mine().any(Pod::waiting_for_address))
}
