//! Who holds each address that can shadow a pod IP, indexed by IP.

use std::{collections::HashMap, net::IpAddr};

use super::{Owner, Role};
use crate::inventory::{CniNode, InfraAddress, Inventory, Source};

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
        Owner::new(
            self.node.to_owned(),
            self.role,
            self.device.map(str::to_owned),
            self.source,
        )
    }

    /// Named by the cluster (a CiliumNode or a Node annotation), not only seen in the kernel.
    fn named_by_cluster(self) -> bool {
        self.source != Source::Kernel
    }
}

/// Every Cilium address of every node, by IP and by node: built once per
/// reconcile, or once for a whole cluster's audit and shared by every node's.
/// Two sorted lists searched by halving, not maps of lists: a cluster of
/// 5,000 CiliumNodes costs two allocations per reconcile, not 15,000.
pub struct Index<'a> {
    /// In (ip, node, role, source) order: of two nodes claiming one IP the first wins.
    by_ip: Vec<(&'a str, &'a InfraAddress)>,
    /// In (node, role, source, ip) order.
    by_node: Vec<(&'a str, &'a InfraAddress)>,
    router_device: &'a str,
}

impl<'a> Index<'a> {
    /// Indexes `cilium_nodes`, `annotated_nodes` (addresses from Node
    /// annotations) and `calico_tunnels` (tunnel addresses Calico's IPAMBlocks allocate).
    pub fn new(
        (cilium_nodes, annotated_nodes, calico_tunnels): (
            &'a [CniNode],
            &'a [CniNode],
            &'a [CniNode],
        ),
        router_device: &'a str,
    ) -> Self {
        // Every Cilium address of every node, from every source, in an order that
        // does not depend on the lists': (node, role, source, ip). The key is
        // the whole entry, so an unstable sort (no buffer) orders it alike.
        let moved = join_moved(annotated_nodes);
        let mut by_node: Vec<(&'a str, &'a InfraAddress)> = cilium_nodes
            .iter()
            .chain(annotated_nodes.iter())
            .chain(calico_tunnels.iter())
            .flat_map(|cn| cn.addresses.iter().map(move |a| (cn.name.as_str(), a)))
            .filter(|(_, a)| !(moved && a.source == Source::OvnNodeId))
            .collect();
        by_node.sort_unstable_by_key(|(node, a)| (*node, a.role, a.source, a.ip));
        let mut by_ip = by_node.clone();
        by_ip.sort_unstable_by_key(|(node, a)| (a.ip, *node, a.role, a.source));
        Self {
            by_ip,
            by_node,
            router_device,
        }
    }

    /// The addresses of `node`, in (role, source, ip) order.
    fn of_node(&self, node: &str) -> &[(&'a str, &'a InfraAddress)] {
        let start = self.by_node.partition_point(|(n, _)| *n < node);
        let len = self.by_node[start..].partition_point(|(n, _)| *n == node);
        &self.by_node[start..start + len]
    }

    /// The nodes claiming `ip`, in (node, role, source) order.
    fn at(&self, ip: IpAddr) -> &[(&'a str, &'a InfraAddress)] {
        let start = self.by_ip.partition_point(|(_, a)| a.ip < ip);
        let len = self.by_ip[start..].partition_point(|(_, a)| a.ip == ip);
        &self.by_ip[start..start + len]
    }

    /// The index of `inv`'s Cilium addresses.
    pub fn of(inv: &'a Inventory) -> Self {
        let c = &inv.cluster;
        Self::new(
            (&c.cilium_nodes, &c.annotated_nodes, &c.calico.tunnels),
            &inv.router_device,
        )
    }

    fn default_device(&self, role: Role) -> Option<&'a str> {
        match role {
            Role::Router => Some(self.router_device),
            Role::Health => Some(HEALTH_DEVICE),
            _ => None,
        }
    }
}

/// Every address that shadows a pod IP, for one node: its own (the kernel's and
/// Cilium's), and other nodes' Cilium addresses through the shared [`Index`].
pub(super) struct Owners<'a> {
    pub(super) mine: HashMap<IpAddr, OwnerRef<'a>>,
    index: &'a Index<'a>,
    node: &'a str,
}

impl<'a> Owners<'a> {
    pub(super) fn new(inv: &'a Inventory, index: &'a Index<'a>) -> Self {
        let mut mine = HashMap::with_capacity(inv.host.addresses.len());
        for a in &inv.host.addresses {
            let role = Role::of_device(&a.device, &inv.router_device, &inv.node);
            mine.entry(a.ip).or_insert(OwnerRef {
                node: inv.node.as_str(),
                role,
                device: Some(a.device.as_str()),
                source: Source::Kernel,
            });
        }
        let node = inv.node.as_str();
        for (_, a) in index.of_node(node) {
            // Cilium names the role; the kernel, if it holds the address, names
            // the device. An IP in two roles keeps the first in Role order, and
            // of one role the best source.
            let existing = mine.get(&a.ip).copied();
            if existing.is_some_and(|o: OwnerRef<'_>| o.named_by_cluster()) {
                continue;
            }
            let device = existing
                .and_then(|o| o.device)
                .or(index.default_device(a.role));
            mine.insert(
                a.ip,
                OwnerRef {
                    node,
                    role: a.role,
                    device,
                    source: a.source,
                },
            );
        }
        Self { mine, index, node }
    }

    /// The node other than this one that holds `ip` as a Cilium address: of
    /// two, the lowest (name, role, source).
    pub(super) fn other(&self, ip: &IpAddr) -> Option<OwnerRef<'a>> {
        let (node, a) = self.index.at(*ip).iter().find(|(n, _)| *n != self.node)?;
        Some(OwnerRef {
            node,
            role: a.role,
            device: self.index.default_device(a.role),
            source: a.source,
        })
    }
}

/// Whether ovn-kubernetes' join subnet is not its default anywhere in the
/// cluster: a node's subnet overlaps the default (ovn-kubernetes refuses that
/// overlap, so the join subnet was moved), or a node publishes a join address
/// outside it. Then no node's join address is derived from its node-id: the
/// default subnet would name an address ovn-kubernetes never uses there.
pub(super) fn join_moved(annotated_nodes: &[CniNode]) -> bool {
    let defaults: Vec<ipnet::IpNet> = crate::cni::ovn_kubernetes::DEFAULT_JOIN
        .iter()
        .filter_map(|j| crate::inventory::ip_text::parse_cidr(j))
        .map(|c| c.net)
        .collect();
    let in_default = |ip: &IpAddr| defaults.iter().any(|j| j.contains(ip));
    annotated_nodes.iter().any(|n| {
        n.ovn_subnets.iter().any(|s| {
            defaults
                .iter()
                .any(|j| s.contains(&j.network()) || j.contains(&s.network()))
        }) || n
            .addresses
            .iter()
            .any(|a| a.source == Source::OvnJoinAnnotation && !in_default(&a.ip))
    })
}
