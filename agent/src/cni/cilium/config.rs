//! Cilium's configuration, the `data` of its `cilium-config` ConfigMap: the
//! IPAM mode and, in cluster-pool mode, the pool and its per-node mask sizes.

use std::collections::BTreeMap;

use crate::{
    cni::read::{quote, reporter},
    inventory::{CiliumConfig, Invalid, ip_text::parse_cidr},
};

/// Most CIDRs read from one field: a real config has one or two per family.
const CIDRS_MAX: usize = 64;

/// The `data` of Cilium's `cilium-config` ConfigMap as [`CiliumConfig`].
pub fn cilium_config(data: &BTreeMap<String, String>, problems: &mut Vec<Invalid>) -> CiliumConfig {
    let mut bad = reporter(problems, "configmaps", "cilium-config");
    let mut cluster_pool = Vec::new();
    for key in ["cluster-pool-ipv4-cidr", "cluster-pool-ipv6-cidr"] {
        let Some(value) = data.get(key) else { continue };
        // Several CIDRs are separated by spaces (Helm joins the list so); commas seen too.
        for part in value
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|p| !p.is_empty())
            .take(CIDRS_MAX)
        {
            match parse_cidr(part) {
                Some(c) => cluster_pool.push(c.net),
                None => bad(format!(
                    "data.{key} part {} is not a CIDR; ignored",
                    quote(part)
                )),
            }
        }
    }
    let mut mask = |key: &str, max: u8| {
        let value = data.get(key)?;
        let m = value.trim().parse::<u8>().ok().filter(|m| *m <= max);
        if m.is_none() {
            bad(format!(
                "data.{key} {} is not a prefix length; ignored",
                quote(value)
            ));
        }
        m
    };
    let ipv4_mask_size = mask("cluster-pool-ipv4-mask-size", 32);
    let ipv6_mask_size = mask("cluster-pool-ipv6-mask-size", 128);
    CiliumConfig {
        ipam: data
            .get("ipam")
            .map(|m| m.trim().to_owned())
            .unwrap_or_default(),
        cluster_pool,
        ipv4_mask_size,
        ipv6_mask_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_pool_cidrs_are_space_separated_in_both_families_and_mask_sizes_read() {
        let data: BTreeMap<String, String> = [
            ("ipam", "cluster-pool"),
            ("cluster-pool-ipv4-cidr", "100.65.0.0/16 100.66.0.0/16"),
            ("cluster-pool-ipv6-cidr", "fd00:65::/104"),
            ("cluster-pool-ipv4-mask-size", "24"),
            ("cluster-pool-ipv6-mask-size", "two"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let mut problems = vec![];
        let c = cilium_config(&data, &mut problems);
        assert_eq!(c.ipam, "cluster-pool");
        assert_eq!(c.cluster_pool.len(), 3);
        assert_eq!((c.ipv4_mask_size, c.ipv6_mask_size), (Some(24), None));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].problem.contains("\"two\""), "{problems:?}");
    }
}
