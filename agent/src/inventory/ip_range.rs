//! An inclusive range of addresses (kube-ovn's `first..last`).

use std::{fmt, net::IpAddr};

use ipnet::IpNet;

/// An inclusive range of addresses, as kube-ovn writes `first..last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpRange {
    /// The first address.
    pub first: IpAddr,
    /// The last address (inclusive).
    pub last: IpAddr,
}

impl IpRange {
    /// Whether `ip` lies in the range (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.first, self.last, ip) {
            (IpAddr::V4(a), IpAddr::V4(b), IpAddr::V4(x)) => a <= x && x <= b,
            (IpAddr::V6(a), IpAddr::V6(b), IpAddr::V6(x)) => a <= x && x <= b,
            _ => false,
        }
    }

    /// Whether the two share an address.
    pub fn meets(&self, other: &Self) -> bool {
        self.first.is_ipv4() == other.first.is_ipv4()
            && self.first <= other.last
            && other.first <= self.last
    }

    /// The one address `ip`.
    pub fn one(ip: IpAddr) -> Self {
        Self {
            first: ip,
            last: ip,
        }
    }

    /// The whole of `net` as a range.
    pub fn of(net: &IpNet) -> Self {
        Self {
            first: net.network(),
            last: net.broadcast(),
        }
    }
}

/// `ip` moved by one (`by` = 1 or -1); `None` past the end of the family.
pub fn step(ip: IpAddr, by: i8) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(a) => u32::from(a)
            .checked_add_signed(by.into())
            .map(|n| IpAddr::V4(n.into())),
        IpAddr::V6(a) => u128::from(a)
            .checked_add_signed(by.into())
            .map(|n| IpAddr::V6(n.into())),
    }
}

/// The `n`th address of `net` (0 is the network's own), if `net` has it
/// (ovn-kubernetes' ip_generator.go `GenerateIP`; a Calico block's ordinal).
pub fn nth(net: &IpNet, n: u32) -> Option<IpAddr> {
    let ip = match net.network() {
        IpAddr::V4(a) => IpAddr::from(u32::from(a).checked_add(n)?.to_be_bytes()),
        IpAddr::V6(a) => IpAddr::from(u128::from(a).checked_add(u128::from(n))?.to_be_bytes()),
    };
    net.contains(&ip).then_some(ip)
}

/// Whether `ip` is link-local (169.254/16, fe80::/10): no pod is given one.
pub fn link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => a.is_unicast_link_local(),
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}..{}", self.first, self.last)
        }
    }
}
