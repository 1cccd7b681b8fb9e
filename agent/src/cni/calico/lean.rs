//! Calico's IPPools as the watch holds them: what [`super::ip_pool`] reads.
//!
//! A cluster has a few; the agent reads them for the ranges Calico gives pods
//! addresses from (a Service's address on `kube-ipvs0` inside one may be a
//! pod's elsewhere). Read as Subnets are, the rest skipped unparsed.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::cni::read::{LeanSpec, cluster_resource, shape::Typed};

/// An IPPool cut to its name and the spec fields the converter reads.
pub(crate) type LeanIpPool = LeanSpec<PoolSpec>;

/// An IPAMBlock cut to its name and the spec fields the converter reads
/// (`audit` lists them in pages; the agent never reads them).
pub(crate) type LeanIpamBlock = LeanSpec<BlockSpec>;

cluster_resource!(
    LeanIpPool,
    "IPPool",
    "crd.projectcalico.org",
    "v1",
    "ippools"
);

cluster_resource!(
    LeanIpamBlock,
    "IPAMBlock",
    "crd.projectcalico.org",
    "v1",
    "ipamblocks"
);

/// What names the first field of a spec that is not of its type, if any
/// (in the order of their names, as serde reads a whole object).
pub(crate) trait Checked {
    fn wrong(&self) -> Option<&str>;
}

/// The fields of an IPPool's `spec` the converter reads, by name.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct PoolSpec {
    /// `null` as absent: Calico's default, Workload and Tunnel.
    pub(crate) allowed_uses: Typed<Option<Vec<String>>>,
    pub(crate) block_size: Typed<Option<u8>>,
    pub(crate) cidr: Typed<Option<String>>,
    pub(crate) disabled: Typed<bool>,
}

impl Checked for PoolSpec {
    fn wrong(&self) -> Option<&str> {
        (self.allowed_uses.wrong.as_ref())
            .or(self.block_size.wrong.as_ref())
            .or(self.cidr.wrong.as_ref())
            .or(self.disabled.wrong.as_ref())
            .map(String::as_str)
    }
}

/// The fields of an IPAMBlock's `spec` the converter reads, by name.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct BlockSpec {
    pub(crate) affinity: Typed<Option<String>>,
    /// Per ordinal, the index of its attribute; null when free. The lists
    /// may be null in pastes that elide them.
    pub(crate) allocations: Typed<Option<Vec<Option<u64>>>>,
    pub(crate) attributes: Typed<Option<Vec<Attribute>>>,
    pub(crate) cidr: Typed<Option<String>>,
}

impl Checked for BlockSpec {
    fn wrong(&self) -> Option<&str> {
        (self.affinity.wrong.as_ref())
            .or(self.allocations.wrong.as_ref())
            .or(self.attributes.wrong.as_ref())
            .or(self.cidr.wrong.as_ref())
            .map(String::as_str)
    }
}

/// One of an IPAMBlock's `attributes`.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Attribute {
    pub(crate) handle_id: Option<String>,
    /// `node`, `type` (tunnels); `namespace`, `pod`, `timestamp` (pods).
    pub(crate) secondary: Option<BTreeMap<String, String>>,
}
