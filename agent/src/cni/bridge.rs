//! The bridge plugin's bridges (flannel's `cni0`, kubenet's `cbr0`): the
//! bridge holds the pods' gateway, the first address of the node's podCIDR.

use super::{Cni, Device, Holds, Name};

/// The bridge plugin, as flannel and kubenet configure it.
pub const BRIDGE: Cni = Cni {
    name: "bridge plugin (flannel, kubenet)",
    devices: &[
        Device {
            name: Name::Is("cni0"),
            holds: Holds::Gateway,
            marks: false,
            fix: None,
            about: "the bridge plugin's default bridge (flannel's)",
        },
        Device {
            name: Name::Is("cbr0"),
            holds: Holds::Gateway,
            marks: false,
            fix: None,
            about: "kubenet's bridge",
        },
    ],
};
