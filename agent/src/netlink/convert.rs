//! Pure conversions from rtnetlink messages to inventory types.
//!
//! Kept apart from the socket code so they can be tested (and fuzzed) on
//! messages built in memory.

use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_route::{
    address::{AddressAttribute, AddressMessage},
    link::{LinkAttribute, LinkMessage},
    route::{RouteAddress, RouteAttribute, RouteMessage, RouteType},
};

use crate::inventory::{FibResult, Link, LocalAddress, Route, RouteKind};

/// A link's index and name; `None` for a message without a name.
pub fn link(msg: &LinkMessage) -> Option<Link> {
    let name = msg.attributes.iter().find_map(|attr| match attr {
        // The kernel allows any byte but '/', ':', whitespace and NUL in a name.
        LinkAttribute::IfName(n) => Some(crate::inventory::text::cleaned(n)),
        _ => None,
    })?;
    Some(Link {
        index: msg.header.index,
        name,
    })
}

/// An address message's own address: `IFA_LOCAL`, else `IFA_ADDRESS` (on
/// IPv4 point-to-point devices `IFA_ADDRESS` is the peer's).
pub fn local_ip(msg: &AddressMessage) -> Option<IpAddr> {
    let (mut address, mut local) = (None, None);
    for attr in &msg.attributes {
        match attr {
            AddressAttribute::Address(a) => address = Some(*a),
            AddressAttribute::Local(a) => local = Some(*a),
            _ => {}
        }
    }
    local.or(address)
}

/// The local address of an address message. For IPv4 point-to-point devices
/// `IFA_LOCAL` is ours and `IFA_ADDRESS` the peer's, so `Local` wins.
pub fn address(msg: &AddressMessage, links: &[Link]) -> Option<LocalAddress> {
    let ip = local_ip(msg)?;
    let index = msg.header.index;
    let device = links
        .iter()
        .find(|l| l.index == index)
        .map_or_else(|| format!("if{index}"), |l| l.name.clone());
    Some(LocalAddress { ip, device })
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// The inventory kind of a route type.
pub fn route_kind(kind: RouteType) -> RouteKind {
    match kind {
        RouteType::Unicast => RouteKind::Unicast,
        RouteType::Local => RouteKind::Local,
        RouteType::Broadcast => RouteKind::Broadcast,
        RouteType::Anycast => RouteKind::Anycast,
        RouteType::Multicast => RouteKind::Multicast,
        RouteType::BlackHole => RouteKind::Blackhole,
        RouteType::Unreachable => RouteKind::Unreachable,
        RouteType::Prohibit => RouteKind::Prohibit,
        RouteType::Throw => RouteKind::Throw,
        _ => RouteKind::Other,
    }
}

/// A route message as an inventory route; `None` without a usable destination.
pub fn route(msg: &RouteMessage) -> Option<Route> {
    let mut table = u32::from(msg.header.table);
    let mut dst = None;
    let mut oif = None;
    let mut gateway = None;
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(a) => dst = ip_of(a),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Gateway(a) => gateway = ip_of(a),
            _ => {}
        }
    }
    let len = msg.header.destination_prefix_length;
    // A default route carries no RTA_DST.
    let dst = match (dst, msg.header.address_family) {
        (Some(ip), _) => IpNet::new(ip, len).ok()?,
        (None, netlink_packet_route::AddressFamily::Inet) => IpNet::V4(ipnet::Ipv4Net::default()),
        (None, netlink_packet_route::AddressFamily::Inet6) => IpNet::V6(ipnet::Ipv6Net::default()),
        (None, _) => return None,
    };
    Some(Route {
        table,
        dst,
        kind: route_kind(msg.header.kind),
        oif,
        gateway,
    })
}

/// The FIB answer for one lookup: the kernel's reply, or the errno it failed with.
///
/// A lookup that matches `blackhole`/`unreachable`/`prohibit`, or nothing,
/// fails instead of answering (kernel 6.x); the errno says which.
pub fn fib_answer(reply: Result<&RouteMessage, i32>) -> FibResult {
    match reply {
        Ok(msg) => {
            let r = route(msg);
            let oif = r.as_ref().and_then(|r| r.oif);
            match msg.header.kind {
                RouteType::Local => FibResult::Local { oif },
                RouteType::Unicast => FibResult::Unicast {
                    oif,
                    gateway: r.and_then(|r| r.gateway),
                },
                RouteType::BlackHole => FibResult::Blackhole,
                RouteType::Unreachable => FibResult::Unreachable,
                RouteType::Prohibit => FibResult::Prohibit,
                other => FibResult::Other(format!("route type {}", route_kind(other))),
            }
        }
        Err(errno) => match errno.abs() {
            libc::EINVAL => FibResult::Blackhole,
            libc::EHOSTUNREACH => FibResult::Unreachable,
            libc::EACCES => FibResult::Prohibit,
            libc::ENETUNREACH => FibResult::NoRoute,
            e => FibResult::Other(format!(
                "lookup failed: {}",
                std::io::Error::from_raw_os_error(e)
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use netlink_packet_route::{
        AddressFamily,
        link::{InfoKind, LinkInfo},
    };

    use super::*;

    #[test]
    fn a_local_answer_is_local_whatever_table_it_reports() {
        // The kernel reports table 254 for a local lookup without extra rules.
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet;
        m.header.kind = RouteType::Local;
        m.header.table = 254;
        m.attributes.push(RouteAttribute::Oif(1));
        assert_eq!(fib_answer(Ok(&m)), FibResult::Local { oif: Some(1) });
    }

    #[test]
    fn failed_lookups_map_errno_to_the_route_kind_that_matched() {
        assert_eq!(fib_answer(Err(-libc::EINVAL)), FibResult::Blackhole);
        assert_eq!(fib_answer(Err(-libc::EHOSTUNREACH)), FibResult::Unreachable);
        assert_eq!(fib_answer(Err(-libc::EACCES)), FibResult::Prohibit);
        assert_eq!(fib_answer(Err(-libc::ENETUNREACH)), FibResult::NoRoute);
        assert!(matches!(
            fib_answer(Err(-libc::ENODEV)),
            FibResult::Other(_)
        ));
    }

    #[test]
    fn a_route_without_destination_is_the_default_route() {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet6;
        m.header.kind = RouteType::Unicast;
        m.attributes.push(RouteAttribute::Table(254));
        let r = route(&m).expect("default route");
        assert_eq!(r.dst.to_string(), "::/0");
        assert_eq!(r.table, 254);
    }

    #[test]
    fn links_keep_index_and_name_and_unnamed_ones_are_skipped() {
        let mut m = LinkMessage::default();
        m.header.index = 4;
        assert!(link(&m).is_none());
        m.attributes
            .push(LinkAttribute::IfName("cilium_host".into()));
        m.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
                InfoKind::Veth,
            )]));
        let l = link(&m).expect("named link");
        assert_eq!((l.index, l.name.as_str()), (4, "cilium_host"));
    }

    #[test]
    fn addresses_prefer_ifa_local_and_name_their_device() {
        let mut m = AddressMessage::default();
        m.header.index = 9;
        m.header.prefix_len = 32;
        m.attributes
            .push(AddressAttribute::Address("10.0.0.2".parse().expect("ip")));
        m.attributes
            .push(AddressAttribute::Local("10.0.0.1".parse().expect("ip")));
        let a = address(&m, &[]).expect("address");
        assert_eq!(a.ip, "10.0.0.1".parse::<IpAddr>().expect("ip"));
        assert_eq!(a.device, "if9");
    }
}

#[cfg(test)]
mod props {
    use netlink_packet_core::{Emitable as _, Parseable as _};
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever bytes the kernel (or a bug) hands over, conversion never panics.
        #[test]
        fn arbitrary_netlink_payloads_convert_or_are_rejected(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(m) = RouteMessage::parse(bytes.as_slice()) {
                let _ = route(&m);
                let _ = fib_answer(Ok(&m));
            }
            if let Ok(m) = LinkMessage::parse(bytes.as_slice()) {
                let _ = link(&m);
            }
            if let Ok(m) = AddressMessage::parse(bytes.as_slice()) {
                let _ = address(&m, &[]);
            }
        }

        /// A route survives the trip through its wire form.
        #[test]
        fn routes_round_trip_through_their_wire_form(a in any::<u32>(), len in 0u8..=32, oif in 1u32..1000) {
            let dst = std::net::Ipv4Addr::from(a);
            let mut m = RouteMessage::default();
            m.header.address_family = netlink_packet_route::AddressFamily::Inet;
            m.header.destination_prefix_length = len;
            m.header.kind = RouteType::Unicast;
            m.header.table = 254;
            m.attributes.push(RouteAttribute::Destination(RouteAddress::Inet(dst)));
            m.attributes.push(RouteAttribute::Oif(oif));
            let mut buf = vec![0; m.buffer_len()];
            m.emit(&mut buf);
            let back = RouteMessage::parse(buf.as_slice()).expect("parses");
            let r = route(&back).expect("a route");
            prop_assert_eq!(r.dst, IpNet::new(IpAddr::V4(dst), len).expect("valid"));
            prop_assert_eq!(r.oif, Some(oif));
        }
    }
}
