//! Conversions from Kubernetes objects to inventory types.
//!
//! Outside input is never trusted: a field that is not what it should be is
//! reported as an [`Invalid`] naming the object and field, and the rest of the
//! object is still used where it makes sense.

mod every;
pub mod impact;
mod node;
mod pod;
mod sandbox;
mod service;
#[cfg(test)]
mod wordings_tests;

pub use crate::cni::annotations::node_annotations;
pub(in crate::kube) use crate::cni::calico::{ip_pool, ipam_block};
pub use crate::cni::cilium::cilium_config;
pub(in crate::kube) use crate::cni::cilium::cilium_node;
pub(crate) use crate::cni::kube_ovn::kube_ovn_ip;
pub use crate::cni::kube_ovn::subnet;
pub use every::every_reading;
pub use node::{node_facts, with_addresses, with_status_addresses};
pub use pod::pod;
pub use sandbox::{sandbox_failure, sandbox_refusal};
pub use service::{LeanService, service_addresses, service_json};

#[cfg(test)]
#[path = "addresses_tests.rs"]
mod addresses_tests;
#[cfg(test)]
#[path = "calico_lean_tests.rs"]
mod calico_lean_tests;
#[cfg(test)]
mod calico_tests;
#[cfg(test)]
#[path = "cilium_lean_tests.rs"]
mod cilium_lean_tests;
#[cfg(test)]
#[path = "props_tests.rs"]
pub(crate) mod props;
#[cfg(test)]
#[path = "subnet_lean_tests.rs"]
mod subnet_lean_tests;
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
