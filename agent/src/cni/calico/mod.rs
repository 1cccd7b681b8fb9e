//! Calico: its tunnel devices, each holding one address of the node's IPAM
//! block that no pod may be given, and its pods' veths (BGP mode has no
//! tunnel device).

mod ipam;
mod lean;

pub(crate) use self::{
    ipam::{ip_pool, ipam_block},
    lean::{LeanIpPool, LeanIpamBlock},
};
use std::net::IpAddr;

use ipnet::IpNet;

use ring::digest::{SHA1_FOR_LEGACY_USE_ONLY, digest};

use super::{Cni, Device, Holds, Name};
use crate::inventory::{
    Inventory, IpSource, Link, SandboxRefusal,
    ip_text::{parse_cidr, parse_ip},
};

/// A pod's host veth: `cali` and 11 hex digits of a hash ([`pod_veth`]).
pub const POD_VETH: Name = Name::Hashed("cali", 11);

/// The host veth name Calico gives the pod `namespace/name`: `cali` and the
/// first 11 hex digits of the SHA-1 of `namespace.name` (`VethNameForWorkload`
/// in Calico's CNI plugin). A cross-check of which pod a namespace is,
/// beside its addresses.
#[must_use]
pub fn pod_veth(namespace: &str, name: &str) -> String {
    use std::fmt::Write as _;
    let hash = digest(
        &SHA1_FOR_LEGACY_USE_ONLY,
        format!("{namespace}.{name}").as_bytes(),
    );
    let hex = hash.as_ref().iter().fold(String::new(), |mut h, b| {
        let _ = write!(h, "{b:02x}");
        h
    });
    format!("cali{}", &hex[..11])
}

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
            name: POD_VETH,
            holds: Holds::NoAddress,
            marks: true,
            fix: None,
            about: "a pod's veth, `cali` and 11 hex digits of a hash",
        },
    ],
};

/// Calico's IPAM out of addresses or blocks (libcalico-go `ipam.go`; the CNI
/// plugin's "Unable to autoassign an address - pools are likely exhausted").
const EXHAUSTED: [&str; 5] = [
    "no ips available in pools",
    "per host block limit",
    "blocks reached for this node",
    "pools are likely exhausted",
    "no more free affine blocks",
];
/// Calico's IPAM refusing the address asked for (libcalico-go's error
/// `resource already exists: <ip>`).
const ASSIGNED: &str = "resource already exists: ";
/// Calico's route refusal before cni-plugin PR#358/#406: "failed to add route
/// (Dst: <cidr>, …, Iface: <its own cali…>): file exists", earlier "failed to
/// add route file exists".
const ROUTE_ADD: &str = "failed to add route ";

/// Calico's (`dataplane_linux.go`: "route (…, Dst: <cidr>, …) already exists
/// for an interface other than '<cali…>'").
const ROUTE_TAKEN: &str = " already exists for an interface other than";

/// Calico's refusals: its IPAM's (out of addresses, an address assigned
/// already) and its routes' (today's and the older wordings).
pub(super) fn refusal(text: &str, lower: &str) -> Option<SandboxRefusal> {
    if EXHAUSTED.iter().any(|w| lower.contains(w)) {
        return Some(SandboxRefusal::PoolsExhausted);
    }
    if let Some(at) = lower.find(ROUTE_TAKEN) {
        return Some(SandboxRefusal::HostRouteTaken {
            dst: route_dst(&text[..at]),
            holder: route_iface(&text[at..]),
        });
    }
    // Only Calico's shapes: others say "failed to add route '…'", "… to …".
    if let Some(at) = lower.find(ROUTE_ADD).map(|at| at + ROUTE_ADD.len())
        && (lower[at..].starts_with("file exists")
            || lower[at..].starts_with("(dst: ") && lower[at..].contains("): file exists"))
    {
        // The older wording's `Iface` is the pod's own new veth, not a holder.
        let dst = route_dst(&text[at..]);
        return Some(SandboxRefusal::HostRouteTaken { dst, holder: None });
    }
    let at = lower.find(ASSIGNED)?;
    let word = text[at + ASSIGNED.len()..].split(' ').next()?;
    parse_ip(word.trim_end_matches([':', ',', ';', '"', '.'])).map(SandboxRefusal::AddressAssigned)
}

/// The `Dst` of the last route Calico names in `head`.
fn route_dst(head: &str) -> Option<IpAddr> {
    let lower = head.to_ascii_lowercase();
    let at = lower.rfind("dst: ")?;
    let dst = head[at + 5..].split([',', ')', ' ']).next()?;
    parse_cidr(dst).map(|c| c.ip).or_else(|| parse_ip(dst))
}

/// The `Iface` of the route Calico found in the way (after its words).
fn route_iface(tail: &str) -> Option<String> {
    let lower = tail.to_ascii_lowercase();
    let at = lower.find("iface: ")?;
    let name = tail[at + 7..].split([',', ')', ' ']).next()?;
    super::is_interface_name(name).then(|| name.to_owned())
}

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

/// The annotations calico-node writes on its Node with the address of each
/// tunnel device (bare IPs; calico's felix/fv/infrastructure/infra_k8s.go sets
/// the same five), and whether each is IPv6.
pub(crate) const NODE_ANNOTATIONS: [(&str, bool); 5] = [
    ("projectcalico.org/IPv4IPIPTunnelAddr", false),
    ("projectcalico.org/IPv4VXLANTunnelAddr", false),
    ("projectcalico.org/IPv6VXLANTunnelAddr", true),
    ("projectcalico.org/IPv4WireguardInterfaceAddr", false),
    ("projectcalico.org/IPv6WireguardInterfaceAddr", true),
];
