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

/// Whether Calico runs on the node whose devices are `links`: a Calico
/// tunnel device, or a pod veth named as Calico names them (`cali` and 11
/// hex digits of a hash; BGP mode has no tunnel device).
pub fn calico_runs_here(links: &[super::Link]) -> bool {
    links.iter().any(|l| {
        CALICO_TUNNEL_DEVICES.contains(&l.name.as_str())
            || l.name
                .strip_prefix("cali")
                .is_some_and(|h| h.len() == 11 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    })
}

/// NodeLocal DNSCache's dummy device: on every node it holds the cache's
/// listen address (`-localip`, 169.254.20.10 by default) and, with
/// kube-proxy in iptables mode, the kube-dns ClusterIP
/// (kubernetes/website PR#18716).
pub const NODE_LOCAL_DNS: &str = "nodelocaldns";

/// Devices whose address is the pods' gateway: the bridge plugin's (flannel's
/// `cni0`), kube-router's, kubenet's bridges, Antrea's OVS gateway port.
pub const BRIDGE_DEVICES: [&str; 4] = ["cni0", "kube-bridge", "cbr0", "antrea-gw0"];

/// ovn-kubernetes' management port: the host's leg in the node's subnet
/// (named `k8s-<node>` before 2020: [`is_legacy_management_port`]).
pub const OVN_MANAGEMENT_PORT: &str = "ovn-k8s-mp0";

/// ovn-kubernetes' default join subnets (config.go `V4JoinSubnet`, `V6JoinSubnet`).
pub const OVN_DEFAULT_JOIN: [&str; 2] = ["100.64.0.0/16", "fd98::/64"];

/// Whether `device` is ovn-kubernetes' management port as releases before
/// `ovn-k8s-mp0` named it on `node` (ovn-kubernetes#698): `k8s-` and the
/// node's name lower-cased, cut to 11 bytes to fit IFNAMSIZ
/// (`GetLegacyK8sMgmtIntfName` in go-controller/pkg/util). Only this node's
/// name is matched: another `k8s-…` device is nobody's gateway.
fn is_legacy_management_port(device: &str, node: &str) -> bool {
    let Some(rest) = device.strip_prefix("k8s-") else {
        return false;
    };
    let lower = node.to_ascii_lowercase();
    // Node names are DNS names (ASCII): a byte cut is a character cut.
    let cut = lower.get(..11).unwrap_or(&lower);
    !cut.is_empty() && rest == cut
}

impl Role {
    /// What an address the kernel shows on `device` is to `node`, where
    /// Cilium's router device is `router_device`.
    pub fn of_device(device: &str, router_device: &str, node: &str) -> Self {
        if device == router_device {
            Self::Router
        } else if CALICO_TUNNEL_DEVICES.contains(&device) {
            Self::Tunnel
        } else if BRIDGE_DEVICES.contains(&device) {
            Self::Gateway
        } else if device == OVN_MANAGEMENT_PORT || is_legacy_management_port(device, node) {
            Self::ManagementPort
        } else {
            Self::Local
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

    #[test]
    fn calico_runs_where_its_tunnel_or_a_veth_named_as_it_names_them_is() {
        let links = |names: &[&str]| -> Vec<crate::inventory::Link> {
            names
                .iter()
                .zip(1..)
                .map(|(n, index)| crate::inventory::Link {
                    index,
                    name: (*n).to_owned(),
                })
                .collect()
        };
        // BGP mode: only pods' veths (a real one, from the corpus's
        // sandbox/event-messages-other-cnis.json).
        assert!(calico_runs_here(&links(&["eth0", "cali05ad595351c"])));
        assert!(calico_runs_here(&links(&["eth0", "vxlan.calico"])));
        assert!(calico_runs_here(&links(&["tunl0"])));
        for other in [
            &["eth0", "cilium_host", "lxc1234567890a"][..],
            &["calico"],
            &["cali1c5b2b6e4a9x"],
            &["caliXYZ5b2b6e4a"],
            &["cni0", "veth1c5b2b6e"],
        ] {
            assert!(!calico_runs_here(&links(other)), "{other:?}");
        }
    }
}
