//! AllocatorOverlap: the root cause, found before any pod collides. Cilium takes
//! its router, Ingress and health IPs from a range (`CiliumNode.spec.ipam.podCIDRs`)
//! that a kube-ovn Subnet also hands to pods, with nothing excluded.

use std::{collections::BTreeSet, net::IpAddr};

use ipnet::IpNet;

use super::{Finding, Owner, Owners, Role};
use crate::inventory::{CiliumNode, Inventory, IpRange, Subnet};

/// This node's overlaps: one finding per infrastructure address kube-ovn may
/// hand out, or, when none is exposed, per Cilium range not fully excluded.
pub(super) fn allocator_overlaps(inv: &Inventory, owners: &Owners<'_>) -> Vec<Finding> {
    let Some(cn) = inv.cilium_nodes.iter().find(|c| c.name == inv.node) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for subnet in inv.subnets.iter() {
        let mut exposed = false;
        for (role, ip) in infra(cn) {
            if !subnet.allocates(ip) || !seen.insert(ip) {
                continue;
            }
            exposed = true;
            let owner = owners.mine.get(&ip).map(|o| o.to_owner()).unwrap_or(Owner {
                node: inv.node.clone(),
                role,
                device: None,
            });
            let range = cn.pod_cidrs.iter().find(|c| c.contains(&ip)).copied();
            out.push(finding(subnet, ip, owner, range, true));
        }
        if exposed {
            continue;
        }
        // No address exposed yet, but Cilium may take its next one anywhere in its range.
        for range in &cn.pod_cidrs {
            if let Some(ip) = first_allocatable(subnet, range)
                && seen.insert(ip)
            {
                let owner = Owner {
                    node: inv.node.clone(),
                    role: Role::Router,
                    device: Some(inv.router_device.clone()),
                };
                out.push(finding(subnet, ip, owner, Some(*range), false));
            }
        }
    }
    out
}

fn infra(cn: &CiliumNode) -> impl Iterator<Item = (Role, IpAddr)> + '_ {
    let tag =
        |role: Role, ips: &'_ [IpAddr]| ips.iter().map(move |ip| (role, *ip)).collect::<Vec<_>>();
    tag(Role::Router, &cn.router)
        .into_iter()
        .chain(tag(Role::Ingress, &cn.ingress))
        .chain(tag(Role::Health, &cn.health))
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
fn finding(subnet: &Subnet, ip: IpAddr, owner: Owner, range: Option<IpNet>, held: bool) -> Finding {
    let block = subnet.cidrs.iter().find(|c| c.contains(&ip)).copied();
    Finding::overlap(ip, owner, subnet.name.clone(), block, range, held)
}
