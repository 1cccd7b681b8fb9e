//! The cluster objects detection reads: pods, Cilium's own addresses per
//! node, kube-ovn Subnets.

use std::net::IpAddr;

use super::IpRange;
use ipnet::IpNet;
use serde::Serialize;

/// A pod as detection needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pod {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.nodeName`; `None` while unscheduled.
    pub node: Option<String>,
    /// Its IPs, at most one per family in a sane object.
    pub ips: Vec<PodIp>,
    /// `spec.hostNetwork`: its IP is the node's.
    pub host_network: bool,
    /// `status.phase` (Pending, Running, Succeeded, Failed, Unknown).
    pub phase: Option<String>,
    /// `metadata.creationTimestamp`, in seconds since the Unix epoch: traffic
    /// seen before it was not this pod's.
    pub created: Option<i64>,
    /// The kube-ovn Subnet its annotation says the address came from
    /// (`ovn.kubernetes.io/logical_switch`), when its IPs came from an annotation.
    pub logical_switch: Option<String>,
    /// `metadata.deletionTimestamp` is set: its address may already be another pod's.
    pub terminating: bool,
    /// Its controller, `Kind/name` (`metadata.ownerReferences` with `controller: true`).
    pub controller: Option<String>,
    /// Multus gives its default interface another network
    /// (`v1.multus-cni.io/default-network`: SR-IOV, macvlan): no veth of the
    /// node's CNI leads to it, so no namespace behind one holding its address is
    /// no evidence of a missing sandbox.
    pub default_network_elsewhere: bool,
    /// Its addresses on secondary networks (Multus' `network-status`).
    pub secondary: Vec<super::SecondaryIp>,
}

impl IpSource {
    /// The name used in JSON and metric labels.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }
}

impl PodIp {
    /// Whether the address rests on an annotation alone, unconfirmed.
    pub fn unconfirmed(&self) -> bool {
        self.source == IpSource::Annotation
    }
}

impl Pod {
    /// Pods that cannot receive traffic are not findings: host-network pods
    /// (their IP is the node's) and pods that have terminated.
    pub fn can_receive_traffic(&self) -> bool {
        !self.host_network && !matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Whether a new finding may be raised about the pod: it can receive
    /// traffic and is not being deleted (what shows in that window is noise:
    /// its address may already be on its way to another pod).
    pub fn reportable(&self) -> bool {
        self.can_receive_traffic() && !self.terminating
    }

    /// Pending with no status address (an annotation's may be there): a pod
    /// whose sandbox kubelet may have reported refused.
    pub fn waiting_for_address(&self) -> bool {
        self.reportable()
            && matches!(self.phase.as_deref(), None | Some("Pending"))
            && !self.ips.iter().any(|i| i.source == IpSource::Status)
            && !self.uid.is_empty()
    }
}

/// One IP of a pod, and where it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodIp {
    /// The address.
    pub ip: IpAddr,
    /// Where it came from.
    pub source: IpSource,
}

/// Where a pod IP came from.
#[derive(
    Clone, Debug, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::Display, strum::EnumIter,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "kebab-case")]
pub enum IpSource {
    /// `status.podIPs`.
    Status,
    /// A CNI annotation (kube-ovn's `ovn.kubernetes.io/ip_address`): the pod has
    /// no status IP yet, e.g. because its sandbox keeps failing. Anyone who may
    /// edit the pod can write it: a hint, not proof.
    Annotation,
    /// The annotation, confirmed by kube-ovn's own record of the allocation (the
    /// `ips.kubeovn.io` object `<pod>.<namespace>`, which tenants cannot write).
    #[serde(rename = "kube-ovn-ip")]
    KubeOvnIp,
    /// kubelet's `FailedCreatePodSandBox` Event: Cilium refused this address for
    /// the pod as already in use (the pod has no address of its own yet).
    Event,
    /// Multus' `k8s.v1.cni.cncf.io/network-status` annotation: a secondary
    /// network's address, which anyone who may edit the pod can write.
    #[serde(rename = "network-status")]
    NetworkStatus,
    /// What a pod namespace of the node holds on a secondary link, as the
    /// node's kernel shows it: a pod with NET_ADMIN writes its own namespace.
    Kernel,
}

/// What an address is to the node that holds it.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumIter,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Role {
    /// Cilium's router IP, on `cilium_host`.
    Router,
    /// Cilium's Ingress IP, held by its endpoint manager only.
    Ingress,
    /// Cilium's health endpoint IP.
    Health,
    /// A tunnel device's address: Calico's IPIP, VXLAN or WireGuard address
    /// (its tunnel devices, `projectcalico.org/*` Node annotations).
    Tunnel,
    /// The gateway of the node's pod subnet: a bridge's address
    /// (the CNIs' gateways) or ovn-kubernetes' `.1`.
    Gateway,
    /// ovn-kubernetes' management port (`ovn-k8s-mp0`): `.2` of the node's subnet.
    #[serde(rename = "management-port")]
    #[strum(serialize = "management-port")]
    ManagementPort,
    /// An ovn-kubernetes router port of the node: its gateway router's on the
    /// join switch (100.64.0.0/16 by default) or its transit switch port.
    #[serde(rename = "ovn-router-port")]
    #[strum(serialize = "ovn-router-port")]
    OvnRouterPort,
    /// Any other address of the node.
    Local,
    /// Another pod's address.
    Pod,
    /// An endpoint Cilium keeps for an address no pod owns.
    Endpoint,
    /// The node itself: a finding about its allocator or configuration.
    Node,
}

impl Role {
    /// The name used in JSON and metric labels.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// One of the addresses Cilium takes for itself from its pod ranges.
    pub fn is_ciliums(self) -> bool {
        matches!(self, Self::Router | Self::Ingress | Self::Health)
    }
}

/// Where an owner's address was read, best first: when two sources name the
/// same address, the first in this order is kept.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumIter,
)]
pub enum Source {
    /// `CiliumNode.spec.addresses[type=CiliumInternalIP]`.
    #[serde(rename = "ciliumnode.spec.addresses")]
    #[strum(serialize = "CiliumNode.spec.addresses")]
    SpecAddresses,
    /// `CiliumNode.spec.ingress`.
    #[serde(rename = "ciliumnode.spec.ingress")]
    #[strum(serialize = "CiliumNode.spec.ingress")]
    SpecIngress,
    /// `CiliumNode.spec.health`.
    #[serde(rename = "ciliumnode.spec.health")]
    #[strum(serialize = "CiliumNode.spec.health")]
    SpecHealth,
    /// `CiliumNode.status.ipam.used` (owners `router`, `health`, `ingress`).
    #[serde(rename = "ciliumnode.status.ipam.used")]
    #[strum(serialize = "CiliumNode.status.ipam.used")]
    StatusIpamUsed,
    /// A `network.cilium.io/*` annotation on the Node (`--annotate-k8s-node`).
    #[serde(rename = "node.annotations")]
    #[strum(serialize = "the Node's network.cilium.io annotations")]
    NodeAnnotation,
    /// A legacy `io.cilium.network.*` annotation on the Node.
    #[serde(rename = "node.annotations.legacy")]
    #[strum(serialize = "the Node's legacy io.cilium.network annotations")]
    LegacyNodeAnnotation,
    /// ovn-kubernetes' `k8s.ovn.org/node-subnets` annotation: `.1` and `.2`
    /// of each of the node's subnets of the default network.
    #[serde(rename = "node.annotations.ovn-kubernetes")]
    #[strum(serialize = "the Node's k8s.ovn.org/node-subnets annotation")]
    OvnNodeAnnotation,
    /// `k8s.ovn.org/node-gateway-router-lrp-ifaddr(s)`: the gateway router's
    /// join switch port (releases before ovn-kubernetes PR#6772).
    #[serde(rename = "node.annotations.ovn-kubernetes.join")]
    #[strum(serialize = "the Node's k8s.ovn.org/node-gateway-router-lrp-ifaddr(s) annotation")]
    OvnJoinAnnotation,
    /// `k8s.ovn.org/node-transit-switch-port-ifaddr` (interconnect).
    #[serde(rename = "node.annotations.ovn-kubernetes.transit")]
    #[strum(serialize = "the Node's k8s.ovn.org/node-transit-switch-port-ifaddr annotation")]
    OvnTransitAnnotation,
    /// The join address derived from `k8s.ovn.org/node-id` in the default
    /// join subnet, as ovn-kubernetes derives it since PR#6772.
    #[serde(rename = "node.annotations.ovn-kubernetes.node-id")]
    #[strum(serialize = "the Node's k8s.ovn.org/node-id in ovn-kubernetes' default join subnet")]
    OvnNodeId,
    /// A `projectcalico.org/*TunnelAddr` or `*WireguardInterfaceAddr`
    /// annotation calico-node writes on its Node.
    #[serde(rename = "node.annotations.calico")]
    #[strum(serialize = "the Node's projectcalico.org annotations")]
    CalicoNodeAnnotation,
    /// The node's own kernel (netlink).
    #[serde(rename = "kernel")]
    #[strum(serialize = "the node's kernel")]
    Kernel,
    /// Another pod's `status.podIPs`.
    #[serde(rename = "pod.status.podIPs")]
    #[strum(serialize = "the other pod's status.podIPs")]
    PodStatus,
    /// kubelet's `FailedCreatePodSandBox` Event.
    #[serde(rename = "kubelet.event")]
    #[strum(serialize = "kubelet's FailedCreatePodSandBox Event")]
    KubeletEvent,
    /// `CiliumNode.status.ipam.operator-status`.
    #[serde(rename = "ciliumnode.status.ipam.operator-status")]
    #[strum(serialize = "CiliumNode.status.ipam.operator-status")]
    OperatorStatus,
    /// The `cilium-config` ConfigMap, with the CiliumNode's `spec.ipam.podCIDRs`.
    #[serde(rename = "cilium-config")]
    #[strum(serialize = "the cilium-config ConfigMap")]
    CiliumConfig,
    /// The CiliumNode's `spec.ipam.podCIDRs` against the Node's `status.allocatable.pods`.
    #[serde(rename = "node.status.allocatable")]
    #[strum(serialize = "the Node's status.allocatable")]
    NodeStatus,
    /// kube-ovn's Subnets, against the CiliumNode's Ingress IP.
    #[serde(rename = "subnets")]
    #[strum(serialize = "kube-ovn's Subnets")]
    Subnets,
    /// The Services' addresses (`spec.externalIPs`, `spec.clusterIPs`, load-balancer IPs).
    #[serde(rename = "services")]
    #[strum(serialize = "the Services' addresses")]
    Services,
    /// Multus' `k8s.v1.cni.cncf.io/network-status` annotation of the other pod.
    #[serde(rename = "pod.annotations.network-status")]
    #[strum(serialize = "the other pod's network-status annotation")]
    PodNetworkStatus,
    /// The cluster's address plan: allocators' pools, Service ranges, Nodes.
    #[serde(rename = "address-plan")]
    #[strum(serialize = "the cluster's address plan")]
    AddressPlan,
    /// An allocation of a Calico IPAMBlock to a node's tunnel handle.
    #[serde(rename = "ipamblock.calico")]
    #[strum(serialize = "Calico's IPAMBlocks")]
    CalicoIpamBlock,
}

impl Source {
    /// The field or place, as operators know it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One of Cilium's own addresses on a node (JSON `addresses` of an overlap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct InfraAddress {
    /// The address.
    pub ip: IpAddr,
    /// Router, Ingress or health.
    pub role: Role,
    /// Where it was read.
    pub source: Source,
}

/// What a CNI records in the API about one node: the addresses it holds there
/// (Cilium's from its CiliumNode or Node annotations, Calico's tunnel
/// addresses, ovn-kubernetes' ports) and the ranges it takes them from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CniNode {
    /// `metadata.name`: the node's name.
    pub name: String,
    /// Router, Ingress and health addresses, each once per source.
    pub addresses: Vec<InfraAddress>,
    /// `spec.ipam.podCIDRs` (kubernetes, cluster-pool); empty in the CRD-style
    /// modes (crd, eni, azure, alibabacloud), where it means nothing.
    pub pod_cidrs: Vec<IpNet>,
    /// `spec.ipam.pools.allocated[].cidrs` (multi-pool, ENI from 1.20).
    pub pool_cidrs: Vec<IpNet>,
    /// `status.ipam.operator-status.error` when not empty: why the operator
    /// could not allocate for this node.
    pub operator_error: Option<String>,
    /// Its addresses come from a pool cilium-operator fills (`spec.ipam.pool`,
    /// or `status.ipam.used` naming cloud resources): ENI, Azure, CRD modes.
    pub operator_pool: bool,
    /// ovn-kubernetes' subnets of the node's default network
    /// (`k8s.ovn.org/node-subnets`): its pod ranges, which are not Cilium's
    /// (so not in [`CniNode::ranges`]) and not `spec.podCIDRs`.
    pub ovn_subnets: Vec<IpNet>,
    /// ovn-kubernetes' internal subnets (join, transit, masquerade) its
    /// annotations tell: (the annotation, the subnet).
    pub ovn_internal: Vec<(&'static str, IpNet)>,
}

impl CniNode {
    /// The addresses of `role`, in the order read.
    pub fn ips(&self, role: Role) -> impl Iterator<Item = IpAddr> + '_ {
        self.addresses
            .iter()
            .filter(move |a| a.role == role)
            .map(|a| a.ip)
    }

    /// Adds an address unless the same (ip, role) was read from a better source.
    pub fn add(&mut self, ip: IpAddr, role: Role, source: Source) {
        if !self
            .addresses
            .iter()
            .any(|a| a.ip == ip && a.role == role && a.source <= source)
        {
            self.addresses.retain(|a| !(a.ip == ip && a.role == role));
            self.addresses.push(InfraAddress { ip, role, source });
        }
    }

    /// Every range Cilium takes its addresses from, and the field naming it.
    pub fn ranges(&self) -> impl Iterator<Item = (IpNet, &'static str)> + '_ {
        self.pod_cidrs
            .iter()
            .map(|c| (*c, "CiliumNode.spec.ipam.podCIDRs"))
            .chain(
                self.pool_cidrs
                    .iter()
                    .map(|c| (*c, "CiliumNode.spec.ipam.pools.allocated")),
            )
    }
}

/// A kube-ovn `Subnet` (kubeovn.io/v1): the range another allocator hands pods from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subnet {
    /// `metadata.name`.
    pub name: String,
    /// Whether it hands out pods' primary addresses (`spec.provider` unset or
    /// `ovn`); secondary networks' addresses never show in `status.podIPs`.
    pub primary: bool,
    /// `spec.cidrBlock`, comma-separated for dual stack.
    pub cidrs: Vec<IpNet>,
    /// `spec.excludeIps`: single IPs and `first..last` ranges, inclusive.
    pub exclude: Vec<IpRange>,
    /// An overlay Subnet of the default VPC (`spec.vpc` unset or `ovn-cluster`,
    /// no `spec.vlan`): kube-ovn masquerades host-originated traffic only from
    /// these (its `ovn40subnets` ipset).
    pub masqueraded: bool,
    /// kube-ovn's default Subnet (`spec.default: true`, or named `ovn-default`).
    pub is_default: bool,
}

impl Subnet {
    /// Whether kube-ovn may hand `ip` to a pod: inside the block and not excluded.
    pub fn allocates(&self, ip: IpAddr) -> bool {
        self.cidrs.iter().any(|c| c.contains(&ip)) && !self.exclude.iter().any(|r| r.contains(ip))
    }
}
