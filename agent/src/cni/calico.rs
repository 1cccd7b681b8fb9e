//! Calico: its tunnel devices, each holding one address of the node's IPAM
//! block that no pod may be given, and its pods' veths (BGP mode has no
//! tunnel device).

use super::{Cni, Device, Holds, Name};

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
