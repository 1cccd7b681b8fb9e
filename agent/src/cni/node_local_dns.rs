//! NodeLocal DNSCache: its dummy device holds the cache's listen address on
//! every node (`-localip`, 169.254.20.10 by default) and, with kube-proxy in
//! iptables mode, the kube-dns ClusterIP (kubernetes/website PR#18716).

use super::{Cni, Device, Holds, Name};

/// NodeLocal DNSCache.
pub const NODE_LOCAL_DNS: Cni = Cni {
    name: "NodeLocal DNSCache",
    devices: &[Device {
        name: Name::Is(DEVICE),
        holds: Holds::NodeLocalDns,
        marks: false,
        fix: Some(
            " (NodeLocal DNSCache binds it on every node: give node-local-dns a -localip outside \
             every pod range, 169.254.20.10 by default, fd00::10 for IPv6; for the kube-dns \
             ClusterIP, the Service range overlaps the pod range)",
        ),
        about: "the cache's `-localip` and, with kube-proxy in iptables mode, the kube-dns ClusterIP",
    }],
};

/// Its device.
pub const DEVICE: &str = "nodelocaldns";
