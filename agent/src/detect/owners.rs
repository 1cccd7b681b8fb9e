//! Who holds each address that can shadow a pod IP, indexed by IP.

use std::{collections::HashMap, net::IpAddr};

use super::{Owner, Role};
use crate::inventory::{InfraAddress, Inventory, Source};

/// Where Cilium's health endpoint address lives on the host side.
const HEALTH_DEVICE: &str = "lxc_health";

/// Who holds an address, borrowed from the inventory: building the index of
/// thousands of CiliumNodes allocates no strings; only findings own theirs.
#[derive(Clone, Copy)]
pub(super) struct OwnerRef<'a> {
    node: &'a str,
    pub(super) role: Role,
    device: Option<&'a str>,
    source: Source,
}

impl OwnerRef<'_> {
    pub(super) fn to_owner(self) -> Owner {
        Owner {
            node: self.node.to_owned(),
            role: self.role,
            device: self.device.map(str::to_owned),
            source: self.source,
        }
    }

    /// Named by Cilium (a CiliumNode or Node annotation), not only seen in the kernel.
    fn named_by_cilium(self) -> bool {
        self.source != Source::Kernel
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
                source: Source::Kernel,
            });
        }
        let mut others = HashMap::with_capacity(inv.cilium_nodes.len() * 3);
        // Every Cilium address of every node, from every source, in an order that
        // does not depend on the lists': (node, role, source, ip).
        let mut infra: Vec<(&'a str, &'a InfraAddress)> = inv
            .cilium_nodes
            .iter()
            .chain(inv.annotated_nodes.iter())
            .flat_map(|cn| cn.addresses.iter().map(move |a| (cn.name.as_str(), a)))
            .collect();
        infra.sort_by_key(|(node, a)| (*node, a.role, a.source, a.ip));
        for (node, a) in infra {
            let default_device = match a.role {
                Role::Router => Some(inv.router_device.as_str()),
                Role::Health => Some(HEALTH_DEVICE),
                Role::Ingress | Role::Local | Role::Pod | Role::Endpoint | Role::Node => None,
            };
            if node == inv.node {
                // Cilium names the role; the kernel, if it holds the address, names
                // the device. An IP in two roles keeps the first in Role order, and
                // of one role the best source.
                let existing = mine.get(&a.ip).copied();
                if existing.is_some_and(|o: OwnerRef<'_>| o.named_by_cilium()) {
                    continue;
                }
                let device = existing.and_then(|o| o.device).or(default_device);
                mine.insert(
                    a.ip,
                    OwnerRef {
                        node,
                        role: a.role,
                        device,
                        source: a.source,
                    },
                );
            } else {
                // Two nodes claiming one IP: the lowest (name, role, source) wins,
                // which the sort made the first.
                others.entry(a.ip).or_insert(OwnerRef {
                    node,
                    role: a.role,
                    device: default_device,
                    source: a.source,
                });
            }
        }
        Self { mine, others }
    }
}
