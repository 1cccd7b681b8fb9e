//! MetalLB (metallb/metallb, read at 7938d3f8): the load-balancer IPs of its
//! `IPAddressPool`s. MetalLB refuses two of its own pools that overlap, and
//! checks none against nodes or pod ranges (its check of node addresses,
//! metallb#2585, was reverted for metallb#2779).

use serde::Deserialize;

use super::plan::{Records, spec_ranges};
use crate::inventory::{Invalid, Planned, Purpose};

/// MetalLB's address pools.
pub const POOLS: Records = Records {
    allocator: "MetalLB",
    group: "metallb.io",
    versions: &["v1beta1"],
    kind: "IPAddressPool",
    plural: "ipaddresspools",
    read,
    only: None,
};

#[derive(Deserialize)]
struct Spec {
    /// CIDRs or `first-last` ranges.
    #[serde(default)]
    addresses: Vec<String>,
}

fn read(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    let texts = |s: Spec| s.addresses.into_iter();
    spec_ranges(
        &POOLS,
        json,
        "spec.addresses",
        Purpose::LoadBalancer,
        bad,
        texts,
    )
}
