//! Netlink payloads, as the kernel (or a bug) might hand them over: parsed as
//! route, link and address messages and converted into the inventory.
#![no_main]

use ipshadow::netlink::convert;
use libfuzzer_sys::fuzz_target;
use netlink_packet_core::Parseable as _;
use netlink_packet_route::{address::AddressMessage, link::LinkMessage, route::RouteMessage};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = RouteMessage::parse(data) {
        let _ = convert::route(&m);
        let _ = convert::fib_answer(Ok(&m));
    }
    let links: Vec<_> = LinkMessage::parse(data)
        .ok()
        .and_then(|m| convert::link(&m))
        .into_iter()
        .collect();
    if let Ok(m) = AddressMessage::parse(data) {
        let _ = convert::address(&m, &links);
    }
});
