//! Antrea (antrea-io/antrea, read at fc70f2bb): its host gateway holds the
//! first address of the node's podCIDR (antrea PR#971, `gwIP :=
//! NextIP(subnetID)`); its Egress feature binds Egress IPs from an
//! ExternalIPPool on a dummy device, or on a VLAN sub-interface for a pool
//! with a VLAN (`egressDummyDevice`, `vlanInterfacePrefix` in
//! pkg/agent/ipassigner).

use super::{Cni, Device, Holds, Name};

/// What puts an Egress IP on the node, for the fix of a pod on one.
const EGRESS_FIX: &str = " (Antrea binds its Egress IPs there, from an ExternalIPPool: the pool's \
                          ipRanges overlap a pod range; move them out of every pod range, then \
                          delete the pod)";

/// Antrea.
pub const ANTREA: Cni = Cni {
    name: "Antrea",
    devices: &[
        Device {
            name: Name::Is("antrea-gw0"),
            holds: Holds::Gateway,
            marks: true,
            fix: None,
            about: "the host gateway (`hostGateway`): the first address of the node's podCIDR",
        },
        Device {
            name: Name::Is("antrea-tun0"),
            holds: Holds::NoAddress,
            marks: true,
            fix: None,
            about: "the tunnel port in encap mode",
        },
        Device {
            name: Name::Is("antrea-egress0"),
            holds: Holds::Assigned,
            marks: false,
            fix: Some(EGRESS_FIX),
            about: "Egress IPs this node holds, from an ExternalIPPool",
        },
        Device {
            name: Name::Prefix("antrea-ext."),
            holds: Holds::Assigned,
            marks: false,
            fix: Some(EGRESS_FIX),
            about: "Egress IPs of an ExternalIPPool with a VLAN, on its VLAN sub-interface",
        },
    ],
};
