//! The kinds of a node's own findings: its allocator and Cilium's configuration.

use crate::detect::kind::{Alert, Count, Spec};

/// The node's pod allocator had no address left for a pod.
pub(in crate::detect) const EXHAUSTION: Spec = Spec::node(
    "PodIPExhaustion",
    "the node's pod allocator had no address left for a pod",
    Count::IpamProblems,
    Alert::Named("IPShadowPodIPExhaustion"),
);

/// Latent: the node's pod range holds fewer usable addresses than kubelet accepts pods.
pub(in crate::detect) const CAPACITY: Spec = Spec::node(
    "PodIPCapacityShortfall",
    "latent: the node's pod range holds fewer usable addresses than kubelet accepts pods",
    Count::IpamProblems,
    Alert::Named("IPShadowPodIPCapacityShortfall"),
);

/// cilium-operator could not allocate for the node.
pub(in crate::detect) const OPERATOR_ERROR: Spec = Spec::node(
    "CiliumIPAMError",
    "cilium-operator could not allocate for the node (status.ipam.operator-status.error)",
    Count::IpamProblems,
    Alert::Named("IPShadowCiliumIPAMError"),
);

/// Cilium runs cluster-pool, but the node keeps a podCIDR outside every pool.
pub(in crate::detect) const MIGRATION_STUCK: Spec = Spec::node(
    "IPAMMigrationStuck",
    "Cilium runs cluster-pool, but the node keeps a podCIDR outside every pool",
    Count::IpamProblems,
    Alert::Named("IPShadowIPAMMigrationStuck"),
);

/// The node's Cilium Ingress IP lies outside every Subnet kube-ovn masquerades.
pub(in crate::detect) const NOT_MASQUERADED: Spec = Spec::node(
    "IngressIPNotMasqueraded",
    "the node's Cilium Ingress IP lies outside every Subnet kube-ovn masquerades",
    Count::IpamProblems,
    Alert::Named("IPShadowIngressIPNotMasqueraded"),
);

/// Latent: Cilium's cluster pool has room for no more nodes than the cluster has.
pub(in crate::detect) const POOL_NEARLY_FULL: Spec = Spec::node(
    "ClusterPoolNearlyFull",
    "latent: Cilium's cluster pool has room for no more nodes than the cluster has",
    Count::IpamProblems,
    Alert::Named("IPShadowClusterPoolNearlyFull"),
);
