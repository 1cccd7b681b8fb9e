//! AllocatorOverlap: Cilium's addresses (or range) inside a kube-ovn Subnet.

use std::sync::Arc;

use super::{row, rows};
use crate::{
    detect::{Cause, FindingKind::*, Remedy, Role::*, Scope::*, detect},
    inventory::{
        IpRange,
        fixtures::{ME, OTHER, cilium_node, inventory, ip, net, ovn_default},
    },
};

#[test]
fn allocator_overlap_is_found_in_the_cozystack_configuration() {
    // ovn-default over the whole pod CIDR with only the gateway excluded, while
    // Cilium takes its addresses from node-a's podCIDR 10.244.4.0/24 in the same /16.
    let mut inv = inventory(vec![]);
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
    let f = detect(&inv);
    // One finding for the one range and Subnet, named by the router IP,
    // listing the three addresses one excludeIps entry fixes.
    assert_eq!(
        rows(&f),
        vec![row(
            AllocatorOverlap,
            SameNode,
            "10.244.4.251",
            "",
            ME,
            Router,
            Some("cilium_host")
        )]
    );
    let router = &f[0];
    assert!(
        matches!(&router.cause, Cause::Overlap { subnet, cilium_range: Some((r, "CiliumNode.spec.ipam.podCIDRs")), held: true, .. }
            if subnet == "ovn-default" && *r == net("10.244.4.0/24")),
        "{:?}",
        router.cause
    );
    let Cause::Overlap { addresses, .. } = &router.cause else {
        unreachable!()
    };
    assert_eq!(
        addresses
            .iter()
            .map(|a| (a.role, a.ip.to_string()))
            .collect::<Vec<_>>(),
        [
            (Router, "10.244.4.251".to_owned()),
            (Ingress, "10.244.4.12".to_owned()),
            (Health, "10.244.4.104".to_owned()),
        ]
    );
    assert_eq!(
        router.remedy,
        Remedy::ExcludeFromSubnet {
            subnet: "ovn-default".into(),
            exclude: IpRange {
                first: ip("10.244.4.0"),
                last: ip("10.244.4.255")
            },
            block: Some(net("10.244.0.0/16")),
        }
    );
    assert!(router.pod().is_none());
}

#[test]
fn allocator_overlap_is_not_found_once_cilium_s_range_is_excluded() {
    // The fix of seed 001's alternative: Cilium's pool is a /21 cut from the end of
    // the pod CIDR, and kube-ovn excludes exactly that /21.
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cluster.cilium_nodes)[0] = cilium_node(
        ME,
        &[ip("10.244.252.77")],
        &[ip("10.244.252.12")],
        &[],
        &[net("10.244.252.0/24")],
    );
    Arc::make_mut(&mut inv.host)
        .addresses
        .retain(|a| a.device != "cilium_host");
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[
        ("10.244.0.1", "10.244.0.1"),
        ("10.244.248.0", "10.244.255.255"),
    ])]);
    assert_eq!(rows(&detect(&inv)), vec![]);
}

#[test]
fn a_range_partly_excluded_is_still_an_overlap_before_any_address_is_taken() {
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cluster.cilium_nodes)[0]
        .addresses
        .clear();
    // Only the first half of 10.244.4.0/24 is excluded.
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.127")])]);
    let f = detect(&inv);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].kind, f[0].ip),
        (AllocatorOverlap, Some(ip("10.244.4.128")))
    );
    assert!(
        matches!(&f[0].cause, Cause::Overlap { cilium_range: Some((r, _)), held: false, .. } if *r == net("10.244.4.0/24")),
        "{:?}",
        f[0].cause
    );
}

#[test]
fn other_nodes_overlaps_are_theirs_to_report() {
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cluster.cilium_nodes).retain(|c| c.name == OTHER);
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[])]);
    assert_eq!(rows(&detect(&inv)), vec![]);
}

#[test]
fn one_overlap_per_range_and_subnet_and_an_address_outside_every_range_alone() {
    // Two primary Subnets, each over one of two Cilium ranges (multi-pool), and
    // an Ingress IP in no range Cilium reports: its fix is its own.
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cluster.cilium_nodes)[0] = cilium_node(
        ME,
        &[ip("10.244.4.251"), ip("10.245.0.7")],
        &[ip("10.246.0.9")],
        &[ip("10.244.4.104")],
        &[net("10.244.4.0/24"), net("10.245.0.0/24")],
    );
    let mut a = ovn_default(&[]);
    a.cidrs = vec![net("10.244.0.0/16")];
    let mut b = ovn_default(&[]);
    b.name = "tenant-b".into();
    b.is_default = false;
    b.cidrs = vec![net("10.245.0.0/16"), net("10.246.0.0/16")];
    inv.cluster.subnets = Arc::new(vec![a, b]);
    let f = detect(&inv);
    let got: Vec<(String, String, usize)> = f
        .iter()
        .map(|f| match &f.cause {
            Cause::Overlap {
                subnet, addresses, ..
            } => (subnet.clone(), f.ip_text(), addresses.len()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            ("ovn-default".to_owned(), "10.244.4.251".to_owned(), 2),
            ("tenant-b".to_owned(), "10.245.0.7".to_owned(), 1),
            ("tenant-b".to_owned(), "10.246.0.9".to_owned(), 1),
        ],
        "{f:#?}"
    );
}
