//! CiliumNodes as the watch holds them: only what detection reads.
//!
//! Every agent lists every CiliumNode. Held as `DynamicObject`s, the initial
//! list of a 5,000-node cluster is parsed whole into JSON trees — annotations,
//! managedFields, ENI and Azure interface details, one `status.ipam.used` entry
//! per pod — before conversion, and the allocator keeps that peak (~100 MiB per
//! agent in the fleet benchmark). Here serde reads each object straight from
//! the response's bytes into [`LeanCiliumNode`], which names the fields the
//! converter reads and skips every other one unparsed. A malformed object
//! still parses (an object where one is expected, any JSON at the leaves,
//! which the converter checks and names) and is reported, never failing the
//! list.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, de::IgnoredAny};
use serde_json::Value;

use crate::{
    cni::read::{
        Meta, cluster_resource,
        shape::{Shape, lenient},
    },
    inventory::Role,
};

/// A CiliumNode cut to what [`super::cilium_node`] reads.
/// An object where one is expected that is of another type reads as empty,
/// as a JSON pointer through it finds nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct LeanCiliumNode {
    /// Name (when a string), uid and resourceVersion only.
    pub(crate) metadata: ObjectMeta,
    pub(crate) spec: Spec,
    pub(crate) status: Status,
}

cluster_resource!(
    LeanCiliumNode,
    "CiliumNode",
    "cilium.io",
    "v2",
    "ciliumnodes"
);

impl<'de> Deserialize<'de> for LeanCiliumNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let lean = Shape::<Wire>::deserialize(d)?.or_default();
        let mut node = Self {
            metadata: lean.metadata.object_meta(),
            spec: lean.spec,
            status: lean.status,
        };
        node.cut();
        Ok(node)
    }
}

impl LeanCiliumNode {
    /// Keeps, of the list that grows with the node's pods, what the
    /// converter reads: the owners Cilium itself holds in `status.ipam.used`,
    /// and one entry besides (the mark of a CRD-style allocator: it only asks
    /// whether there are any). Of `spec.ipam.pool`, likewise, only whether it
    /// has entries is kept.
    fn cut(&mut self) {
        if let Shape::Map(used) = &mut self.status.ipam.used {
            let infra = |u: &Shape<Used>| u.as_map().and_then(Used::role).is_some();
            let marker = used
                .iter()
                .find(|(_, u)| !infra(u))
                .map(|(ip, _)| ip.clone());
            used.retain(|ip, u| infra(u) || Some(ip) == marker.as_ref());
        }
    }
}

/// The object as read, before its metadata is cut to an `ObjectMeta`.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Wire {
    metadata: Shape<Meta>,
    #[serde(deserialize_with = "lenient")]
    spec: Spec,
    #[serde(deserialize_with = "lenient")]
    status: Status,
}

/// The fields of `spec` the converter reads; the leaves are any JSON.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Spec {
    pub(crate) addresses: Option<Value>,
    pub(crate) ingress: Option<Value>,
    pub(crate) health: Option<Value>,
    #[serde(deserialize_with = "lenient")]
    pub(crate) ipam: SpecIpam,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SpecIpam {
    #[serde(rename = "podCIDRs")]
    pub(crate) pod_cidrs: Option<Value>,
    #[serde(deserialize_with = "lenient")]
    pub(crate) pools: Pools,
    /// Whether `pool` (ENI/Azure's available addresses) has any.
    #[serde(rename = "pool", deserialize_with = "any_key")]
    pub(crate) pool_any: bool,
}

/// Whether an object has keys: none where it is no object.
#[allow(
    clippy::zero_sized_map_values,
    reason = "a JSON object read for whether it has keys"
)]
fn any_key<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    lenient::<BTreeMap<String, IgnoredAny>, D>(d).map(|m| !m.is_empty())
}

/// Multi-pool's ranges.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Pools {
    pub(crate) allocated: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Status {
    #[serde(deserialize_with = "lenient")]
    pub(crate) ipam: StatusIpam,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StatusIpam {
    /// One entry per address the node's allocator handed out (cut to
    /// Cilium's own and one more); a wrong type is named.
    pub(crate) used: Shape<BTreeMap<String, Shape<Used>>>,
    #[serde(rename = "operator-status", deserialize_with = "lenient")]
    pub(crate) operator_status: OperatorStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct OperatorStatus {
    pub(crate) error: Option<Value>,
}

/// One `status.ipam.used` entry: its owner, nothing else.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Used {
    pub(crate) owner: Option<Value>,
}

impl Used {
    /// Cilium's own role of the address; `None` for a pod's (`namespace/name`)
    /// and anything else.
    pub(crate) fn role(&self) -> Option<Role> {
        match self.owner.as_ref()?.as_str()? {
            "router" => Some(Role::Router),
            "health" => Some(Role::Health),
            "ingress" => Some(Role::Ingress),
            _ => None,
        }
    }
}
