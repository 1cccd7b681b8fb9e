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

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
};

use super::Index;
use crate::detect::status_ips;
use crate::{
    detect::{Finding, secondary},
    inventory::{Inventory, Lower, NsLink, PeerNamespace, Pod, Source},
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
    for group in held.chunk_by(|a, b| a.ip == b.ip).filter(|g| g.len() > 1) {
        group_duplicates(idx.inv, group, seen, &mut out);
    }
    out
}

/// The oldest holders of one address so far, by what ties a newer one to
/// them: a network Multus names, or a host link their links are stacked on
/// (those without a network named apart, and all).
#[derive(Default)]
struct Oldest<'h, 'a> {
    named: HashMap<&'a str, &'h Held<'a>>,
    unnamed_on: HashMap<Lower, &'h Held<'a>>,
    any_on: HashMap<Lower, &'h Held<'a>>,
}

/// The findings of one address's holders (oldest first): each newer pod
/// names the oldest one surely on its network, one map probe per holder.
fn group_duplicates(
    inv: &Inventory,
    group: &[Held<'_>],
    seen: &HashSet<(&str, IpAddr)>,
    out: &mut Vec<Finding>,
) {
    let mut oldest = Oldest::default();
    for h in group {
        let (name, parent) = (network_of(h), host_parent(h));
        let by_name = name.and_then(|n| oldest.named.get(n)).map(|o| (*o, None));
        // Rule (a) wins where both name the interface: a named holder meets
        // by its parent only those without a name.
        let on = if name.is_some() {
            &oldest.unnamed_on
        } else {
            &oldest.any_on
        };
        let by_parent = parent.and_then(|p| Some((*on.get(&p)?, Some(p))));
        let older = [by_name, by_parent]
            .into_iter()
            .flatten()
            .min_by(|(a, _), (b, _)| key(a).cmp(&key(b)));
        if let Some((o, via)) = older
            && !seen.contains(&(h.pod.uid.as_str(), h.ip))
        {
            let network = match (via, name) {
                (Some(p), _) => stacked_on(inv, p),
                (None, n) => n.unwrap_or_default().to_owned(),
            };
            let holder = (o.pod, Some(o.link.name.as_str()));
            let pod = (h.pod, Some(h.link.name.as_str()));
            out.push(secondary::finding(
                (Some(network.as_str()), Source::Kernel),
                h.ip,
                holder,
                pod,
            ));
        }
        if let Some(n) = name {
            oldest.named.entry(n).or_insert(h);
        } else if let Some(p) = parent {
            oldest.unnamed_on.entry(p).or_insert(h);
        }
        if let Some(p) = parent {
            oldest.any_on.entry(p).or_insert(h);
        }
    }
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

/// The host link `h`'s link is stacked on (macvlan, ipvlan, VLAN): its lower
/// link in the namespace the pod's veth peer names as the host.
fn host_parent(h: &Held<'_>) -> Option<Lower> {
    h.link.lower.filter(|l| l.stacked && h.host == Some(l.nsid))
}

/// How a finding names the network of links stacked on host link `p`.
fn stacked_on(inv: &Inventory, p: Lower) -> String {
    let parent = inv
        .host
        .link_name(p.index)
        .map_or_else(|| format!("ifindex {}", p.index), str::to_owned);
    format!("macvlan/ipvlan/VLAN links on the host's {parent}")
}

/// The network Multus' network-status names for the held link's interface.
fn network_of<'a>(h: &Held<'a>) -> Option<&'a str> {
    h.pod
        .secondary
        .iter()
        .find(|s| s.interface.as_deref() == Some(h.link.name.as_str()))
        .map(|s| s.network.as_str())
}
