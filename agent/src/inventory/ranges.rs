//! The ranges pods are given addresses from, as the inventory shows them:
//! the pieces detection and the agent's watch set combine.

use ipnet::IpNet;

use super::{CniNode, Inventory};

impl Inventory {
    /// kube-ovn's primary Subnets' blocks: where its pods get addresses.
    pub fn primary_subnet_ranges(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.cluster
            .primary_subnets()
            .flat_map(|s| s.cidrs.iter().copied())
    }

    /// This node's CiliumNode and the addresses its Node's annotations name.
    pub fn own_cni_nodes(&self) -> impl Iterator<Item = &CniNode> + '_ {
        self.cluster.cni_nodes().filter(|c| c.name == self.node)
    }

    /// The ranges this node's pods are given addresses from: its Node's
    /// podCIDRs, kube-ovn's primary Subnets, its CiliumNode's ranges
    /// (cluster-pool leaves the Node's empty), ovn-kubernetes' node subnets.
    pub fn own_pod_ranges(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.node_facts
            .iter()
            .flat_map(|n| n.pod_cidrs.iter().copied())
            .chain(self.primary_subnet_ranges())
            .chain(self.own_cni_nodes().flat_map(|c| {
                c.ranges()
                    .map(|(r, _)| r)
                    .chain(c.ovn_subnets.iter().copied())
            }))
    }
}
