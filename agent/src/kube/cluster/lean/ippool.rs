//! Calico's IPPools as the watch holds them: what [`objects::ip_pool`] reads.
//!
//! A cluster has a few; the agent reads them for the ranges Calico gives pods
//! addresses from (a Service's address on `kube-ipvs0` inside one may be a
//! pod's elsewhere). Read as Subnets are, the rest skipped unparsed.
//!
//! [`objects::ip_pool`]: crate::kube::objects::ip_pool

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{LeanSpec, cluster_resource, shape::Typed};

/// An IPPool cut to its name and the spec fields the converter reads.
pub(in crate::kube) type LeanIpPool = LeanSpec<PoolSpec>;

/// An IPAMBlock cut to its name and the spec fields the converter reads
/// (`audit` lists them in pages; the agent never reads them).
pub(in crate::kube) type LeanIpamBlock = LeanSpec<BlockSpec>;

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
pub(in crate::kube) trait Checked {
    fn wrong(&self) -> Option<&str>;
}

/// The fields of an IPPool's `spec` the converter reads, by name.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(in crate::kube) struct PoolSpec {
    /// `null` as absent: Calico's default, Workload and Tunnel.
    pub(in crate::kube) allowed_uses: Typed<Option<Vec<String>>>,
    pub(in crate::kube) block_size: Typed<Option<u8>>,
    pub(in crate::kube) cidr: Typed<Option<String>>,
    pub(in crate::kube) disabled: Typed<bool>,
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
pub(in crate::kube) struct BlockSpec {
    pub(in crate::kube) affinity: Typed<Option<String>>,
    /// Per ordinal, the index of its attribute; null when free. The lists
    /// may be null in pastes that elide them.
    pub(in crate::kube) allocations: Typed<Option<Vec<Option<u64>>>>,
    pub(in crate::kube) attributes: Typed<Option<Vec<Attribute>>>,
    pub(in crate::kube) cidr: Typed<Option<String>>,
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
#[serde(default)]
pub(in crate::kube) struct Attribute {
    pub(in crate::kube) handle_id: Option<String>,
    /// `node`, `type` (tunnels); `namespace`, `pod`, `timestamp` (pods).
    pub(in crate::kube) secondary: Option<BTreeMap<String, String>>,
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::kube::objects::{self, whole_calico};

    /// The real IPPools of the corpus: the same pool (or refusal) lean as whole.
    #[test]
    fn real_ippools_read_the_same_lean_as_whole() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/corpus/realworld/calico"
        );
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("corpus") {
            let path = entry.expect("entry").path();
            let name = path.display().to_string();
            if !path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ippool-"))
            {
                continue;
            }
            let list: Value =
                serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
            let items = list["items"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| vec![list]);
            for item in items {
                let bytes = serde_json::to_vec(&item).expect("bytes");
                let lean: LeanIpPool = serde_json::from_slice(&bytes).expect("lean");
                assert_eq!(
                    lean.metadata.name.as_deref(),
                    item.pointer("/metadata/name").and_then(Value::as_str),
                    "{name}"
                );
                let (mut p1, mut p2) = (Vec::new(), Vec::new());
                let whole = whole_calico::ip_pool(&item, &mut p1);
                let pruned = objects::ip_pool(&lean, &mut p2);
                assert!(whole.is_ok(), "{name}: {whole:?}");
                assert_eq!(whole, pruned, "{name}");
                assert_eq!(p1, p2, "{name}");
                seen += 1;
            }
        }
        assert!(seen >= 3, "only {seen} IPPools in the corpus");
    }

    #[test]
    fn wrong_types_parse_and_are_named_as_the_whole_object_names_them() {
        for junk in [
            serde_json::json!({"metadata": {"name": "p"}, "spec": "x"}),
            serde_json::json!({"metadata": {"name": 5}, "spec": {"cidr": "10.0.0.0/16"}}),
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"cidr": 7, "blockSize": "x",
                "disabled": "no", "allowedUses": "Workload"}}),
        ] {
            let bytes = serde_json::to_vec(&junk).expect("bytes");
            let lean: LeanIpPool = serde_json::from_slice(&bytes).expect("never fails");
            let (mut p1, mut p2) = (Vec::new(), Vec::new());
            // Refused both ways, naming the same object (a spec of the wrong
            // type reads as `[]` lean, so serde names another type).
            match (
                whole_calico::ip_pool(&junk, &mut p1),
                objects::ip_pool(&lean, &mut p2),
            ) {
                (Err(whole), Err(pruned)) => {
                    assert_eq!(
                        (whole.resource, &whole.object),
                        (pruned.resource, &pruned.object)
                    );
                }
                other => panic!("{junk}: {other:?}"),
            }
            assert_eq!(p1, p2, "{junk}");
        }
    }
}
