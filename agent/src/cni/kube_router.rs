//! kube-router: its pod bridge, which holds `.1` of the node's podCIDR
//! (assigned lazily, kube-router#356), and its Service proxy's dummy device.

use super::{Cni, Device, Holds, Name};

/// kube-router.
pub const KUBE_ROUTER: Cni = Cni {
    name: "kube-router",
    devices: &[
        Device {
            name: Name::Is("kube-bridge"),
            holds: Holds::Gateway,
            marks: false,
            fix: None,
            about: "the pods' bridge",
        },
        Device {
            name: Name::Is("kube-dummy-if"),
            holds: Holds::ServiceAddresses,
            marks: false,
            fix: None,
            about: "its Service proxy binds every Service's cluster and external IPs there",
        },
    ],
};
