//! Conversions from Kubernetes objects to inventory types.
//!
//! Outside input is never trusted: a field that is not what it should be is
//! reported as an [`Invalid`] naming the object and field, and the rest of the
//! object is still used where it makes sense.

mod calico;
mod crds;
mod every;
pub mod impact;
mod network_status;
mod node;
mod ovn;
mod ovn_ports;
mod pod;
mod sandbox;
mod service;
mod subnet;
#[cfg(test)]
mod wordings_tests;

pub(in crate::kube) use calico::{ip_pool, ipam_block};
pub(in crate::kube) use crds::cilium_node;
pub use crds::{node_annotation_read, node_annotations};
pub use every::every_reading;
pub use node::{cilium_config, node_facts, with_addresses, with_status_addresses};
pub use pod::{kube_ovn_ip, pod};
pub use sandbox::{sandbox_failure, sandbox_refusal};
pub use service::{LeanService, service_addresses, service_json};
pub use subnet::{parse_range, subnet};

/// Entries read of one list in an object at most; each cap named in a warning.
pub(crate) mod caps {
    /// `CiliumNode.spec.addresses` (a node has a handful).
    pub(crate) const ADDRESSES: usize = 64;
    /// CIDRs of one field (`podCIDRs`, a pool's `cidrs`, `pools.allocated`).
    pub(crate) const CIDRS: usize = 64;
    /// `CiliumNode.status.ipam.used` entries (an ENI node has hundreds).
    pub(crate) const IPAM_USED: usize = 8192;
    /// `Subnet.spec.excludeIps` entries.
    pub(crate) const EXCLUDE_IPS: usize = 4096;
    /// `Pod.status.podIPs` (one per family in a sane object).
    pub(crate) const POD_IPS: usize = 8;
}

/// At most `max` of `items`, the cut named in `bad`: bounded work per object
/// from outside, whatever its size.
pub(crate) fn capped<'a, T>(
    items: &'a [T],
    max: usize,
    field: &str,
    bad: &mut dyn FnMut(String),
) -> &'a [T] {
    if items.len() > max {
        bad(format!(
            "{field} has {} entries; only the first {max} are read",
            items.len()
        ));
        &items[..max]
    } else {
        items
    }
}

/// The `Err` of an object of `resource` without a name: unusable.
fn unnamed(resource: &'static str) -> crate::inventory::Invalid {
    crate::inventory::Invalid {
        resource,
        object: "(unnamed)".to_owned(),
        problem: "metadata.name is missing or not a string; object skipped".to_owned(),
    }
}

/// Longest value quoted back in a warning: annotations can be megabytes.
const QUOTE_MAX: usize = 64;

/// A string quoted for a message, cut to a readable length.
pub fn quote(s: &str) -> String {
    if s.len() <= QUOTE_MAX {
        format!("{s:?}")
    } else {
        format!("{:?}… ({} bytes)", prefix(s, QUOTE_MAX), s.len())
    }
}

/// The first `max` bytes of `s` at most, cut at a character boundary.
fn prefix(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// `s` cut to `max` bytes, marked `…` when cut: text from outside kept bounded.
pub(crate) fn bounded(s: &str, max: usize) -> String {
    let kept = prefix(s, max);
    if kept.len() < s.len() {
        format!("{kept}…")
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
#[path = "addresses_tests.rs"]
mod addresses_tests;
#[cfg(test)]
pub(crate) mod props;
#[cfg(test)]
mod tests;
#[cfg(test)]
#[path = "whole_tests.rs"]
pub(crate) mod whole;
#[cfg(test)]
#[path = "whole_calico_tests.rs"]
pub(crate) mod whole_calico;
#[cfg(test)]
#[path = "whole_impact_tests.rs"]
pub(crate) mod whole_impact;
