//! The devices that tell what an address is to the node that holds it: each
//! CNI names its own.

use super::Role;

/// Calico's tunnel devices: IPIP, VXLAN (v4, v6) and WireGuard (v4, v6). Each
/// holds one address of the node's IPAM block, which no pod may be given.
pub const CALICO_TUNNEL_DEVICES: [&str; 5] = [
    "tunl0",
    "vxlan.calico",
    "vxlan-v6.calico",
    "wireguard.cali",
    "wg-v6.cali",
];

/// Devices whose address is the pods' gateway: the bridge plugin's (flannel's
/// `cni0`), kube-router's, kubenet's bridges, Antrea's OVS gateway port.
pub const BRIDGE_DEVICES: [&str; 4] = ["cni0", "kube-bridge", "cbr0", "antrea-gw0"];

/// ovn-kubernetes' management port: the host's leg in the node's subnet
/// (named `k8s-<node>` before 2020, which is not recognised by name).
pub const OVN_MANAGEMENT_PORT: &str = "ovn-k8s-mp0";

impl Role {
    /// What an address the kernel shows on `device` is to the node, where
    /// Cilium's router device is `router_device`.
    pub fn of_device(device: &str, router_device: &str) -> Self {
        if device == router_device {
            Self::Router
        } else if CALICO_TUNNEL_DEVICES.contains(&device) {
            Self::Tunnel
        } else if BRIDGE_DEVICES.contains(&device) {
            Self::Gateway
        } else if device == OVN_MANAGEMENT_PORT {
            Self::ManagementPort
        } else {
            Self::Local
        }
    }
}
