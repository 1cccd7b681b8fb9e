//! The Calico converters as they read whole objects as JSON, before the lean
//! structs: the reference the lean readers are checked against.

use std::collections::BTreeMap;

use ipnet::IpNet;
use serde::Deserialize;
use serde_json::Value;

use crate::cni::read::{quote, unnamed};
use crate::inventory::{
    Invalid, IpPool, IpamBlock, IpamOwner, TunnelKind, ip_text::parse_cidr, text::cleaned,
};

/// Addresses of one block read at most: Calico's smallest IPv4 block size
/// is /20 (4,096 addresses), and an IPv6 block is no larger.
const BLOCK_ADDRESSES: usize = 4096;

#[derive(Default, Deserialize)]
#[serde(default)]
struct LeanBlock {
    spec: BlockSpec,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct BlockSpec {
    cidr: Option<String>,
    affinity: Option<String>,
    /// Per ordinal, the index of its attribute; null when free. The lists
    /// may be null in pastes that elide them.
    allocations: Option<Vec<Option<u64>>>,
    attributes: Option<Vec<Attribute>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Attribute {
    handle_id: Option<String>,
    /// `node`, `type` (tunnels); `namespace`, `pod`, `timestamp` (pods).
    secondary: Option<BTreeMap<String, String>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct LeanPool {
    spec: PoolSpec,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PoolSpec {
    cidr: Option<String>,
    block_size: Option<u8>,
    disabled: bool,
    /// `null` as absent: Calico's default, Workload and Tunnel.
    allowed_uses: Option<Vec<String>>,
}

/// The name of an object of `resource` (read apart: `T` keeps no metadata),
/// and the object as `T`; `Err` when unusable (no name, a field of the wrong
/// JSON type).
fn lean<T: for<'de> Deserialize<'de>>(
    v: &Value,
    resource: &'static str,
) -> Result<(String, T), Invalid> {
    let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) else {
        return Err(unnamed(resource));
    };
    T::deserialize(v)
        .map(|t| (cleaned(name), t))
        .map_err(|e| Invalid {
            resource,
            object: name.to_owned(),
            problem: format!("not a valid {resource} object ({e}); skipped"),
        })
}

/// `spec.cidr` of an object, or why not.
fn cidr(resource: &'static str, name: &str, cidr: Option<&str>) -> Result<IpNet, Invalid> {
    match cidr.and_then(parse_cidr) {
        Some(c) => Ok(c.net),
        _ => Err(Invalid {
            resource,
            object: name.to_owned(),
            problem: format!(
                "spec.cidr {} is not a CIDR; object skipped",
                cidr.map_or_else(|| "(missing)".to_owned(), quote)
            ),
        }),
    }
}

/// A `crd.projectcalico.org/v1` IPAMBlock: its CIDR, its node, and each
/// allocated address's owner. `Err` when unusable; an allocation pointing at
/// no attribute is named in `problems` and kept as an unknown owner.
pub(crate) fn ipam_block(v: &Value, problems: &mut Vec<Invalid>) -> Result<IpamBlock, Invalid> {
    let (name, block) = lean::<LeanBlock>(v, "ipamblocks")?;
    let spec = block.spec;
    let cidr = cidr("ipamblocks", &name, spec.cidr.as_deref())?;
    let node = spec
        .affinity
        .as_deref()
        .and_then(|a| a.strip_prefix("host:"))
        .filter(|n| !n.is_empty())
        .map(cleaned);
    // A block that lists no allocations is unknown, not free.
    let listed = spec.allocations.as_ref().is_some_and(|a| !a.is_empty());
    let allocations = spec.allocations.unwrap_or_default();
    let attributes = spec.attributes.unwrap_or_default();
    let mut bad = |problem: String| {
        problems.push(Invalid {
            resource: "ipamblocks",
            object: name.clone(),
            problem,
        });
    };
    if allocations.len() > BLOCK_ADDRESSES {
        bad(format!(
            "spec.allocations has {} entries; only the first {BLOCK_ADDRESSES} are read",
            allocations.len()
        ));
    }
    let mut allocated = Vec::new();
    let mut dangling: Vec<u32> = Vec::new();
    for (ordinal, index) in allocations.iter().enumerate().take(BLOCK_ADDRESSES) {
        let (Some(index), Ok(ordinal)) = (index, u32::try_from(ordinal)) else {
            continue;
        };
        let attribute = usize::try_from(*index).ok().and_then(|i| attributes.get(i));
        if attribute.is_none() {
            dangling.push(ordinal);
        }
        allocated.push((ordinal, owner(attribute, node.as_deref())));
    }
    if let Some(first) = dangling.first() {
        bad(format!(
            "{} of spec.allocations (the first at ordinal {first}) point at no entry of \
             spec.attributes ({} entries); their owners are unknown",
            dangling.len(),
            attributes.len()
        ));
    }
    Ok(IpamBlock {
        name,
        cidr,
        node,
        allocated,
        listed,
    })
}

/// Whom an attribute names: a tunnel by `secondary.type` (else by its handle,
/// as allocations from before attributes were written), a pod by
/// `secondary.namespace`/`pod`, else its handle alone.
fn owner(attribute: Option<&Attribute>, block_node: Option<&str>) -> IpamOwner {
    let Some(a) = attribute else {
        return IpamOwner::Other { handle: None };
    };
    let secondary = |key: &str| {
        a.secondary
            .as_ref()
            .and_then(|s| s.get(key))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    // Calico's own test: no handle (nil, not "") and no attributes.
    if a.handle_id.is_none() && a.secondary.as_ref().is_none_or(BTreeMap::is_empty) {
        return IpamOwner::Unmarked;
    }
    let by_handle = a.handle_id.as_deref().and_then(TunnelKind::of_handle);
    let kind = secondary("type")
        .and_then(TunnelKind::of_attribute)
        .or(by_handle.map(|(k, _)| k));
    if let Some(kind) = kind {
        let node = secondary("node")
            .or(by_handle.map(|(_, n)| n))
            .or(block_node)
            .unwrap_or_default();
        return IpamOwner::Tunnel {
            node: cleaned(node),
            kind,
        };
    }
    match (secondary("namespace"), secondary("pod")) {
        (Some(namespace), Some(pod)) => IpamOwner::Pod {
            namespace: cleaned(namespace),
            name: cleaned(pod),
        },
        _ => IpamOwner::Other {
            handle: a.handle_id.as_deref().map(cleaned),
        },
    }
}

/// An IPPool (`crd.projectcalico.org/v1`, or `projectcalico.org/v3` from
/// Calico's API server: the same fields). `Err` when unusable.
pub(crate) fn ip_pool(v: &Value, problems: &mut Vec<Invalid>) -> Result<IpPool, Invalid> {
    let (name, pool) = lean::<LeanPool>(v, "ippools")?;
    let cidr = cidr("ippools", &name, pool.spec.cidr.as_deref())?;
    let block_size = pool.spec.block_size.filter(|b| {
        let fits = *b <= cidr.max_prefix_len() && *b >= cidr.prefix_len();
        if !fits {
            problems.push(Invalid {
                resource: "ippools",
                object: name.clone(),
                problem: format!("spec.blockSize {b} does not fit spec.cidr {cidr}; ignored"),
            });
        }
        fits
    });
    Ok(IpPool {
        name,
        cidr,
        block_size,
        disabled: pool.spec.disabled,
        // Calico defaults an absent or empty list to Workload and Tunnel.
        workloads: pool
            .spec
            .allowed_uses
            .as_ref()
            .is_none_or(|u| u.is_empty() || u.iter().any(|u| u == "Workload")),
        load_balancer: pool
            .spec
            .allowed_uses
            .as_ref()
            .is_some_and(|u| u.iter().any(|u| u == "LoadBalancer")),
    })
}
