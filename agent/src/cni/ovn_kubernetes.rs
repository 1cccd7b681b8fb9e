//! ovn-kubernetes: its management port, the host's leg in the node's subnet
//! (`.2`), and its default join subnets.

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
