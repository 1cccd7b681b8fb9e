//! What a finding is about beyond its kind and address, and the remedy that fits, typed.

use ipnet::IpNet;
use std::net::IpAddr;

use super::finding::{PodRef, PodSite, Reserver};
use crate::inventory::{DeadEnd, InfraAddress, IpRange, ServiceAddress};

/// What detection found, beyond kind, IP and owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The pod's IP is an address a node holds.
    Collision {
        /// The pod.
        site: PodSite,
        /// The host's FIB answer for the IP, `ip route get`-like, when looked up.
        fib: Option<String>,
        /// A pod route the local address shadows, e.g. `10.244.1.5/32 dev lxc1`.
        shadowed_route: Option<String>,
        /// kubelet's report of the refusal, when the IP came from it.
        kubelet: Option<KubeletReport>,
        /// The Service whose address it is (external, load-balancer IP), if read.
        service: Option<ServiceAddress>,
        /// The host interface (`lxc…`, `cali…`, `veth…`) behind which a pod
        /// namespace of this node holds the address, where one does: the
        /// kernel's word that the pod is there while the node answers for it.
        held_behind: Option<String>,
    },
    /// kubelet reports Cilium refused the pod's address as in use; no node's address explains it.
    Refused {
        /// The pod refused.
        site: PodSite,
        /// kubelet's report.
        kubelet: KubeletReport,
        /// The live pod holding the address (a duplicate), if one does.
        holder: Option<PodRef>,
    },
    /// A CNI refused the pod's sandbox, in its own words, over what the node
    /// kept from before: a host route to the pod's address through another
    /// interface (Calico), another address on its bridge (the bridge plugin).
    Leftover {
        /// The pod refused.
        site: PodSite,
        /// kubelet's report.
        kubelet: KubeletReport,
        /// The interface in the way, from the message or the kernel: the one
        /// holding the route, or the bridge.
        interface: Option<String>,
        /// The live pod of the node holding the address, if one does (Calico).
        holder: Option<PodRef>,
        /// The gateway the bridge plugin wanted on its bridge.
        wanted: Option<IpNet>,
        /// Whether the node's kernel shows what the refusal says (the route
        /// through that interface, the bridge's other address).
        seen: bool,
    },
    /// Two live pods hold one address in their status: traffic to it reaches one.
    Duplicate {
        /// The newer pod.
        site: PodSite,
        /// The older pod holding the same address.
        holder: PodRef,
        /// For a secondary network's address: the network (and the interfaces).
        network: Option<String>,
    },
    /// Something about a node's pod allocator or Cilium's configuration.
    Node(NodeProblem),
    /// The pod's own node routes its IP nowhere.
    Blackhole {
        /// The pod.
        site: PodSite,
        /// Where the packet dies.
        dead_end: DeadEnd,
        /// The route it dies on, `ip route`-like, when one is in the tables.
        route: Option<String>,
    },
    /// What the pods' namespaces hold contradicts the host's routes or the API.
    Kernel(Box<super::truth::KernelTruth>),
    /// Two ranges of the address plan overlap where they must not.
    Plan(Box<super::plan::PlanOverlap>),
    /// Cilium's address (or range) lies in a kube-ovn Subnet and is not excluded.
    Overlap {
        /// The Subnet's name.
        subnet: String,
        /// The Subnet's block holding the address.
        block: Option<IpNet>,
        /// Cilium's range involved, and the field it was read from.
        cilium_range: Option<(IpNet, &'static str)>,
        /// Whether the IP is an address Cilium holds now (rather than one it may take).
        held: bool,
        /// The addresses Cilium holds that the Subnet may hand out, the
        /// finding's IP first (one fix excludes them all); empty when not `held`.
        addresses: Vec<InfraAddress>,
    },
}

/// kubelet's `FailedCreatePodSandBox` report, as evidence (JSON `kubelet`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KubeletReport {
    /// How many times kubelet reported it.
    pub count: u64,
    /// Its message (one line, bounded).
    pub message: String,
}

/// What is wrong with a node's allocator or configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeProblem {
    /// The allocator had no address left for these pods.
    Exhausted {
        /// The pods refused (at most [`NodeProblem::PODS_NAMED`]).
        pods: Vec<PodRef>,
        /// How many pods were refused.
        refused_pods: usize,
        /// kubelet's report of the first (count summed over all).
        kubelet: KubeletReport,
        /// How the node gets its addresses: what to check differs.
        ipam: IpamKind,
    },
    /// The node's range holds fewer usable addresses than kubelet accepts pods.
    Capacity {
        /// The node's ranges of the short family.
        ranges: Vec<IpNet>,
        /// Addresses pods can get from them.
        usable: u64,
        /// Cilium's own addresses taken from them.
        infra: u64,
        /// The Node's `status.allocatable.pods`.
        allocatable: u64,
    },
    /// cilium-operator's error for the node.
    OperatorError {
        /// `status.ipam.operator-status.error`.
        error: String,
        /// The cluster pool that explains a "full" error, when it is known
        /// and has no room for another node.
        pool: Option<PoolFit>,
    },
    /// Latent: the cluster pool has room for no more nodes than the cluster has.
    PoolNearlyFull(PoolFit),
    /// cluster-pool mode, but the node's podCIDRs lie outside every pool.
    MigrationStuck {
        /// `spec.ipam.podCIDRs` outside the pools.
        pod_cidrs: Vec<IpNet>,
        /// The pools of cilium-config.
        pools: Vec<IpNet>,
        /// cilium-operator's error for the node, which says the same.
        operator_error: Option<String>,
        /// The pool changed, the mode did not (cilium#27245): the old range is
        /// not the Node's `spec.podCIDRs` that kubernetes mode copies.
        pool_change: bool,
    },
    /// A bridge keeps an address, and its connected route, in a pod range that
    /// is not this node's: the host sends that range's traffic into its bridge.
    StaleBridge {
        /// The bridge (`cni0`).
        bridge: String,
        /// Its address with the prefix of its connected route.
        address: IpNet,
        /// This node's `spec.podCIDRs`.
        own: Vec<IpNet>,
        /// The node whose pod range it is now.
        owner: String,
        /// That node's pods in the range (at most [`NodeProblem::PODS_NAMED`]).
        pods: Vec<PodRef>,
        /// How many of its pods are in the range.
        unreachable: usize,
    },
    /// The Ingress IP is outside every Subnet kube-ovn masquerades.
    NotMasqueraded {
        /// The masqueraded Subnets and their blocks.
        subnets: Vec<(String, Vec<IpNet>)>,
    },
    /// Another node's address is held here (or claimed by a Service every node binds).
    NodeAddressClaimed(Box<super::vip::NodeAddressClaim>),
    /// A node's Calico tunnel address that IPAM does not allocate to its tunnel.
    Calico(super::calico::TunnelAllocation),
}

impl NodeProblem {
    /// How many refused pods a finding names.
    pub const PODS_NAMED: usize = 5;
}

/// How the node's IPAM gives it pod addresses, as far as the inventory and
/// the refusal's wording show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpamKind {
    /// A range of the node's own (cluster-pool, kubernetes, multi-pool): its
    /// size bounds the node's pods.
    HostScope,
    /// A pool cilium-operator fills from the cloud or a CRD (ENI, Azure,
    /// alibabacloud, crd): running dry is usually temporary (cilium PR#42369).
    OperatorPool,
    /// Neither cilium-config nor the CiliumNode says.
    Unknown,
    /// The reference host-local plugin (flannel, the bridge plugin,
    /// kube-router, a Multus secondary network): its refusal says so. It keeps
    /// one file per reserved address on the node, which unclean deletions leak.
    HostLocal,
    /// Calico's IPAM: blocks of its IPPools, affine to nodes; its refusal
    /// says so.
    Calico,
}

/// One family's cluster pool against the per-node mask and the node count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolFit {
    /// cilium-config's `cluster-pool-ipv4-cidr` (or IPv6) CIDRs.
    pub pools: Vec<IpNet>,
    /// The prefix length of each node's range.
    pub mask: u8,
    /// Whether `mask` was read from cilium-config (else from the CiliumNodes' podCIDRs).
    pub mask_configured: bool,
    /// How many node ranges the pools hold.
    pub holds: u64,
    /// How many nodes the cluster has (its CiliumNodes).
    pub nodes: u64,
}

/// What the operator should do, decided from what the inventory shows of the
/// cluster; rendered into every message and Event note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// kube-ovn hands out pod addresses over Cilium's range: give Cilium a pool
    /// cut from the end of the Subnet's block and exclude it there.
    CarveCiliumPool {
        /// The Subnet that handed the address out.
        subnet: String,
        /// Its block holding the address.
        block: IpNet,
        /// A block at its end for Cilium's pool.
        pool: IpNet,
    },
    /// kube-ovn hands out pod addresses, but no Subnet known here holds this one.
    ExcludeInPodAllocator,
    /// Cilium is the only allocator and gave a pod an address it holds itself.
    ReallocatePod {
        /// The node whose allocator did it.
        node: String,
    },
    /// Calico's IPAM handed a pod its node's tunnel address: find the double
    /// allocation with `calicoctl ipam check`, then reallocate the pod.
    CheckCalicoIpam {
        /// The node whose tunnel address it is.
        node: String,
    },
    /// Delete a bridge's address left from the node's previous pod range.
    DeleteBridgeAddress {
        /// The node.
        node: String,
        /// The bridge.
        bridge: String,
        /// The address, with its prefix.
        address: IpNet,
    },
    /// Calico refused the pod: the host already routes the address its IPAM
    /// gave the pod through another interface (a veth left by a previous
    /// sandbox, or a live pod given the same address).
    ClearCalicoRoute {
        /// The node.
        node: String,
        /// The address.
        ip: IpAddr,
        /// The interface holding the route, when known.
        interface: Option<String>,
        /// The live pod of the node holding the address, if one does.
        holder: Option<PodRef>,
    },
    /// The bridge plugin refused the pod: its bridge holds an address other
    /// than the node's gateway, and which one is not known: recreate it.
    RecreateBridge {
        /// The node.
        node: String,
        /// The bridge.
        bridge: String,
        /// The gateway the plugin wanted on it.
        gateway: Option<IpNet>,
    },
    /// The address is one a CNI reserves for the node and never hands out:
    /// what gave it to the pod is a second allocator.
    ReservedAddress {
        /// Who reserves it.
        by: Reserver,
    },
    /// Remove the local address, or keep the pod allocator off it.
    RemoveLocalAddress {
        /// The device holding it.
        device: Option<String>,
        /// The kube-ovn Subnet that hands it out, if one does.
        subnet: Option<String>,
    },
    /// A Service's address shadows the pod: remove it from the Service (the
    /// pod is not at fault, and a new one could be pointed at as well).
    RemoveServiceAddress {
        /// The address.
        ip: IpAddr,
        /// The Service and the field setting it, when known.
        service: Option<ServiceAddress>,
        /// The device holding the address on the node (`kube-ipvs0`).
        device: Option<String>,
    },
    /// Restore the pod network's route on the node.
    RestoreRoute {
        /// The node missing the route.
        node: String,
        /// Whether kube-ovn lays the pod routes (one per subnet, via ovn0).
        kube_ovn: bool,
    },
    /// Delete the stale route that drops the pod's traffic.
    DeleteStaleRoute {
        /// The node with the route.
        node: String,
        /// The route's type.
        dead_end: DeadEnd,
    },
    /// Exclude Cilium's addresses from the Subnet, or move Cilium's pool.
    ExcludeFromSubnet {
        /// The Subnet.
        subnet: String,
        /// The `excludeIps` entry that fixes it.
        exclude: IpRange,
        /// The Subnet block involved.
        block: Option<IpNet>,
    },
    /// Disconnect the endpoint Cilium keeps for an address no pod owns.
    DisconnectEndpoint {
        /// The node whose Cilium keeps it.
        node: String,
        /// The address.
        ip: IpAddr,
        /// That node's Cilium agent pod, when known.
        cilium_pod: Option<PodRef>,
    },
    /// Two live pods hold one address: give the refused one another.
    ReallocateDuplicate {
        /// The node.
        node: String,
    },
    /// Two running pods hold one address: recreate the newer one.
    RecreateNewer {
        /// The newer pod.
        pod: PodRef,
    },
    /// The node's range is (or will be) too small for its pods.
    AddCapacity {
        /// The node.
        node: String,
        /// Usable addresses, when known: lower `--max-pods` to this.
        usable: Option<u64>,
    },
    /// cilium-operator cannot allocate for the node: read its error.
    FixOperatorAllocation {
        /// The node.
        node: String,
    },
    /// Finish the switch to cluster-pool in the order that works.
    ClearPodCidrsAfterRollout {
        /// The node.
        node: String,
    },
    /// The cluster pool changed under nodes that keep their old range: give
    /// the old CIDR back to the pool, or move the nodes one by one.
    KeepOldPoolOrReallocate {
        /// The node.
        node: String,
        /// Its ranges outside the pool.
        old: Vec<IpNet>,
    },
    /// host-local's range on the node is full: leaked reservations in its
    /// store, or more pods than the range holds.
    ReleaseHostLocal {
        /// The node.
        node: String,
    },
    /// Addresses run dry in a pool cilium-operator fills: usually temporary;
    /// check the operator, pre-allocation and the cloud's limits.
    CheckOperatorPool {
        /// The node.
        node: String,
    },
    /// The cluster pool has room for too few nodes: add a CIDR to it.
    GrowClusterPool {
        /// The pool's CIDRs, of the family short of room.
        pools: Vec<IpNet>,
    },
    /// Fix what the kernel shows about the pods' namespaces.
    Kernel(super::truth::KernelFix),
    /// Give Cilium a pool inside a Subnet kube-ovn masquerades.
    PoolInMasqueradedSubnet {
        /// A masqueraded Subnet and the block to carve from, when one is known.
        subnet: Option<(String, IpNet)>,
    },
    /// Free the node's address: remove it from the Service, or from the device.
    FreeNodeAddress(Box<super::vip::NodeAddressClaim>),
    /// A fix in Calico's terms.
    Calico(super::calico::CalicoFix),
    /// Move one range of the address plan off another.
    Plan(Box<super::plan::Move>),
}
