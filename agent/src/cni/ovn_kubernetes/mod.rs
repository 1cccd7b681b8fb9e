//! ovn-kubernetes: its management port, the host's leg in the node's subnet
//! (`.2`), its default join subnets, and its internal subnets (join, transit,
//! masquerade) as its Node annotations tell them, for the address plan.

pub mod config;
mod node_subnets;
mod router_ports;

pub(crate) use self::{
    node_subnets::add_node_subnets,
    router_ports::{KEYS, add_router_ports},
};
use super::{Cni, Device, Holds, Name};

/// ovn-kubernetes.
pub const OVN_KUBERNETES: Cni = Cni {
    name: "ovn-kubernetes",
    devices: &[
        Device {
            name: Name::Is(MANAGEMENT_PORT),
            holds: Holds::ManagementPort,
            marks: true,
            fix: None,
            about: "`.2` of the node's subnet (`GetNodeManagementIfAddr`)",
        },
        Device {
            name: Name::LegacyOvnManagementPort,
            holds: Holds::ManagementPort,
            marks: false,
            fix: None,
            about: "the management port in releases before 2020 (ovn-kubernetes#698)",
        },
    ],
};

/// ovn-kubernetes' management port.
pub const MANAGEMENT_PORT: &str = "ovn-k8s-mp0";

/// ovn-kubernetes' default join subnets (config.go `V4JoinSubnet`, `V6JoinSubnet`).
pub const DEFAULT_JOIN: [&str; 2] = ["100.64.0.0/16", "fd98::/64"];

/// The node's subnets per network, the default network's its pod ranges:
/// `{"default":"10.128.0.0/23"}` before ovn-kubernetes wrote lists,
/// `{"default":["10.128.0.0/23","fd01:0:0:1::/64"]}` since; other keys are
/// user-defined networks, whose addresses are not the host's.
pub const NODE_SUBNETS: &str = "k8s.ovn.org/node-subnets";
/// The join address, one network (releases before 2024).
pub const LRP_IFADDR: &str = "k8s.ovn.org/node-gateway-router-lrp-ifaddr";
/// The join address per network (2024 to PR#6772).
pub const LRP_IFADDRS: &str = "k8s.ovn.org/node-gateway-router-lrp-ifaddrs";
/// The transit switch port's address (interconnect).
pub const TRANSIT_IFADDR: &str = "k8s.ovn.org/node-transit-switch-port-ifaddr";
/// The node's id, set by cluster-manager.
pub const NODE_ID: &str = "k8s.ovn.org/node-id";
/// The masquerade subnet the node is configured with
/// (go-controller/pkg/util/node_annotations.go `OvnNodeMasqCIDR`).
pub const MASQUERADE_SUBNET: &str = "k8s.ovn.org/node-masquerade-subnet";

/// One of ovn-kubernetes' internal subnets: addresses it gives its own
/// routers and the host, never a pod, a Service or a node (config.go: its
/// flags, INI keys and defaults, read at 6c366bb4).
#[derive(Debug, PartialEq, Eq)]
pub struct Internal {
    /// Its name, for messages.
    pub name: &'static str,
    /// The Node annotations whose CIDRs lie in it (the CIDR's prefix is the
    /// subnet's).
    pub annotations: &'static [&'static str],
    /// How to move it, upstream and on OpenShift (the IPv4 names; IPv6's
    /// say `v6`). OpenShift's field is named by its parent only: notes
    /// outside kube-ovn never say "Subnet", the name of kube-ovn's kind.
    pub knob: &'static str,
}

/// The join subnet (gateway routers' ports; 100.64.0.0/16, fd98::/64):
/// `--gateway-v4-join-subnet`, `--gateway-v6-join-subnet` (`[gateway]
/// v4-join-subnet` of the config file); OpenShift's `internalJoinSubnet`
/// (`v4InternalSubnet` in older releases).
pub const JOIN: Internal = Internal {
    name: "join subnet",
    annotations: &[LRP_IFADDR, LRP_IFADDRS, NODE_ID],
    knob: "ovnkube --gateway-v4-join-subnet (OpenShift: \
           networks.operator.openshift.io cluster, ovnKubernetesConfig.ipv4)",
};

/// The transit switch subnet of interconnect (100.88.0.0/16, fd97::/64):
/// `--cluster-manager-v4-transit-switch-subnet` and `-v6-` (renamed
/// `--cluster-manager-v4-transit-subnet` in 2025-10); OpenShift's
/// `internalTransitSwitchSubnet`.
pub const TRANSIT: Internal = Internal {
    name: "transit switch subnet",
    annotations: &[TRANSIT_IFADDR],
    knob: "ovnkube --cluster-manager-v4-transit-switch-subnet (OpenShift: \
           networks.operator.openshift.io cluster, ovnKubernetesConfig.ipv4)",
};

/// The masquerade subnet (169.254.169.0/29 and fd69::/125; 169.254.0.0/17
/// and fd69::/112 in newer releases): `--gateway-v4-masquerade-subnet`,
/// `-v6-`; OpenShift's `gatewayConfig.ipv4.internalMasqueradeSubnet`.
pub const MASQUERADE: Internal = Internal {
    name: "masquerade subnet",
    annotations: &[MASQUERADE_SUBNET],
    knob: "ovnkube --gateway-v4-masquerade-subnet (OpenShift: \
           networks.operator.openshift.io cluster, gatewayConfig.ipv4)",
};

/// The internal subnet a field holds (a Node annotation's CIDR lies in it,
/// a key of the config file names it), if any.
#[must_use]
pub fn internal_of(field: &str) -> Option<&'static Internal> {
    [&JOIN, &TRANSIT, &MASQUERADE]
        .into_iter()
        .find(|i| i.annotations.contains(&field) || config::fields_of(i).any(|f| f == field))
}

/// The key ranges of one internal subnet share (`Planned::shared`): however
/// many records tell it, it is one subnet.
#[must_use]
pub fn shared(internal: &Internal) -> String {
    format!("ovn-kubernetes {}", internal.name)
}
