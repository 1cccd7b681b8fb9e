//! kube-ovn: its node port, `ovn0`, the host's leg in the join subnet.

mod ip;
mod lean;
mod subnet;

pub use self::subnet::{parse_range, subnet};
pub(crate) use self::{
    ip::kube_ovn_ip,
    lean::{LeanIp, LeanSubnet},
};
use super::{Cni, Device, Holds, Name};

/// kube-ovn's pod annotation naming the Subnet a pod's address came from.
pub(crate) const LOGICAL_SWITCH: &str = "ovn.kubernetes.io/logical_switch";

/// kube-ovn.
pub const KUBE_OVN: Cni = Cni {
    name: "kube-ovn",
    devices: &[Device {
        name: Name::Is("ovn0"),
        holds: Holds::NodeEndpoint,
        marks: false,
        fix: None,
        about: "the node's port in the join subnet; where it is a veth, the namespace behind \
                it is the node's",
    }],
};
