//! DuplicateSecondaryIP from the node's kernel: two pod namespaces of this
//! node hold one address on links other than their pods' primary ones, and
//! the two links are on one network. One network is what is certain: both
//! pods' Multus `network-status` name the interface and the same network
//! (different networks reuse addresses by design: VRFs, VLANs); else, where
//! either pod has no such entry, both links are macvlan, ipvlan or VLAN links
//! stacked on one link of the host. Anything else is not a finding.
//!
//! Built only where a namespace holds addresses on two links: a node without
//! secondary networks pays one pass over its namespaces, allocating nothing.

use std::{collections::HashSet, net::IpAddr};

use super::{Index, status_ips};
use crate::{
    detect::{Finding, secondary},
    inventory::{Inventory, NsLink, PeerNamespace, Pod, Source},
};

/// An address a pod's namespace holds on a secondary link.
struct Held<'a> {
    ip: IpAddr,
    pod: &'a Pod,
    link: &'a NsLink,
    /// The host's nsid, as the namespace's primary link (its veth's peer)
    /// names it, where it does.
    host: Option<i32>,
}

/// Every (newer pod, address) a secondary link of another pod's namespace
/// on one network holds too, naming the older pod; none for a (pod uid, IP)
/// in `seen`.
pub(super) fn duplicates(idx: &Index<'_>, seen: &HashSet<(&str, IpAddr)>) -> Vec<Finding> {
    let namespaces = &idx.inv.host.namespaces.namespaces;
    if !namespaces.values().any(|n| spans_links(n)) {
        return Vec::new();
    }
    let mut held: Vec<Held<'_>> = namespaces
        .iter()
        .filter(|(_, n)| spans_links(n))
        .flat_map(|(nsid, n)| secondary_of(idx, *nsid, n))
        .collect();
    held.sort_by(|a, b| key(a).cmp(&key(b)));
    held.dedup_by(|a, b| key(a) == key(b));
    let mut out = Vec::new();
    for group in held.chunk_by(|a, b| a.ip == b.ip) {
        let Some((oldest, newer)) = group.split_first() else {
            continue;
        };
        for h in newer
            .iter()
            .filter(|h| !seen.contains(&(h.pod.uid.as_str(), h.ip)))
        {
            if let Some(network) = one_network(idx.inv, oldest, h) {
                let holder = (oldest.pod, Some(oldest.link.name.as_str()));
                let pod = (h.pod, Some(h.link.name.as_str()));
                let on = (network.as_str(), Source::Kernel);
                out.push(secondary::finding(on, h.ip, holder, pod));
            }
        }
    }
    out
}

/// Holders in address order, the oldest pod first; one pod's entries adjacent.
fn key<'h>(h: &'h Held<'_>) -> (IpAddr, Option<i64>, &'h str, &'h str, &'h str) {
    let p = h.pod;
    (h.ip, p.created, &p.namespace, &p.name, &p.uid)
}

/// Whether the namespace holds addresses on more than one link.
fn spans_links(n: &PeerNamespace) -> bool {
    n.addresses
        .split_first()
        .is_some_and(|(first, rest)| rest.iter().any(|a| a.index != first.index))
}

/// The addresses of namespace `nsid` on links other than those holding its
/// pod's status addresses; none where it maps to no one pod.
fn secondary_of<'a>(idx: &Index<'a>, nsid: i32, n: &'a PeerNamespace) -> Vec<Held<'a>> {
    let Some(pod) = pod_of(idx, nsid, n) else {
        return Vec::new();
    };
    let primary: Vec<u32> = n
        .addresses
        .iter()
        .filter(|a| status_ips(pod).any(|ip| ip == a.ip))
        .map(|a| a.index)
        .collect();
    let host = n
        .links
        .iter()
        .filter(|l| primary.contains(&l.index))
        .find_map(|l| l.lower.filter(|l| !l.stacked))
        .map(|l| l.nsid);
    n.addresses
        .iter()
        .filter(|a| !primary.contains(&a.index))
        .filter_map(|a| {
            Some(Held {
                ip: a.ip,
                pod,
                link: n.link(a.index)?,
                host,
            })
        })
        .collect()
}

/// The one reportable pod of this node whose status address the namespace
/// holds (where the host routes that address, into this namespace); `None`
/// where none or several are: a pod that copies another's address into its
/// own namespace maps it to neither.
fn pod_of<'a>(idx: &Index<'a>, nsid: i32, n: &PeerNamespace) -> Option<&'a Pod> {
    let routed_here = |ip: IpAddr| {
        idx.route(ip).is_none_or(|r| {
            r.oif
                .and_then(|o| idx.iface(o))
                .is_some_and(|i| i.nsid == nsid)
        })
    };
    let mut pods = n
        .addresses
        .iter()
        .filter(|a| routed_here(a.ip))
        .flat_map(|a| idx.own_at(a.ip));
    let one = pods.next()?;
    let same = |p: &Pod| (&p.uid, &p.namespace, &p.name) == (&one.uid, &one.namespace, &one.name);
    pods.all(same).then_some(one)
}

/// The network two secondary links share, as the finding names it, if they
/// surely share one.
fn one_network(inv: &Inventory, a: &Held<'_>, b: &Held<'_>) -> Option<String> {
    if let (Some(x), Some(y)) = (network_of(a), network_of(b)) {
        return (x == y).then(|| x.to_owned());
    }
    let (pa, pb) = (a.link.lower?, b.link.lower?);
    let on_host = a.host == Some(pa.nsid) && b.host == Some(pb.nsid);
    let parent = inv.host.link_name(pa.index)?;
    (pa.stacked && pa == pb && on_host)
        .then(|| format!("macvlan/ipvlan/VLAN links on the host's {parent}"))
}

/// The network Multus' network-status names for the held link's interface.
fn network_of<'a>(h: &Held<'a>) -> Option<&'a str> {
    h.pod
        .secondary
        .iter()
        .find(|s| s.interface.as_deref() == Some(h.link.name.as_str()))
        .map(|s| s.network.as_str())
}
