//! Each plugin's wording of a sandbox refusal, read only where the words are
//! that plugin's (`tests/corpus/realworld/sandbox/event-messages-other-cnis.json`).
//!
//! A refusal is Cilium's only when its wording is Cilium's: an address in use
//! needs one of Cilium's own words beside it (its CNI's `plugin
//! type="cilium-cni"`, its API's `putEndpointIdInvalid`/`postIpamFailure`, "local
//! cilium agent"), since DANM, Whereabouts, Spiderpool and docker's hostPort
//! say "already in use" too; running out of addresses is read from Cilium's
//! allocators' own phrases. host-local, Calico and the bridge plugin each have
//! phrases no other plugin uses (`sandbox/event-messages-issue39.json`: Calico's
//! older route wordings, its IPAM's). kube-apiserver's Service allocator says
//! "range is full" too, never of a sandbox. AWS VPC CNI's "failed to add host
//! route: file exists" and the bridge plugin's "could not add IP address to
//! \"cni0\": file exists" have no reading here: left unread, not Calico's.

use std::net::IpAddr;

use crate::inventory::{
    SandboxRefusal,
    ip_text::{parse_cidr, parse_ip},
};

/// Words only Cilium's CNI plugin, agent API or operator put in a message.
const CILIUM: [&str; 5] = [
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
const CILIUM_EXHAUSTED: [&str; 5] = [
    "range is full",
    "no more ips",
    "cidr ranges are exhausted",
    "no ips currently available on the node",
    "once cilium operator allocates more ips",
];

/// kube-apiserver's Service IP allocator ("failed to allocate a serviceIP:
/// range is full"): not a sandbox's refusal, whatever its words.
const SERVICE_ALLOCATOR: &str = "allocate a serviceip";

/// Calico's IPAM out of addresses or blocks (libcalico-go `ipam.go`; the CNI
/// plugin's "Unable to autoassign an address - pools are likely exhausted").
const CALICO_EXHAUSTED: [&str; 5] = [
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

/// Cilium's refusal of an address in use.
const IN_USE: &str = " is already in use";
/// host-local's (`allocator.go`), whatever plugin delegated to it.
const RANGE_SET: &str = "no ip addresses available in range set";
/// Calico's (`dataplane_linux.go`: "route (…, Dst: <cidr>, …) already exists
/// for an interface other than '<cali…>'").
const ROUTE_TAKEN: &str = " already exists for an interface other than";
/// The bridge plugin's (`bridge.go`: "%q already has an IP address different from %v").
const BRIDGE: &str = " already has an ip address different from ";

/// What `text` (one line, ASCII quotes) says a plugin refused, in its wording.
pub(super) fn refusal(text: &str) -> Option<SandboxRefusal> {
    let lower = text.to_ascii_lowercase();
    if lower.contains(SERVICE_ALLOCATOR) {
        return None;
    }
    if let Some(at) = lower.rfind(IN_USE) {
        // An address in use is Cilium's only beside Cilium's words.
        if CILIUM.iter().any(|w| lower.contains(w)) {
            return address_before(&text[..at]).map(SandboxRefusal::AddressInUse);
        }
    }
    if let Some(calico) = calico(text, &lower) {
        return Some(calico);
    }
    if CILIUM_EXHAUSTED.iter().any(|w| lower.contains(w)) {
        return Some(SandboxRefusal::NoAddressLeft);
    }
    if let Some(at) = lower.find(RANGE_SET) {
        return Some(SandboxRefusal::RangeSetFull(first_range(
            &text[at + RANGE_SET.len()..],
        )));
    }
    if let Some(at) = lower.find(BRIDGE) {
        let bridge = text[..at]
            .rsplit(' ')
            .next()
            .map(|w| w.trim_matches(['"', '\'']))
            .filter(|w| is_interface_name(w))
            .map(str::to_owned);
        let gateway = text[at + BRIDGE.len()..]
            .split(' ')
            .next()
            .and_then(|w| parse_cidr(w.trim_end_matches([',', '.', ';', '"'])))
            .and_then(|c| c.ifaddr());
        return Some(SandboxRefusal::BridgeAddressDiffers { bridge, gateway });
    }
    None
}

/// Calico's refusals: its IPAM's (out of addresses, an address assigned
/// already) and its routes' (today's and the older wordings).
fn calico(text: &str, lower: &str) -> Option<SandboxRefusal> {
    if CALICO_EXHAUSTED.iter().any(|w| lower.contains(w)) {
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

/// The first range of host-local's range set (`: a-b,c-d…`).
fn first_range(tail: &str) -> Option<(IpAddr, IpAddr)> {
    let set = tail.trim_start_matches([':', ' ']).split(' ').next()?;
    let (first, last) = set.split(',').next()?.split_once('-')?;
    Some((parse_ip(first)?, parse_ip(last)?))
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
    is_interface_name(name).then(|| name.to_owned())
}

/// Whether `name` reads as a Linux interface name (what a bridge's is).
fn is_interface_name(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
#[path = "wordings_tests.rs"]
mod tests;
