//! Who holds each address that can shadow a pod IP, indexed by IP.

use std::{collections::HashMap, net::IpAddr};

use super::{Owner, Role};
use crate::inventory::Inventory;

/// Where Cilium's health endpoint address lives on the host side.
const HEALTH_DEVICE: &str = "lxc_health";

/// Who holds an address, borrowed from the inventory: building the index of
/// thousands of CiliumNodes allocates no strings; only findings own theirs.
#[derive(Clone, Copy)]
pub(super) struct OwnerRef<'a> {
    node: &'a str,
    pub(super) role: Role,
    device: Option<&'a str>,
    /// Named by a CiliumNode (rather than only seen on a kernel device).
    from_cilium: bool,
}

impl OwnerRef<'_> {
    pub(super) fn to_owner(self) -> Owner {
        Owner {
            node: self.node.to_owned(),
            role: self.role,
            device: self.device.map(str::to_owned),
        }
    }
}

/// Every address that shadows a pod IP, by IP: this node's first, then other nodes' Cilium addresses.
pub(super) struct Owners<'a> {
    pub(super) mine: HashMap<IpAddr, OwnerRef<'a>>,
    pub(super) others: HashMap<IpAddr, OwnerRef<'a>>,
}

impl<'a> Owners<'a> {
    pub(super) fn new(inv: &'a Inventory) -> Self {
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
