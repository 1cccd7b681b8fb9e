//! AllocatorOverlap: the root cause, found before any pod collides. Cilium takes
//! its router, Ingress and health IPs from a range (`CiliumNode.spec.ipam.podCIDRs`,
//! or a multi-pool `pools.allocated` CIDR) that a kube-ovn Subnet also hands to
//! pods, with nothing excluded.

use std::{collections::BTreeSet, net::IpAddr};

use ipnet::IpNet;

use super::{Finding, Owner, Owners, Role};
use crate::inventory::{CiliumNode, Inventory, IpRange, Source, Subnet};

/// This node's overlaps with every primary Subnet (secondary networks never
/// hand out `status.podIPs`): one finding per infrastructure address kube-ovn
/// may hand out, or, when none is exposed, per Cilium range not fully excluded.
pub(super) fn allocator_overlaps(inv: &Inventory, owners: &Owners<'_>) -> Vec<Finding> {
    let mine: Vec<&CiliumNode> = inv
        .cilium_nodes
        .iter()
        .chain(inv.annotated_nodes.iter())
        .filter(|c| c.name == inv.node)
        .collect();
    let mut infra: Vec<(Role, IpAddr, Source)> = mine
        .iter()
        .flat_map(|c| c.addresses.iter().map(|a| (a.role, a.ip, a.source)))
        .collect();
    infra.sort();
    let ranges: Vec<(IpNet, &'static str)> = mine.iter().flat_map(|c| c.ranges()).collect();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for subnet in inv.subnets.iter().filter(|s| s.primary) {
        let mut exposed = false;
        for &(role, ip, source) in &infra {
            if !subnet.allocates(ip) || !seen.insert(ip) {
                continue;
            }
            exposed = true;
            let owner = owners.mine.get(&ip).map_or(
                Owner {
                    node: inv.node.clone(),
                    role,
                    device: None,
                    source,
                },
                |o| o.to_owner(),
            );
            let range = ranges.iter().find(|(c, _)| c.contains(&ip)).copied();
            out.push(finding(subnet, ip, owner, range, true));
        }
        if exposed {
            continue;
        }
        // No address exposed yet, but Cilium may take its next one anywhere in its range.
        for &(range, field) in &ranges {
            if let Some(ip) = first_allocatable(subnet, &range)
                && seen.insert(ip)
            {
                let owner = Owner {
                    node: inv.node.clone(),
                    role: Role::Router,
                    device: Some(inv.router_device.clone()),
                    source: Source::SpecAddresses,
                };
                out.push(finding(subnet, ip, owner, Some((range, field)), false));
            }
        }
    }
    out
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

fn step(ip: IpAddr, by: i8) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(v4) => {
            let n = u32::from(v4);
            let n = if by < 0 {
                n.checked_sub(1)?
            } else {
                n.checked_add(1)?
            };
            Some(IpAddr::V4(n.into()))
        }
        IpAddr::V6(v6) => {
            let n = u128::from(v6);
            let n = if by < 0 {
                n.checked_sub(1)?
            } else {
                n.checked_add(1)?
            };
            Some(IpAddr::V6(n.into()))
        }
    }
}

/// `held`: `ip` is an address Cilium holds; otherwise one it may take from `range`.
fn finding(
    subnet: &Subnet,
    ip: IpAddr,
    owner: Owner,
    range: Option<(IpNet, &'static str)>,
    held: bool,
) -> Finding {
    let block = subnet.cidrs.iter().find(|c| c.contains(&ip)).copied();
    Finding::overlap(ip, owner, subnet.name.clone(), block, range, held)
}
