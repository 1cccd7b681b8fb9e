//! What kubelet and Cilium report beside the objects: a pod's sandbox
//! refusals, this node's Node as detection needs it, Cilium's configuration.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{IpSource, Pod, PodIp};

/// The plugin whose wording a sandbox refusal is in: whose finding and
/// advice it may lead to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxCni {
    /// Cilium's CNI and agent (`plugin type="cilium-cni"`, its API's
    /// `putEndpointIdInvalid`/`postIpamFailure`, its allocators' words).
    Cilium,
    /// The reference host-local IPAM plugin (under flannel, the bridge
    /// plugin, kube-router, or a Multus secondary network).
    HostLocal,
    /// Calico's CNI plugin and its IPAM.
    Calico,
    /// The reference bridge plugin (flannel's `cni0`, kube-router, podman).
    Bridge,
}

/// What the CNI refused when kubelet could not create a pod's sandbox
/// (`FailedCreatePodSandBox`), when it is something ipshadow diagnoses;
/// each in one plugin's wording ([`SandboxRefusal::cni`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SandboxRefusal {
    /// Cilium refused the endpoint: "IP <ip> is already in use".
    AddressInUse(IpAddr),
    /// Cilium's allocator had no address left ("range is full", "No more IPs
    /// available", "all CIDR ranges are exhausted", "no IPs currently
    /// available on the node").
    NoAddressLeft,
    /// Calico's IPAM refused the address the pod asked for as assigned
    /// already: "resource already exists: <ip>" (`: Address already assigned
    /// in block` in newer releases).
    AddressAssigned(IpAddr),
    /// Calico's IPAM had no address or block left ("No IPs available in
    /// pools", "cannot allocate new block due to per host block limit",
    /// "Unable to autoassign an address - pools are likely exhausted").
    PoolsExhausted,
    /// host-local had no address left: "no IP addresses available in range
    /// set: <first>-<last>", with the first range when it reads.
    RangeSetFull(Option<(IpAddr, IpAddr)>),
    /// Calico found a host route to the pod's address through another
    /// interface: "route (…, Dst: <dst>, …) already exists for an interface
    /// other than 'cali…': route (…, Iface: <holder>)"; before 3.x "failed to
    /// add route (Dst: <dst>, …): file exists" or without the route.
    HostRouteTaken {
        /// The pod's address (the route's `Dst`), when it reads.
        dst: Option<IpAddr>,
        /// The interface holding the route (the second route's `Iface`),
        /// when the message names it (Calico before 3.x did not).
        holder: Option<String>,
    },
    /// The bridge plugin found its bridge holding another address than the
    /// gateway it was given: "\"cni0\" already has an IP address different
    /// from 10.244.0.1/24".
    BridgeAddressDiffers {
        /// The bridge, when its name reads as an interface name.
        bridge: Option<String>,
        /// The gateway address and prefix the plugin wanted on it.
        gateway: Option<IpNet>,
    },
}

impl SandboxRefusal {
    /// The words of kubelet's message a refusal is read from, in lower case
    /// (Cilium's address in use; Cilium out of addresses: host-scope "range is
    /// full", ENI/Azure/multi-pool "No more IPs available", 1.20's "all (pod)
    /// CIDR ranges are exhausted", the CRD allocator's "no IPs currently
    /// available"; host-local's, Calico's and the bridge plugin's): what an
    /// excerpt of it must keep.
    pub const WORDING: [&'static str; 15] = [
        "is already in use",
        "range is full",
        "no more ips",
        "cidr ranges are exhausted",
        "no ips currently available",
        "no ip addresses available in range set",
        "already exists for an interface other than",
        "already has an ip address different from",
        "failed to add route",
        "resource already exists",
        "no ips available in pools",
        "per host block limit",
        "blocks reached for this node",
        "pools are likely exhausted",
        "no more free affine blocks",
    ];

    /// The plugin whose wording this is.
    pub fn cni(&self) -> SandboxCni {
        match self {
            Self::AddressInUse(_) | Self::NoAddressLeft => SandboxCni::Cilium,
            Self::RangeSetFull(_) => SandboxCni::HostLocal,
            Self::HostRouteTaken { .. } | Self::AddressAssigned(_) | Self::PoolsExhausted => {
                SandboxCni::Calico
            }
            Self::BridgeAddressDiffers { .. } => SandboxCni::Bridge,
        }
    }

    /// The address refused as held already (Cilium's in use, Calico's assigned).
    pub fn refused_address(&self) -> Option<IpAddr> {
        match self {
            Self::AddressInUse(ip) | Self::AddressAssigned(ip) => Some(*ip),
            _ => None,
        }
    }
}

/// kubelet's report that a pod's sandbox could not be created, and what the
/// CNI refused (`FailedCreatePodSandBox`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxFailure {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's uid (empty when the Event does not say).
    pub uid: String,
    /// What the CNI refused.
    pub refusal: SandboxRefusal,
    /// How many times kubelet reported it (the Event's count).
    pub count: u64,
    /// kubelet's whole message, on one line; cut only beyond
    /// [`SandboxFailure::MESSAGE_MAX`] (text output quotes an excerpt of it).
    pub message: String,
}

impl SandboxFailure {
    /// The longest message kept: a safety cap far above kubelet's messages
    /// (the longest real one seen is ~430 bytes), so the JSON carries them whole.
    pub const MESSAGE_MAX: usize = 4096;

    /// Whether this failure is about `pod` (by uid where both know it).
    pub fn is_about(&self, pod: &Pod) -> bool {
        self.namespace == pod.namespace
            && self.pod == pod.name
            && (self.uid.is_empty() || pod.uid.is_empty() || self.uid == pod.uid)
    }
}

/// `pods` with, for each pod that has no address yet, the address its
/// sandbox was refused as already in use (at most one per family): such a pod
/// shows no IP anywhere else when Cilium's own IPAM gave it the address, or
/// it asked Calico's IPAM for it.
pub fn with_refused_addresses(pods: &[Pod], failures: &[SandboxFailure]) -> Vec<Pod> {
    pods.iter()
        .map(|p| {
            let mut p = p.clone();
            if !p.ips.is_empty() {
                return p;
            }
            for f in failures {
                if let (true, Some(ip)) = (f.is_about(&p), f.refusal.refused_address())
                    && !p.ips.iter().any(|x| x.ip.is_ipv4() == ip.is_ipv4())
                {
                    p.ips.push(PodIp {
                        ip,
                        source: IpSource::Event,
                    });
                }
            }
            p
        })
        .collect()
}

/// This node's Node as detection needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.podCIDRs` (or `spec.podCIDR`).
    pub pod_cidrs: Vec<IpNet>,
    /// `status.allocatable.pods`: how many pods kubelet accepts.
    pub allocatable_pods: Option<u64>,
    /// ipshadow's own condition on it, as last written (`PodIPsShadowed`).
    pub shadowed: Option<ConditionSeen>,
    /// `status.addresses` of type InternalIP and ExternalIP: every Node of a
    /// list or a file (`audit`, `check`), the agent's own.
    pub addresses: Vec<NodeAddress>,
    /// It carries a `projectcalico.org/` annotation: Calico keeps its node
    /// there (the Kubernetes datastore), so a tunnel address it does not
    /// announce is not Calico's now. Never read by the agent's own watch.
    pub calico_annotated: bool,
}

/// One of a Node's own addresses (`status.addresses`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeAddress {
    /// The address.
    pub ip: IpAddr,
    /// Its `type`: `InternalIP` or `ExternalIP`.
    pub kind: &'static str,
}

/// A Node condition as the Node shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConditionSeen {
    /// `status == "True"`.
    pub status: bool,
    /// `reason`.
    pub reason: String,
    /// `message`.
    pub message: String,
    /// `lastTransitionTime`, as the API server printed it.
    pub last_transition: Option<String>,
}

/// What detection reads of Cilium's configuration (the `cilium-config` ConfigMap).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CiliumConfig {
    /// `ipam`: the IPAM mode (`cluster-pool`, `kubernetes`, `multi-pool`, `eni`, …).
    pub ipam: String,
    /// `cluster-pool-ipv4-cidr` and `cluster-pool-ipv6-cidr` (several per family, space-separated).
    pub cluster_pool: Vec<IpNet>,
    /// `cluster-pool-ipv4-mask-size`: the prefix length of each node's range.
    pub ipv4_mask_size: Option<u8>,
    /// `cluster-pool-ipv6-mask-size`, likewise.
    pub ipv6_mask_size: Option<u8>,
}
