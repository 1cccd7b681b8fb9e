//! AllocatorOverlap: the root cause, found before any pod collides. Cilium takes
//! its router, Ingress and health IPs from a range (`CiliumNode.spec.ipam.podCIDRs`,
//! or a multi-pool `pools.allocated` CIDR) that a kube-ovn Subnet also hands to
//! pods, with nothing excluded.

use std::{collections::BTreeSet, net::IpAddr};

use ipnet::IpNet;

use super::{
    Cause, Finding, FindingKind, Owner, Owners, Remedy, Role, Scope, Trust,
    kind::{Alert, Count, Spec},
};
use crate::inventory::{CniNode, InfraAddress, Inventory, IpRange, Source, Subnet, step};

/// Latent: Cilium's infrastructure addresses (or the range it takes them
/// from) lie in a range another allocator hands to pods.
pub(super) const OVERLAP: Spec = Spec::node(
    "AllocatorOverlap",
    "latent: Cilium's infrastructure addresses (or the range it takes them from) lie in a range \
     another allocator hands to pods",
    Count::AllocatorOverlaps,
    Alert::Named("IPShadowAllocatorOverlap"),
);

/// This node's overlaps with every primary Subnet (secondary networks never
/// hand out `status.podIPs`): one finding per Cilium range and Subnet, listing
/// the infrastructure addresses kube-ovn may hand out (one fix excludes them
/// all); an address in no known range is its own finding (its fix differs);
/// when none is exposed, one per Cilium range not fully excluded.
pub(super) fn allocator_overlaps(inv: &Inventory, owners: &Owners<'_>) -> Vec<Finding> {
    let mine: Vec<&CniNode> = inv.own_cni_nodes().collect();
    let mut infra: Vec<InfraAddress> = mine
        .iter()
        .flat_map(|c| c.addresses.iter().copied())
        // Other CNIs' addresses in Node annotations are not taken from Cilium's ranges.
        .filter(|a| a.role.is_ciliums())
        .collect();
    // Router first: the address a group's finding is named by.
    infra.sort_by_key(|a| (a.role, a.ip, a.source));
    let ranges: Vec<Range> = mine.iter().flat_map(|c| c.ranges()).collect();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for subnet in inv.cluster.primary_subnets() {
        let groups = exposed(subnet, &infra, &ranges, &mut seen);
        let exposed = !groups.is_empty();
        for (range, addresses) in groups {
            let InfraAddress { ip, role, source } = addresses[0];
            let owner = owners
                .mine
                .get(&ip)
                .map_or(Owner::new(inv.node.clone(), role, None, source), |o| {
                    o.to_owner()
                });
            out.push(finding(subnet, ip, owner, range, addresses));
        }
        if exposed {
            continue;
        }
        // No address exposed yet, but Cilium may take its next one anywhere in its range.
        for &(range, field) in &ranges {
            if let Some(ip) = first_allocatable(subnet, &range)
                && seen.insert(ip)
            {
                let device = Some(inv.router_device.clone());
                let owner = Owner::new(
                    inv.node.clone(),
                    Role::Router,
                    device,
                    Source::SpecAddresses,
                );
                out.push(finding(subnet, ip, owner, Some((range, field)), Vec::new()));
            }
        }
    }
    out
}

/// Cilium's range an address was taken from, and the field it was read from.
type Range = (IpNet, &'static str);

/// The addresses of `infra` not yet `seen` that `subnet` may hand out, grouped
/// by the range holding them (one excludeIps entry each); an address in no
/// range alone.
fn exposed(
    subnet: &Subnet,
    infra: &[InfraAddress],
    ranges: &[Range],
    seen: &mut BTreeSet<IpAddr>,
) -> Vec<(Option<Range>, Vec<InfraAddress>)> {
    let mut groups: Vec<(Option<Range>, Vec<InfraAddress>)> = Vec::new();
    for &a in infra {
        if !subnet.allocates(a.ip) || !seen.insert(a.ip) {
            continue;
        }
        let range = ranges.iter().find(|(c, _)| c.contains(&a.ip)).copied();
        match groups.iter_mut().find(|(r, _)| r.is_some() && *r == range) {
            Some((_, members)) => members.push(a),
            None => groups.push((range, vec![a])),
        }
    }
    groups
}

/// An address of `range` the Subnet may hand out, checked at the range's ends and
/// at each exclusion's edges (enough to find one if any exists).
fn first_allocatable(subnet: &Subnet, range: &IpNet) -> Option<IpAddr> {
    let r = IpRange::of(range);
    let mut candidates = vec![r.first, r.last];
    for e in &subnet.exclude {
        candidates.extend(step(e.first, -1));
        candidates.extend(step(e.last, 1));
    }
    candidates.sort();
    candidates
        .into_iter()
        .find(|ip| range.contains(ip) && subnet.allocates(*ip))
}

/// `addresses`: those Cilium holds that the Subnet may hand out (`ip` the
/// first); empty when `ip` is one it may take from `range`.
fn finding(
    subnet: &Subnet,
    ip: IpAddr,
    owner: Owner,
    range: Option<Range>,
    addresses: Vec<InfraAddress>,
) -> Finding {
    let block = subnet.cidrs.iter().find(|c| c.contains(&ip)).copied();
    Finding::overlap(ip, owner, subnet.name.clone(), block, range, addresses)
}

impl Finding {
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
        let exclude = cilium_range
            .as_ref()
            .map_or(IpRange::one(ip), |(r, _)| IpRange::of(r));
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
}
