//! Calico: its tunnel devices, each holding one address of the node's IPAM
//! block that no pod may be given, and its pods' veths (BGP mode has no
//! tunnel device).

use std::net::IpAddr;

use ipnet::IpNet;

use super::{Cni, Device, Holds, Name};
use crate::inventory::{Inventory, IpSource, Link};

/// Calico.
pub const CALICO: Cni = Cni {
    name: "Calico",
    devices: &[
        tunnel("tunl0", "IPIP"),
        tunnel("vxlan.calico", "VXLAN"),
        tunnel("vxlan-v6.calico", "VXLAN (IPv6)"),
        tunnel("wireguard.cali", "WireGuard"),
        tunnel("wg-v6.cali", "WireGuard (IPv6)"),
        Device {
            name: Name::Hashed("cali", 11),
            holds: Holds::NoAddress,
            marks: true,
            fix: None,
            about: "a pod's veth, `cali` and 11 hex digits of a hash",
        },
    ],
};

const fn tunnel(name: &'static str, mode: &'static str) -> Device {
    Device {
        name: Name::Is(name),
        holds: Holds::Tunnel,
        marks: true,
        fix: None,
        about: mode,
    }
}

/// Whether Calico runs on the node whose devices are `links`: a Calico
/// tunnel device, or a pod veth named as Calico names them (BGP mode has no
/// tunnel device).
pub fn runs_here(links: &[Link]) -> bool {
    CALICO.runs_on(links.iter().map(|l| l.name.as_str()))
}

impl Inventory {
    /// Calico's pod ranges ([`CalicoIpam::pod_ranges`]) where its IPAM is
    /// seen in use ([`CalicoIpam::in_use`]): the blocks read (cluster-wide),
    /// or this node's addresses. Lazy: a caller that finds its address in the
    /// first pool reads no block.
    pub fn calico_pod_ranges(&self) -> impl Iterator<Item = IpNet> + '_ {
        let calico = &self.cluster.calico;
        let no_pools = calico.pools.is_empty() && calico.blocks().is_empty();
        (!no_pools && calico.in_use(self.given_by_calico()))
            .then(|| calico.pod_ranges())
            .into_iter()
            .flatten()
    }

    /// The addresses of this node that Calico's IPAM may have given: its
    /// pods' `status.podIPs` (not host-network pods', nor those of a pod
    /// whose default network is another plugin's), and its Calico tunnel
    /// devices' addresses (in IPIP and VXLAN modes, from a pool even on a
    /// node with no pod).
    fn given_by_calico(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.cluster
            .pods
            .iter()
            .filter(|p| {
                !p.host_network
                    && !p.default_network_elsewhere
                    && p.node.as_deref() == Some(self.node.as_str())
            })
            .flat_map(|p| p.ips.iter())
            .filter(|i| i.source == IpSource::Status)
            .map(|i| i.ip)
            .chain(
                self.host
                    .addresses
                    .iter()
                    .filter(|a| super::holds(&a.device, Holds::Tunnel))
                    .map(|a| a.ip),
            )
    }
}
