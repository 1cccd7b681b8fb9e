//! Conversions from Kubernetes objects to inventory types.
//!
//! Outside input is never trusted: a field that is not what it should be is
//! reported as an [`Invalid`] naming the object and field, and the rest of the
//! object is still used where it makes sense.

mod crds;
mod node;
mod pod;
mod sandbox;

pub use crds::{cilium_node, node_annotations, parse_range, subnet};
pub use node::{cilium_config, node_facts};
pub use pod::{kube_ovn_ip, pod};
pub use sandbox::{sandbox_failure, sandbox_refusal};

/// Longest value quoted back in a warning: annotations can be megabytes.
const QUOTE_MAX: usize = 64;

/// A string quoted for a message, cut to a readable length.
pub fn quote(s: &str) -> String {
    if s.len() <= QUOTE_MAX {
        format!("{s:?}")
    } else {
        let mut end = QUOTE_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{:?}… ({} bytes)", &s[..end], s.len())
    }
}

#[cfg(test)]
pub(crate) mod props;
#[cfg(test)]
mod tests;
