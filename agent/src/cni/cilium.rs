//! Cilium: its router device and its health endpoint's veth. Its Ingress IP
//! is held by its endpoint manager alone, on no device.

use super::{Cni, Device, Holds, Name};

/// Cilium.
pub const CILIUM: Cni = Cni {
    name: "Cilium",
    devices: &[
        Device {
            name: Name::Is(crate::inventory::DEFAULT_ROUTER_DEVICE),
            holds: Holds::Router,
            marks: false,
            fix: None,
            about: "Cilium's router device, the default of `--router-device`",
        },
        Device {
            name: Name::Is("lxc_health"),
            holds: Holds::NodeEndpoint,
            marks: false,
            fix: None,
            about: "the health endpoint's veth: its namespace holds the health IP, in the pod range",
        },
    ],
};
