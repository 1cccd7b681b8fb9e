//! Calico's IPAM as detection needs it: the IPAMBlocks (which address of a
//! block is allocated to whom) and the IPPools (the ranges Calico gives pods
//! addresses from). Read cluster-wide by `audit` and from files by `check`;
//! the agent does not watch them (one watch per agent, times every node).

use std::{collections::BTreeMap, net::IpAddr};

use ipnet::IpNet;

use super::{CniNode, Role, Source};

/// What a block address is allocated to, from the allocation's attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpamOwner {
    /// A node's tunnel device (`secondary.type` one of [`TunnelKind`]).
    Tunnel {
        /// `secondary.node`, else the node named in the handle.
        node: String,
        /// Which device.
        kind: TunnelKind,
    },
    /// A pod (`secondary.namespace` and `secondary.pod`; handle `k8s-pod-network.<containerID>`).
    Pod {
        /// `secondary.namespace`.
        namespace: String,
        /// `secondary.pod`.
        name: String,
    },
    /// An allocation with neither handle nor attributes: a tunnel address
    /// from before Calico wrote either (workload addresses always had a
    /// handle); calico-node takes its own back under a handle when it next
    /// starts (node/pkg/allocateip/allocateip.go, "just an old tunnel
    /// address", @87c15906). Whose tunnel is not written down.
    Unmarked,
    /// Anything else (a LoadBalancer IP, an allocation whose attribute is
    /// missing), by its handle when it has one.
    Other {
        /// `handle_id`.
        handle: Option<String>,
    },
}

/// Calico's tunnel devices, as its allocation attributes name them
/// (`secondary.type`) and the handle it allocates each under:
/// `<prefix><node>` (projectcalico/calico node/pkg/allocateip/allocateip.go,
/// `generateHandleAndAttributes`, @062ba492).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, strum::EnumIter)]
pub enum TunnelKind {
    /// `tunl0`.
    Ipip,
    /// `vxlan.calico`.
    Vxlan,
    /// `vxlan-v6.calico`.
    VxlanV6,
    /// `wireguard.cali`.
    Wireguard,
    /// `wg-v6.cali`.
    WireguardV6,
}

impl TunnelKind {
    /// Its `secondary.type`, and its handle's prefix (before the node's name).
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Self::Ipip => ("ipipTunnelAddress", "ipip-tunnel-addr-"),
            Self::Vxlan => ("vxlanTunnelAddress", "vxlan-tunnel-addr-"),
            Self::VxlanV6 => ("vxlanV6TunnelAddress", "vxlan-v6-tunnel-addr-"),
            Self::Wireguard => ("wireguardTunnelAddress", "wireguard-tunnel-addr-"),
            Self::WireguardV6 => ("wireguardV6TunnelAddress", "wireguard-v6-tunnel-addr-"),
        }
    }

    /// The device holding the address.
    pub fn device(self) -> &'static str {
        match self {
            Self::Ipip => "tunl0",
            Self::Vxlan => "vxlan.calico",
            Self::VxlanV6 => "vxlan-v6.calico",
            Self::Wireguard => "wireguard.cali",
            Self::WireguardV6 => "wg-v6.cali",
        }
    }

    /// The kind whose `secondary.type` is `t`.
    pub fn of_attribute(t: &str) -> Option<Self> {
        <Self as strum::IntoEnumIterator>::iter().find(|k| k.names().0 == t)
    }

    /// The kind and node of a tunnel handle. Node names may hold `-` (or be
    /// IPs, calico#7192): the known prefix is cut, never split on `-`.
    pub fn of_handle(handle: &str) -> Option<(Self, &str)> {
        // No prefix is another's (`vxlan-tunnel-` and `vxlan-v6-` part at
        // their seventh byte): the first that matches is the kind.
        <Self as strum::IntoEnumIterator>::iter().find_map(|k| {
            let node = handle.strip_prefix(k.names().1)?;
            (!node.is_empty()).then_some((k, node))
        })
    }
}

/// One `crd.projectcalico.org/v1` IPAMBlock: its allocated addresses only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpamBlock {
    /// `metadata.name` (`10-244-1-0-26`).
    pub name: String,
    /// `spec.cidr`.
    pub cidr: IpNet,
    /// `spec.affinity` `host:<node>`: the node the block is affine to.
    pub node: Option<String>,
    /// Allocated ordinals (`spec.allocations[i]` not null), each with its owner.
    pub allocated: Vec<(u32, IpamOwner)>,
    /// `spec.allocations` lists the block's ordinals: absent, null or empty,
    /// which addresses it allocates is unknown, and none is free.
    pub listed: bool,
}

impl IpamBlock {
    /// The address at `ordinal` (`cidr` base + ordinal).
    pub fn address(&self, ordinal: u32) -> Option<IpAddr> {
        super::nth(&self.cidr, ordinal)
    }

    /// The ordinal of `ip` in the block.
    fn ordinal(&self, ip: IpAddr) -> Option<u32> {
        let offset = match (self.cidr.network(), ip) {
            (IpAddr::V4(n), IpAddr::V4(x)) => u128::from(u32::from(x).checked_sub(u32::from(n))?),
            (IpAddr::V6(n), IpAddr::V6(x)) => u128::from(x).checked_sub(u128::from(n))?,
            _ => return None,
        };
        u32::try_from(offset).ok()
    }
}

/// An IPPool (`crd.projectcalico.org/v1` or `projectcalico.org/v3`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpPool {
    /// `metadata.name`.
    pub name: String,
    /// `spec.cidr`.
    pub cidr: IpNet,
    /// `spec.blockSize`, when set.
    pub block_size: Option<u8>,
    /// `spec.disabled`: no new allocations from it.
    pub disabled: bool,
    /// `spec.allowedUses` holds `Workload` (Calico's default when the list
    /// is absent or empty, with `Tunnel`): pods get addresses from it. A
    /// `LoadBalancer` or `Tunnel`-only pool gives pods none.
    pub workloads: bool,
    /// `spec.allowedUses` holds `LoadBalancer` (Calico 3.29+): kube-controllers'
    /// LoadBalancer IPAM hands its addresses to Services.
    pub load_balancer: bool,
}

/// What an address is to Calico's IPAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation<'a> {
    /// A block holds it, allocated to this owner.
    To(&'a IpamBlock, &'a IpamOwner),
    /// A block holds it, unallocated: Calico may hand it to the next pod.
    Free(&'a IpamBlock),
    /// A block holds it, but lists no allocations: whether and to whom it
    /// is allocated is unknown.
    Unknown(&'a IpamBlock),
    /// No block holds it, but an enabled pool does: Calico may carve a block there.
    InPool(&'a IpPool),
}

/// Calico's IPAM objects, with the blocks ordered for lookups by address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CalicoIpam {
    /// Every IPAMBlock, by network address.
    blocks: Vec<IpamBlock>,
    /// Every IPPool.
    pub pools: Vec<IpPool>,
    /// Each node's tunnel addresses as the blocks allocate them, as owners of
    /// role tunnel ([`Source::CalicoIpamBlock`]): what a pod on one collides with.
    pub tunnels: Vec<CniNode>,
    /// A block was read outside every pool for no workload: Calico's IPAM
    /// gives addresses (computed once: a cluster has thousands of blocks).
    pod_blocks: bool,
}

impl CalicoIpam {
    /// Indexes `blocks` and `pools`.
    pub fn new(mut blocks: Vec<IpamBlock>, pools: Vec<IpPool>) -> Self {
        blocks.sort_by_key(|b| (b.cidr.network(), b.cidr.prefix_len()));
        let mut tunnels: BTreeMap<&str, CniNode> = BTreeMap::new();
        for b in &blocks {
            for (ordinal, owner) in &b.allocated {
                let (IpamOwner::Tunnel { node, .. }, Some(ip)) = (owner, b.address(*ordinal))
                else {
                    continue;
                };
                tunnels
                    .entry(node.as_str())
                    .or_insert_with(|| CniNode {
                        name: node.clone(),
                        ..CniNode::default()
                    })
                    .add(ip, Role::Tunnel, Source::CalicoIpamBlock);
            }
        }
        let tunnels = tunnels.into_values().collect();
        let pod_blocks = blocks.iter().any(|b| !for_no_workload(&pools, &b.cidr));
        Self {
            blocks,
            pools,
            tunnels,
            pod_blocks,
        }
    }

    /// Whether any IPAMBlock was read: without them nothing is judged.
    pub fn has_blocks(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// Every IPAMBlock.
    pub fn blocks(&self) -> &[IpamBlock] {
        &self.blocks
    }

    /// What `ip` is to Calico's IPAM; `None` outside every block and enabled pool.
    pub fn allocation(&self, ip: IpAddr) -> Option<Allocation<'_>> {
        let after = self.blocks.partition_point(|b| b.cidr.network() <= ip);
        let block = self.blocks[..after]
            .iter()
            .rev()
            .take(4)
            .find(|b| b.cidr.contains(&ip));
        if let Some(b) = block {
            let ordinal = b.ordinal(ip)?;
            return Some(match b.allocated.iter().find(|(o, _)| *o == ordinal) {
                Some((_, owner)) => Allocation::To(b, owner),
                None if b.listed => Allocation::Free(b),
                None => Allocation::Unknown(b),
            });
        }
        self.enabled_pools()
            .find(|p| p.cidr.contains(&ip))
            .map(Allocation::InPool)
    }

    /// The pools Calico allocates from.
    pub fn enabled_pools(&self) -> impl Iterator<Item = &IpPool> {
        self.pools.iter().filter(|p| !p.disabled)
    }

    /// Whether Calico's IPAM evidently gives addresses: a block was read
    /// outside every pool for no workload (in a pool for workloads, or in one
    /// deleted since), or one of `given` (pods' `status.podIPs`, a tunnel
    /// device's address) lies in a pool for workloads. Pools alone prove
    /// nothing: Canal creates the default pool and gives pods host-local
    /// addresses (rancher/rke2#3726); a LoadBalancer pool's blocks hold
    /// Services' addresses.
    pub fn in_use(&self, mut given: impl Iterator<Item = IpAddr>) -> bool {
        self.pod_blocks
            || given.any(|ip| {
                self.pools
                    .iter()
                    .any(|p| p.workloads && p.cidr.contains(&ip))
            })
    }

    /// Where Calico's pods may hold addresses: every pool for workloads,
    /// disabled ones too (pods stay on one through a pool migration), and
    /// every block but those of a pool for no workload (a LoadBalancer
    /// pool's blocks hold Services' addresses).
    pub fn pod_ranges(&self) -> impl Iterator<Item = ipnet::IpNet> + '_ {
        self.pools
            .iter()
            .filter(|p| p.workloads)
            .map(|p| p.cidr)
            .chain(
                self.blocks
                    .iter()
                    .map(|b| b.cidr)
                    .filter(move |c| !for_no_workload(&self.pools, c)),
            )
    }
}

/// Whether `cidr` lies in a pool for no workload (a LoadBalancer or
/// Tunnel-only pool): Services' or tunnels' addresses, never a pod's.
fn for_no_workload(pools: &[IpPool], cidr: &IpNet) -> bool {
    pools.iter().any(|p| !p.workloads && p.cidr.contains(cidr))
}
