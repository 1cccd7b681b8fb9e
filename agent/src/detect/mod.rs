//! Detection: a pure function from one [`Inventory`] to the findings it shows.
//!
//! Rules (DESIGN.md):
//! - this node's pods are checked against every address this node holds (its
//!   kernel's FIB answer first, then its addresses and CiliumNode) and against
//!   the Cilium infrastructure addresses of every other node;
//! - pods on other nodes are checked only against this node's addresses;
//! - one finding per (pod, IP), never two kinds for the same collision; a
//!   shadowing address wins over a blackhole route;
//! - pods that cannot receive traffic (hostNetwork, Succeeded, Failed) are skipped.

mod finding;
mod message;
mod overlap;

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
};

pub use finding::{Finding, FindingKind, Owner, PodRef, Role, Scope};

use crate::inventory::{FibResult, Inventory, Pod, PodIp, RouteKind, TABLE_LOCAL, TABLE_MAIN};

/// Where Cilium's health endpoint address lives on the host side.
const HEALTH_DEVICE: &str = "lxc_health";

pub fn detect(inv: &Inventory) -> Vec<Finding> {
    let owners = Owners::new(inv);
    let mut seen = HashSet::new();
    let mut findings = Vec::new();
    for pod in inv.pods.iter().filter(|p| p.can_receive_traffic()) {
        let Some(pod_node) = pod.node.as_deref() else {
            continue;
        };
        for pip in &pod.ips {
            if !seen.insert((
                pod.uid.as_str(),
                pod.namespace.as_str(),
                pod.name.as_str(),
                pip.ip,
            )) {
                continue;
            }
            let finding = if pod_node == inv.node {
                check_own_pod(inv, &owners, pod, pip)
            } else {
                check_foreign_pod(&owners, pod, pod_node, pip)
            };
            findings.extend(finding);
        }
    }
    findings.extend(overlap::allocator_overlaps(inv, &owners));
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    findings
}

/// Who holds an address, borrowed from the inventory: building the index of
/// thousands of CiliumNodes allocates no strings; only findings own theirs.
#[derive(Clone, Copy)]
pub(crate) struct OwnerRef<'a> {
    node: &'a str,
    role: Role,
    device: Option<&'a str>,
    /// Named by a CiliumNode (rather than only seen on a kernel device).
    from_cilium: bool,
}

impl OwnerRef<'_> {
    pub(crate) fn to_owner(self) -> Owner {
        Owner {
            node: self.node.to_owned(),
            role: self.role,
            device: self.device.map(str::to_owned),
        }
    }
}

/// Every address that shadows a pod IP, by IP: this node's first, then other nodes' Cilium addresses.
pub(crate) struct Owners<'a> {
    mine: HashMap<IpAddr, OwnerRef<'a>>,
    others: HashMap<IpAddr, OwnerRef<'a>>,
}

impl<'a> Owners<'a> {
    fn new(inv: &'a Inventory) -> Self {
        let mut mine = HashMap::with_capacity(inv.host.addresses.len());
        for a in &inv.host.addresses {
            let role = if a.device == inv.router_device {
                Role::Router
            } else {
                Role::Local
            };
            mine.entry(a.ip).or_insert(OwnerRef {
                node: inv.node.as_str(),
                role,
                device: Some(a.device.as_str()),
                from_cilium: false,
            });
        }
        let mut others = HashMap::with_capacity(inv.cilium_nodes.len() * 3);
        let mut nodes: Vec<_> = inv.cilium_nodes.iter().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        for cn in nodes {
            let infra = [
                (Role::Router, &cn.router, Some(inv.router_device.as_str())),
                (Role::Ingress, &cn.ingress, None),
                (Role::Health, &cn.health, Some(HEALTH_DEVICE)),
            ];
            for (role, ips, default_device) in infra {
                for ip in ips {
                    if cn.name == inv.node {
                        // The CiliumNode names the role; the kernel, if it holds the
                        // address, names the device. An IP listed in two roles keeps
                        // the first in Role order, whatever order the objects came in.
                        let existing = mine.get(ip).copied();
                        if existing.is_some_and(|o: OwnerRef<'_>| o.from_cilium && o.role <= role) {
                            continue;
                        }
                        let device = existing.and_then(|o| o.device).or(default_device);
                        mine.insert(
                            *ip,
                            OwnerRef {
                                node: cn.name.as_str(),
                                role,
                                device,
                                from_cilium: true,
                            },
                        );
                    } else {
                        let candidate = OwnerRef {
                            node: cn.name.as_str(),
                            role,
                            device: default_device,
                            from_cilium: true,
                        };
                        // Two nodes claiming one IP: the lowest (name, role) wins, so the
                        // answer does not depend on list order.
                        others
                            .entry(*ip)
                            .and_modify(|o: &mut OwnerRef<'a>| {
                                if (candidate.node, candidate.role) < (o.node, o.role) {
                                    *o = candidate;
                                }
                            })
                            .or_insert(candidate);
                    }
                }
            }
        }
        Self { mine, others }
    }
}

fn pod_ref(pod: &Pod) -> PodRef {
    PodRef {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
    }
}

fn check_own_pod(inv: &Inventory, owners: &Owners<'_>, pod: &Pod, pip: &PodIp) -> Option<Finding> {
    let fib = inv.host.fib.get(&pip.ip);
    let fib_text = fib.map(|f| message::describe_fib(&inv.host, f));
    let base = |kind, scope, owner: Owner| Finding {
        kind,
        scope,
        ip: pip.ip,
        pod: Some(pod_ref(pod)),
        owner,
        message: String::new(),
        pod_node: Some(inv.node.clone()),
        ip_source: Some(pip.source.clone()),
        fib: fib_text.clone(),
        shadowed_route: None,
        subnet: None,
        cilium_range: None,
        evidence: None,
    };

    // 1. The kernel delivers the IP locally: whatever holds it, host traffic never reaches the pod.
    if let Some(FibResult::Local { oif }) = fib {
        let owner = owners
            .mine
            .get(&pip.ip)
            .map(|o| o.to_owner())
            .unwrap_or_else(|| {
                // A `local` route covering the IP, with no address: name the device of
                // that route (the lookup itself answers `dev lo`).
                let route_oif = inv
                    .host
                    .best_route(pip.ip, TABLE_LOCAL)
                    .filter(|r| r.kind == RouteKind::Local)
                    .and_then(|r| r.oif);
                let device = route_oif
                    .or(*oif)
                    .and_then(|i| inv.host.link_name(i))
                    .map(str::to_owned);
                let role = if device.as_deref() == Some(inv.router_device.as_str()) {
                    Role::Router
                } else {
                    Role::Local
                };
                Owner {
                    node: inv.node.clone(),
                    role,
                    device,
                }
            });
        let mut f = base(FindingKind::for_role(owner.role), Scope::SameNode, owner);
        f.shadowed_route = shadowed_pod_route(inv, pip.ip);
        f.message = message::collision(&f);
        return Some(f);
    }

    // 2. An address this node or another node holds without the kernel showing it
    //    as local (Cilium's Ingress IP lives only in its endpoint manager).
    let owned = owners
        .mine
        .get(&pip.ip)
        .map(|o| (o, Scope::SameNode))
        .or_else(|| owners.others.get(&pip.ip).map(|o| (o, Scope::CrossNode)));
    if let Some((owner, scope)) = owned {
        let mut f = base(FindingKind::for_role(owner.role), scope, owner.to_owner());
        f.message = message::collision(&f);
        return Some(f);
    }

    // 3. No one else holds it, but the host's route to it goes nowhere.
    let dead_end = fib.and_then(FibResult::blackhole_kind)?;
    let owner = Owner {
        node: inv.node.clone(),
        role: Role::Local,
        device: None,
    };
    let mut f = base(FindingKind::HostRouteBlackhole, Scope::SameNode, owner);
    f.message = message::blackhole(&f, dead_end, &inv.host);
    Some(f)
}

fn check_foreign_pod(
    owners: &Owners<'_>,
    pod: &Pod,
    pod_node: &str,
    pip: &PodIp,
) -> Option<Finding> {
    let owner = owners.mine.get(&pip.ip)?;
    let mut f = Finding {
        kind: FindingKind::for_role(owner.role),
        scope: Scope::CrossNode,
        ip: pip.ip,
        pod: Some(pod_ref(pod)),
        owner: owner.to_owner(),
        message: String::new(),
        pod_node: Some(pod_node.to_owned()),
        ip_source: Some(pip.source.clone()),
        fib: None,
        shadowed_route: None,
        subnet: None,
        cilium_range: None,
        evidence: None,
    };
    f.message = message::collision(&f);
    Some(f)
}

/// A host route in the main table that points at the pod (a /32 or /128 as
/// Cilium and Calico lay them) but loses to the local table.
fn shadowed_pod_route(inv: &Inventory, ip: IpAddr) -> Option<String> {
    let r = inv
        .host
        .best_route(ip, TABLE_MAIN)
        .filter(|r| r.dst.prefix_len() == r.dst.max_prefix_len())?;
    Some(message::describe_route(&inv.host, r))
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
