//! What an address on a device is to the node that holds it, from what each
//! CNI declares of its devices (`crate::cni`).

use super::Role;
use crate::cni::{self, Holds};

/// Whether Calico runs on the node whose devices are `links`: a Calico
/// tunnel device, or a pod veth named as Calico names them (BGP mode has no
/// tunnel device).
pub fn calico_runs_here(links: &[super::Link]) -> bool {
    cni::calico::CALICO.runs_on(links.iter().map(|l| l.name.as_str()))
}

impl Role {
    /// What an address the kernel shows on `device` is to `node`, where
    /// Cilium's router device is `router_device` (whatever its name).
    pub fn of_device(device: &str, router_device: &str, node: &str) -> Self {
        if device == router_device {
            return Self::Router;
        }
        match cni::device(device, node).map(|(_, d)| d.holds) {
            Some(Holds::Tunnel) => Self::Tunnel,
            Some(Holds::Gateway) => Self::Gateway,
            Some(Holds::ManagementPort) => Self::ManagementPort,
            _ => Self::Local,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ovn_kubernetes_old_management_port_is_named_for_its_own_node_only() {
        let cases = [
            // (device, node, role)
            ("ovn-k8s-mp0", "worker-1", Role::ManagementPort),
            ("k8s-worker-1", "worker-1", Role::ManagementPort),
            ("k8s-worker-1", "Worker-1", Role::ManagementPort),
            // ovn-kubernetes#698's node, cut to 11 bytes.
            (
                "k8s-ip-10-0-0-1",
                "ip-10-0-0-100.ec2.internal",
                Role::ManagementPort,
            ),
            ("k8s-worker-2", "worker-1", Role::Local),
            ("k8s-", "worker-1", Role::Local),
            ("k8s-worker-1x", "worker-1", Role::Local),
            (
                "k8s-ip-10-0-0-100",
                "ip-10-0-0-100.ec2.internal",
                Role::Local,
            ),
            ("tunl0", "worker-1", Role::Tunnel),
            ("cni0", "worker-1", Role::Gateway),
            ("cilium_host", "worker-1", Role::Router),
            ("eth0", "worker-1", Role::Local),
        ];
        for (device, node, role) in cases {
            assert_eq!(
                Role::of_device(device, "cilium_host", node),
                role,
                "{device} on {node}"
            );
        }
    }
}
