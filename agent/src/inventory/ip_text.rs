//! Addresses and ranges written in cluster objects, read exactly as
//! Kubernetes reads them.
//!
//! The API server (until `StrictIPCIDRValidation`) validates a Service's,
//! a pod's or a Node's address with k8s.io/utils' `ParseIPSloppy` and
//! `ParseCIDRSloppy` (net/parse.go), and kube-proxy reads Services with them
//! (kubernetes pkg/proxy/service.go `newBaseServiceInfo`, pkg/proxy/util
//! `MapIPsByIPFamily`, `GetIPFamilyFromIP`). They are Go 1.16's `net.ParseIP`
//! and `net.ParseCIDR`, forked when Go 1.17 began refusing leading zeros
//! (CVE-2021-29923; kubernetes#100895): k8s.io/utils
//! internal/third_party/forked/golang/net/ip.go (`ParseIP`, `ParseCIDR`,
//! `parseIPv4`, `parseIPv6`) and parse.go (`dtoi`, `xtoi`). This module is
//! that code, step for step:
//!
//! - **Leading zeros** are decimal, never octal: `010.244.001.020` is
//!   10.244.1.20; so are the embedded IPv4 of an IPv6 address
//!   (`::ffff:0192.0168.0000.0005`) and a CIDR's mask (`/024`). An IPv6 group
//!   may have more than four digits if the rest are zeros (`00001::`).
//! - **IPv4-mapped IPv6 is IPv4**: Go holds every address in 16 bytes, and
//!   `To4()` is not nil for any address in `::ffff:0:0/96`, however it is
//!   written (`::ffff:10.244.1.20`, `::ffff:af4:114`): kube-proxy takes it as
//!   IPv4 (`ip.To4() != nil`) and binds 10.244.1.20. So it is folded here.
//! - **Whitespace is not trimmed**, as Go does not: `" 10.0.0.1"` is no
//!   address to the API server's validation nor to kube-proxy, so it is none
//!   here either, and the object holding it is named as unreadable (where a
//!   field is a list in text, a CNI's comma-separated annotation, the caller
//!   trims around its separators: that is the list's layout, not the address).
//! - **Zones and brackets** (`fe80::1%eth0`, `[::1]`) and ports are refused,
//!   as Go refuses them.
//! - **A CIDR's mask** is decimal digits only (no sign), at most 32 after an
//!   IPv4 address and 128 after an IPv6 one; the network is the address with
//!   the host bits cleared (Go's `ParseCIDR` returns both). An IPv4-mapped
//!   network whose mask keeps the `ffff` (a prefix of 96 or more) is the IPv4
//!   network of 96 fewer bits, as Go's `IPNet.String` and `Contains` treat it
//!   (`networkNumberAndMask`); a shorter mask cuts into the `ffff`, and the
//!   network is IPv6.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// An address as `ParseIPSloppy` reads `s`, IPv4-mapped IPv6 folded to IPv4.
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    let b = s.as_bytes();
    // Go's ParseIP: the first '.' or ':' decides the family.
    match b.iter().find(|c| matches!(c, b'.' | b':'))? {
        b'.' => parse_v4(b).map(|a| IpAddr::V4(Ipv4Addr::from(a))),
        _ => parse_v6(b).map(|a| Ipv6Addr::from(a).to_canonical()),
    }
}

/// A CIDR as `ParseCIDRSloppy` reads it: the address as written and the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    /// The address before the mask (`100.64.0.2` of `100.64.0.2/16`), folded
    /// as [`parse_ip`] folds it.
    pub ip: IpAddr,
    /// The network, host bits cleared: `100.64.0.0/16`. Of another family
    /// than `ip` only for an IPv4-mapped address under a mask shorter than 96.
    pub net: IpNet,
}

impl Cidr {
    /// The address with its prefix, as an interface holds it (`100.64.0.2/16`);
    /// `None` where the two are of different families.
    pub fn ifaddr(&self) -> Option<IpNet> {
        IpNet::new(self.ip, self.net.prefix_len()).ok()
    }
}

/// A CIDR as `ParseCIDRSloppy` reads `s` (see the module).
pub fn parse_cidr(s: &str) -> Option<Cidr> {
    let (addr, mask) = s.split_once('/')?;
    // Go tries IPv4 first, then IPv6; the text decides the mask's bound.
    let (v6, bits) = match parse_v4(addr.as_bytes()) {
        Some(a) => (Ipv4Addr::from(a).to_ipv6_mapped(), 32),
        None => (Ipv6Addr::from(parse_v6(addr.as_bytes())?), 128),
    };
    let (prefix, used) = stoi(mask.as_bytes(), 10)?;
    if used != mask.len() || prefix > bits {
        return None;
    }
    let prefix = u8::try_from(prefix).ok()?;
    let ip = v6.to_canonical();
    let net = if bits == 32 {
        let IpAddr::V4(a) = ip else { return None };
        IpNet::V4(Ipv4Net::new(a, prefix).ok()?.trunc())
    } else {
        let net = Ipv6Net::new(v6, prefix).ok()?.trunc();
        match net.network().to_ipv4_mapped() {
            Some(a) => IpNet::V4(Ipv4Net::new(a, prefix.checked_sub(96)?).ok()?),
            None => IpNet::V6(net),
        }
    };
    Some(Cidr { ip, net })
}

/// Bigger than any number an address holds (Go's `big`): a longer run of
/// digits fails rather than overflows.
const BIG: u32 = 0xFF_FFFF;

/// Go's `dtoi` (`radix` 10) and `xtoi` (16): the number `s` starts with and
/// the digits it used.
fn stoi(s: &[u8], radix: u32) -> Option<(u32, usize)> {
    let mut n = 0u32;
    let mut used = 0;
    for d in s.iter().map_while(|c| char::from(*c).to_digit(radix)) {
        n = n * radix + d;
        if n >= BIG {
            return None;
        }
        used += 1;
    }
    (used > 0).then_some((n, used))
}

/// Go's `parseIPv4`: four decimal numbers up to 255, dot-separated, nothing after.
fn parse_v4(mut s: &[u8]) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    for (i, octet) in out.iter_mut().enumerate() {
        if i > 0 {
            s = s.strip_prefix(b".")?;
        }
        let (n, used) = stoi(s, 10)?;
        *octet = u8::try_from(n).ok()?;
        s = &s[used..];
    }
    s.is_empty().then_some(out)
}

/// Go's `parseIPv6`: hexadecimal groups, one `::` standing for at least one
/// zero group, an IPv4 address as the last 32 bits.
fn parse_v6(mut s: &[u8]) -> Option<[u8; 16]> {
    let mut ip = [0u8; 16];
    let mut ellipsis = None;
    if let Some(rest) = s.strip_prefix(b"::") {
        ellipsis = Some(0);
        s = rest;
        if s.is_empty() {
            return Some(ip);
        }
    }
    let mut i = 0;
    while i < 16 {
        let (n, used) = stoi(s, 16)?;
        let group = u16::try_from(n).ok()?;
        if s.get(used) == Some(&b'.') {
            // The embedded IPv4 ends the address, in the last 32 bits.
            if (ellipsis.is_none() && i != 12) || i + 4 > 16 {
                return None;
            }
            ip[i..i + 4].copy_from_slice(&parse_v4(s)?);
            s = &[];
            i += 4;
            break;
        }
        ip[i..i + 2].copy_from_slice(&group.to_be_bytes());
        i += 2;
        s = &s[used..];
        if s.is_empty() {
            break;
        }
        if s[0] != b':' || s.len() == 1 {
            return None;
        }
        s = &s[1..];
        if s[0] == b':' {
            if ellipsis.is_some() {
                return None;
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return None;
    }
    if i < 16 {
        // The ellipsis stands for the missing groups.
        let at = ellipsis?;
        let missing = 16 - i;
        ip.copy_within(at..i, at + missing);
        ip[at..at + missing].fill(0);
    } else if ellipsis.is_some() {
        // `::` must stand for at least one group.
        return None;
    }
    Some(ip)
}

#[cfg(test)]
#[path = "ip_text_tests.rs"]
mod tests;
