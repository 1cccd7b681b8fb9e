//! kube-proxy in IPVS mode: its dummy device binds every Service's cluster,
//! external and load-balancer IPs on every node.

use super::{Cni, Device, Holds, Name};

/// kube-proxy.
pub const KUBE_PROXY: Cni = Cni {
    name: "kube-proxy",
    devices: &[Device {
        name: Name::Is(DEVICE),
        holds: Holds::ServiceAddresses,
        marks: false,
        fix: Some(
            " (kube-proxy in IPVS mode puts every Service's ClusterIP and external IPs there: the \
             pod range and the Service range overlap)",
        ),
        about: "IPVS mode binds every Service's cluster, external and load-balancer IPs there",
    }],
};

/// The device IPVS mode binds Services' addresses on.
pub const DEVICE: &str = "kube-ipvs0";
