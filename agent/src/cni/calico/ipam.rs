//! Calico's IPAMBlocks and IPPools, read from their lean structs: only the fields
//! detection reads are kept, every other one (`unallocated`,
//! `sequenceNumberForAllocation`, managedFields…) is skipped unparsed.
//!
//! Field names: projectcalico/calico `libcalico-go/lib/apis/crd.projectcalico.org/v1`
//! (IPAMBlock `cidr`, `affinity`, `allocations`, `attributes[].handle_id` /
//! `secondary`) and the real blocks in `tests/corpus/realworld/calico/`.

use std::collections::BTreeMap;

use super::lean::{Attribute, Checked, LeanIpPool, LeanIpamBlock};
use crate::cni::read::{LeanSpec, capped, quote, reporter, unnamed};
use crate::inventory::{
    Invalid, IpPool, IpamBlock, IpamOwner, TunnelKind, ip_text::parse_cidr, text::cleaned,
};
use ipnet::IpNet;

/// Addresses of one block read at most: Calico's smallest IPv4 block size
/// is /20 (4,096 addresses), and an IPv6 block is no larger.
const BLOCK_ADDRESSES: usize = 4096;

/// The name of an object of `resource` and its spec; `Err` when unusable (no
/// name, a field of the wrong JSON type).
fn lean<'a, S: Checked>(
    o: &'a LeanSpec<S>,
    resource: &'static str,
) -> Result<(String, &'a S), Invalid> {
    let Some(name) = o.metadata.name.as_deref() else {
        return Err(unnamed(resource));
    };
    match o
        .spec
        .as_ref()
        .map_err(String::as_str)
        .map(|s| (s, s.wrong()))
    {
        Ok((s, None)) => Ok((cleaned(name), s)),
        Ok((_, Some(e))) | Err(e) => Err(Invalid {
            resource,
            object: name.to_owned(),
            problem: format!("not a valid {resource} object ({e}); skipped"),
        }),
    }
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
pub(crate) fn ipam_block(
    o: &LeanIpamBlock,
    problems: &mut Vec<Invalid>,
) -> Result<IpamBlock, Invalid> {
    let (name, spec) = lean(o, "ipamblocks")?;
    let cidr = cidr("ipamblocks", &name, spec.cidr.value.as_deref())?;
    let (affinity, allocations) = (&spec.affinity.value, &spec.allocations.value);
    let node = affinity
        .as_deref()
        .and_then(|a| a.strip_prefix("host:"))
        .filter(|n| !n.is_empty())
        .map(cleaned);
    // A block that lists no allocations is unknown, not free.
    let listed = allocations.as_ref().is_some_and(|a| !a.is_empty());
    let allocations = allocations.as_deref().unwrap_or_default();
    let attributes = spec.attributes.value.as_deref().unwrap_or_default();
    let mut bad = reporter(problems, "ipamblocks", &name);
    let read = capped(allocations, BLOCK_ADDRESSES, "spec.allocations", &mut bad);
    let mut allocated = Vec::new();
    let mut dangling: Vec<u32> = Vec::new();
    for (ordinal, index) in read.iter().enumerate() {
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
    drop(bad);
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
pub(crate) fn ip_pool(o: &LeanIpPool, problems: &mut Vec<Invalid>) -> Result<IpPool, Invalid> {
    let (name, spec) = lean(o, "ippools")?;
    let cidr = cidr("ippools", &name, spec.cidr.value.as_deref())?;
    let block_size = spec.block_size.value.filter(|b| {
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
    let uses = spec.allowed_uses.value.as_ref();
    Ok(IpPool {
        name,
        cidr,
        block_size,
        disabled: spec.disabled.value,
        // Calico defaults an absent or empty list to Workload and Tunnel.
        workloads: uses.is_none_or(|u| u.is_empty() || u.iter().any(|u| u == "Workload")),
        load_balancer: uses.is_some_and(|u| u.iter().any(|u| u == "LoadBalancer")),
    })
}
