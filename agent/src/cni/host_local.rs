//! host-local, the reference IPAM plugin many CNIs delegate to: the words of
//! its refusal when a node's range set has no address left
//! (`allocator.go`), whatever plugin delegated to it.

use std::net::IpAddr;

use crate::inventory::{SandboxRefusal, ip_text::parse_ip};

/// host-local's refusal (`allocator.go`).
const RANGE_SET: &str = "no ip addresses available in range set";

/// A range set with no address left, and its first range when named
/// (`lower`: `text` lowercased).
pub(super) fn refusal(text: &str, lower: &str) -> Option<SandboxRefusal> {
    let at = lower.find(RANGE_SET)?;
    Some(SandboxRefusal::RangeSetFull(first_range(
        &text[at + RANGE_SET.len()..],
    )))
}

/// The first range of host-local's range set (`: a-b,c-d…`).
fn first_range(tail: &str) -> Option<(IpAddr, IpAddr)> {
    let set = tail.trim_start_matches([':', ' ']).split(' ').next()?;
    let (first, last) = set.split(',').next()?.split_once('-')?;
    Some((parse_ip(first)?, parse_ip(last)?))
}
