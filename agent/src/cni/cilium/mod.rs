//! Cilium: its router device and its health endpoint's veth (its Ingress IP
//! is held by its endpoint manager alone, on no device), and its pools of
//! load-balancer and pod addresses.

mod config;
mod lean;
mod node;

pub use self::config::cilium_config;
pub(crate) use self::{lean::LeanCiliumNode, node::cilium_node};
use std::net::IpAddr;

use serde::Deserialize;

use super::{
    Cni, Device, Holds, Name,
    plan::{Records, ranges, spec, spec_ranges},
};
use crate::inventory::{
    Invalid, Planned, Purpose, Role, SandboxRefusal, Source, ip_text::parse_ip,
};

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

// Its refusals of a sandbox, read only where the words are Cilium's: an
// address in use needs one of Cilium's own words beside it (its CNI's
// `plugin type="cilium-cni"`, its API's `putEndpointIdInvalid`/
// `postIpamFailure`, "local cilium agent"), since DANM, Whereabouts,
// Spiderpool and docker's hostPort say "already in use" too; running out of
// addresses is read from Cilium's allocators' own phrases.

/// Words only Cilium's CNI plugin, agent API or operator put in a message.
const WORDS: [&str; 5] = [
    "cilium-cni",
    "putendpointid",
    "postipamfailure",
    "local cilium agent",
    "cilium operator",
];

/// Cilium's allocators out of addresses: host-scope; the CRD allocator (ENI,
/// Azure, AlibabaCloud) before and after cilium PR#42369 (and its suffix);
/// multi-pool and 1.20's ENI ("all CIDR ranges" / "all pod CIDR ranges are
/// exhausted"). "No more IPs availabl" arrives cut short (kops).
const EXHAUSTED: [&str; 5] = [
    "range is full",
    "no more ips",
    "cidr ranges are exhausted",
    "no ips currently available on the node",
    "once cilium operator allocates more ips",
];

/// Cilium's refusal of an address in use.
const IN_USE: &str = " is already in use";

/// An address in use, in Cilium's words (`lower`: `text` lowercased).
pub(super) fn in_use(text: &str, lower: &str) -> Option<SandboxRefusal> {
    let at = lower.rfind(IN_USE)?;
    if !WORDS.iter().any(|w| lower.contains(w)) {
        return None;
    }
    address_before(&text[..at]).map(SandboxRefusal::AddressInUse)
}

/// Out of addresses, in Cilium's allocators' words.
pub(super) fn exhausted(_: &str, lower: &str) -> Option<SandboxRefusal> {
    EXHAUSTED
        .iter()
        .any(|w| lower.contains(w))
        .then_some(SandboxRefusal::NoAddressLeft)
}

/// The address in `… IP <addr>` at the end of `head`: the word before it must
/// be `IP`, the address may carry Cilium's `ipv4:`/`ipv6:` prefix and quotes.
fn address_before(head: &str) -> Option<IpAddr> {
    let mut words = head.rsplit(' ');
    let addr = words
        .next()?
        .trim_matches(|c| matches!(c, '"' | '\'' | '`'));
    let ip_word = words.next()?.trim_start_matches(['"', '\'', '`']);
    if !ip_word.eq_ignore_ascii_case("ip") {
        return None;
    }
    let addr = ["ipv4:", "ipv6:", "IPv4:", "IPv6:"]
        .iter()
        .find_map(|p| addr.strip_prefix(p))
        .unwrap_or(addr);
    parse_ip(addr.trim_start_matches('[').trim_end_matches(']'))
}

/// Cilium's LB-IPAM pools: `spec.blocks` (`{cidr}` or `{start[, stop]}`),
/// `spec.cidrs` before 1.15; a `disabled` pool hands out nothing. Cilium
/// checks them against each other only.
pub const LB_POOLS: Records = Records {
    allocator: "Cilium LB-IPAM",
    group: "cilium.io",
    versions: &["v2", "v2alpha1"],
    kind: "CiliumLoadBalancerIPPool",
    plural: "ciliumloadbalancerippools",
    read: read_lb_pool,
    only: None,
};

/// Cilium's multi-pool IPAM pools: `spec.ipv4.cidrs` and `spec.ipv6.cidrs`,
/// strings (v2alpha1) or `{cidr}` objects (v2).
pub const POD_POOLS: Records = Records {
    allocator: "Cilium multi-pool IPAM",
    group: "cilium.io",
    versions: &["v2alpha1", "v2"],
    kind: "CiliumPodIPPool",
    plural: "ciliumpodippools",
    read: read_pod_pool,
    only: None,
};

#[derive(Default, Deserialize)]
#[serde(default)]
struct LbSpec {
    blocks: Vec<Block>,
    cidrs: Vec<Block>,
    disabled: bool,
}

#[derive(Deserialize)]
struct Block {
    cidr: Option<String>,
    start: Option<String>,
    stop: Option<String>,
}

#[derive(Deserialize)]
struct PodSpec {
    ipv4: Option<Family>,
    ipv6: Option<Family>,
}

#[derive(Deserialize)]
struct Family {
    #[serde(default)]
    cidrs: Vec<Cidr>,
}

/// `"10.0.0.0/16"` (v2alpha1) or `{"cidr": "10.0.0.0/16"}` (v2).
#[derive(Deserialize)]
#[serde(untagged)]
enum Cidr {
    Text(String),
    Object { cidr: String },
}

fn read_lb_pool(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    let Some((object, spec)) = spec::<LbSpec>(&LB_POOLS, json, bad) else {
        return Vec::new();
    };
    if spec.disabled {
        return Vec::new();
    }
    let field = if spec.blocks.is_empty() {
        "spec.cidrs"
    } else {
        "spec.blocks"
    };
    let texts =
        spec.blocks
            .iter()
            .chain(&spec.cidrs)
            .filter_map(|b| match (&b.cidr, &b.start, &b.stop) {
                (Some(c), _, _) => Some(c.clone()),
                (None, Some(s), Some(e)) => Some(format!("{s}-{e}")),
                (None, Some(s), None) => Some(s.clone()),
                // A stop with no start: named as no range.
                (None, None, Some(e)) => Some(format!("(no start)-{e}")),
                (None, None, None) => None,
            });
    ranges(&LB_POOLS, &object, field, Purpose::LoadBalancer, texts, bad)
}

fn read_pod_pool(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    let texts = |spec: PodSpec| {
        let cidrs = [spec.ipv4, spec.ipv6].into_iter().flatten();
        cidrs.flat_map(|f| f.cidrs).map(|c| match c {
            Cidr::Text(t) | Cidr::Object { cidr: t } => t,
        })
    };
    let field = "spec.ipv4/ipv6.cidrs";
    spec_ranges(&POD_POOLS, json, field, Purpose::Pods, bad, texts)
}

/// The annotation suffixes Cilium writes on a Node with `--annotate-k8s-node`,
/// after `network.cilium.io/` (or the legacy `io.cilium.network.`).
pub(crate) const NODE_ANNOTATIONS: [(&str, Role, bool); 6] = [
    ("ipv4-cilium-host", Role::Router, false),
    ("ipv6-cilium-host", Role::Router, true),
    ("ipv4-health-ip", Role::Health, false),
    ("ipv6-health-ip", Role::Health, true),
    // The capital I is Cilium's spelling.
    ("ipv4-Ingress-ip", Role::Ingress, false),
    ("ipv6-Ingress-ip", Role::Ingress, true),
];

/// Where Cilium's Node annotations start: today's and the legacy spelling.
pub(crate) const NODE_ANNOTATION_PREFIXES: [(&str, Source); 2] = [
    ("network.cilium.io/", Source::NodeAnnotation),
    ("io.cilium.network.", Source::LegacyNodeAnnotation),
];
