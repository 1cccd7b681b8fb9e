//! What each CNI, and each other component that binds addresses on a node,
//! holds there: one file per CNI declares its devices ([`Cni`]), and [`ALL`]
//! lists them. The rest of the agent asks here what a device is ([`device`],
//! [`holds`], [`fix`], [`Role::of_device`]) and never names a CNI's device
//! itself. Between the data (`inventory`) and detection: it reads the one and
//! is read by the other.
//!
//! Adding a CNI: docs/architecture.md, "Adding a CNI".

pub mod annotations;
pub mod antrea;
pub mod bridge;
pub mod calico;
pub mod cilium;
pub mod host_local;
pub mod kube_ovn;
pub mod kube_proxy;
pub mod kube_router;
pub mod kube_vip;
pub mod kubernetes;
pub mod metallb;
pub mod multus;
pub mod node_local_dns;
pub mod ovn_kubernetes;
pub mod plan;
pub mod read;

use std::fmt::Write as _;

use crate::inventory::{Role, SandboxRefusal};

/// Every CNI and address-binding component the agent knows, in the order a
/// device is looked up (the first declaration naming it wins).
pub const ALL: [&Cni; 9] = [
    &cilium::CILIUM,
    &calico::CALICO,
    &ovn_kubernetes::OVN_KUBERNETES,
    &kube_ovn::KUBE_OVN,
    &bridge::BRIDGE,
    &kube_router::KUBE_ROUTER,
    &antrea::ANTREA,
    &kube_proxy::KUBE_PROXY,
    &node_local_dns::NODE_LOCAL_DNS,
];

/// One CNI or component: its name and the devices it makes on a node.
#[derive(Debug)]
pub struct Cni {
    /// Its name, as users call it (`Calico`, `kube-proxy`).
    pub name: &'static str,
    /// The devices it makes on the node.
    pub devices: &'static [Device],
}

/// A device a CNI makes and what its addresses are.
#[derive(Debug)]
pub struct Device {
    /// Which devices this is.
    pub name: Name,
    /// What an address on it is.
    pub holds: Holds,
    /// Whether the device's presence means the CNI runs on the node.
    pub marks: bool,
    /// What put a pod's address there and how to take it off, for the fix
    /// of a collision: " (…)", appended to the device's name.
    pub fix: Option<&'static str>,
    /// What the docs say it is, and where that is known from.
    pub about: &'static str,
}

/// How a device is named.
#[derive(Clone, Copy, Debug)]
pub enum Name {
    /// Exactly this name.
    Is(&'static str),
    /// This prefix and a suffix of its own (a VLAN number, say).
    Prefix(&'static str),
    /// This prefix and this many hex digits (a pod veth named from a hash).
    Hashed(&'static str, usize),
    /// `k8s-` and the node's name lower-cased, cut to 11 bytes to fit
    /// IFNAMSIZ: ovn-kubernetes' management port before `ovn-k8s-mp0`
    /// (ovn-kubernetes#698, `GetLegacyK8sMgmtIntfName` in go-controller/pkg/util).
    /// Only this node's name is matched: another `k8s-…` device is nobody's
    /// gateway.
    LegacyOvnManagementPort,
}

impl Name {
    /// Whether `device` on `node` has this name.
    #[must_use]
    pub fn matches(self, device: &str, node: &str) -> bool {
        match self {
            Self::Is(n) => device == n,
            Self::Prefix(p) => device.len() > p.len() && device.starts_with(p),
            Self::Hashed(p, len) => device
                .strip_prefix(p)
                .is_some_and(|h| h.len() == len && h.bytes().all(|b| b.is_ascii_hexdigit())),
            Self::LegacyOvnManagementPort => {
                let Some(rest) = device.strip_prefix("k8s-") else {
                    return false;
                };
                let lower = node.to_ascii_lowercase();
                // Node names are DNS names (ASCII): a byte cut is a character cut.
                let cut = lower.get(..11).unwrap_or(&lower);
                !cut.is_empty() && rest == cut
            }
        }
    }

    /// The name as the docs show it.
    #[must_use]
    pub fn shown(self) -> String {
        match self {
            Self::Is(n) => format!("`{n}`"),
            Self::Prefix(p) => format!("`{p}…`"),
            Self::Hashed(p, len) => format!("`{p}` + {len} hex digits"),
            Self::LegacyOvnManagementPort => "`k8s-<node>` (cut to 15 bytes)".to_owned(),
        }
    }
}

/// What an address on a device is to the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    /// Cilium's router IP. The router is the device `--router-device` names
    /// (this one by default), whatever its name.
    Router,
    /// A tunnel's address, out of the pod range (role `tunnel`).
    Tunnel,
    /// The pods' gateway: a bridge's address in the node's pod range
    /// (role `gateway`); a range it routes outside the node's podCIDRs
    /// is a previous podCIDR's.
    Gateway,
    /// ovn-kubernetes' management port (role `management-port`).
    ManagementPort,
    /// Services' addresses only, bound on every node: a tenant's choice.
    ServiceAddresses,
    /// NodeLocal DNSCache's listen address, the same on every node.
    NodeLocalDns,
    /// Addresses an allocator of its own hands to the node (egress IPs);
    /// an address of the node like any other (role `local`).
    Assigned,
    /// The node's own endpoint behind a veth (Cilium's health endpoint):
    /// the namespace behind it is no pod's.
    NodeEndpoint,
    /// No address of its own (a pod's veth, a tunnel port): it only tells
    /// the CNI runs here.
    NoAddress,
}

/// The declaration naming `device` on `node`, and its CNI.
#[must_use]
pub fn device(device: &str, node: &str) -> Option<(&'static Cni, &'static Device)> {
    ALL.iter()
        .flat_map(|c| c.devices.iter().map(move |d| (*c, d)))
        .find(|(_, d)| d.name.matches(device, node))
}

/// What put a pod's address on `device`, for the fix ([`Device::fix`]).
#[must_use]
pub fn fix(device: &str) -> Option<&'static str> {
    self::device(device, "").and_then(|(_, d)| d.fix)
}

/// Whether `device` holds what `holds` says (on any node: names that depend
/// on the node are not asked this way).
#[must_use]
pub fn holds(device: &str, holds: Holds) -> bool {
    self::device(device, "").is_some_and(|(_, d)| d.holds == holds)
}

impl Role {
    /// What an address the kernel shows on `device` is to `node`, where
    /// Cilium's router device is `router_device` (whatever its name).
    pub fn of_device(device: &str, router_device: &str, node: &str) -> Self {
        if device == router_device {
            return Self::Router;
        }
        match self::device(device, node).map(|(_, d)| d.holds) {
            Some(Holds::Tunnel) => Self::Tunnel,
            Some(Holds::Gateway) => Self::Gateway,
            Some(Holds::ManagementPort) => Self::ManagementPort,
            _ => Self::Local,
        }
    }
}

impl Cni {
    /// Whether it runs on the node whose devices are named `devices`: one of
    /// its marking devices is there.
    pub fn runs_on<'a>(&self, mut devices: impl Iterator<Item = &'a str>) -> bool {
        devices.any(|l| {
            self.devices
                .iter()
                .any(|d| d.marks && d.name.matches(l, ""))
        })
    }
}

/// The docs' table of every device: `cargo xtask docs` writes it into
/// docs/reference.md.
#[must_use]
pub fn markdown() -> String {
    let mut out = String::from("| CNI or component | device | holds | what |\n|---|---|---|---|\n");
    for c in ALL {
        for d in c.devices {
            let holds = match d.holds {
                Holds::Router => "the router IP (role `router`; `--router-device`)",
                Holds::Tunnel => "tunnel address (role `tunnel`)",
                Holds::Gateway => "the pods' gateway (role `gateway`)",
                Holds::ManagementPort => "management port (role `management-port`)",
                Holds::ServiceAddresses => "Services' addresses (a tenant's)",
                Holds::NodeLocalDns => "NodeLocal DNSCache's address",
                Holds::Assigned => "addresses its own allocator gives the node (role `local`)",
                Holds::NodeEndpoint => "the node's own endpoint, never a pod",
                Holds::NoAddress => "no address of its own",
            };
            let marks = if d.marks {
                "; tells it runs on the node"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "| {} | {} | {holds}{marks} | {} |",
                c.name,
                d.name.shown(),
                d.about.replace('|', "\\|").replace('\n', " ")
            );
        }
    }
    out
}

/// The readers of plugins' refusals, in the order they are asked: the
/// first that reads a message says whose it is. Cilium's address in use
/// before Calico's words (a Cilium message can quote them); Calico's
/// exhaustion before Cilium's ("range is full" is not only Cilium's).
const REFUSALS: [fn(&str, &str) -> Option<SandboxRefusal>; 5] = [
    cilium::in_use,
    calico::refusal,
    cilium::exhausted,
    host_local::refusal,
    bridge::refusal,
];

/// What `text` (one line, ASCII quotes) says a plugin refused, read only
/// where the words are that plugin's own
/// (`tests/corpus/realworld/sandbox/event-messages-other-cnis.json`,
/// `event-messages-issue39.json`): each plugin's file holds its wordings.
/// AWS VPC CNI's "failed to add host route: file exists" and the bridge
/// plugin's "could not add IP address to \"cni0\": file exists" have no
/// reading: left unread, not Calico's.
pub fn refusal(text: &str) -> Option<SandboxRefusal> {
    let lower = text.to_ascii_lowercase();
    if kubernetes::not_a_refusal(&lower) {
        return None;
    }
    REFUSALS.iter().find_map(|read| read(text, &lower))
}

/// Whether `name` reads as a Linux interface name (what a bridge's is).
pub(crate) fn is_interface_name(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests;
