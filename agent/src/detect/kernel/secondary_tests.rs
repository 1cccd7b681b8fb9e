//! DuplicateSecondaryIP from the kernel, table-style: a `ptp`-laid node whose
//! pods a and b (older first) also hold one address on a second link `net1`.

use std::sync::Arc;

use super::tests::api;
use crate::{
    detect::{Cause, Finding, FindingKind, Scope, Trust, detect},
    inventory::{
        Inventory, IpSource, Link, Lower, NsAddress, NsLink, OperState, Pod, SecondaryIp, Source,
        fixtures::ip,
        ptp_fixtures::{PTP_PODS, ns_address, veth},
    },
};

const SHARED: &str = "192.168.50.4";
/// The host's own nsid, as it numbers itself when reading the pods' links.
const HOST: i32 = 99;
/// The host's links the secondary links may be stacked on.
const ETH1: u32 = 50;
const ETH2: u32 = 51;

/// Pods a, b, c (created in that order) on a `ptp` node; pod `i`'s namespace
/// also has `net1` on `lowers[i]` holding [`SHARED`].
fn node(lowers: &[Lower]) -> Inventory {
    let mut pods = api();
    for (p, t) in pods.iter_mut().zip([10, 20, 30]) {
        p.created = Some(t);
    }
    let mut inv = crate::inventory::ptp_fixtures::ptp_inventory(pods);
    let host = Arc::make_mut(&mut inv.host);
    for (index, name) in [(ETH1, "eth1"), (ETH2, "eth2")] {
        host.links.push(Link {
            index,
            name: name.into(),
        });
    }
    for (nsid, ns) in &mut host.namespaces.namespaces {
        let ns = Arc::make_mut(ns);
        let i = usize::try_from(*nsid).expect("small");
        ns.links[0].lower = Some(Lower {
            nsid: HOST,
            index: veth(i),
            stacked: false,
        });
        if let Some(lower) = lowers.get(i) {
            ns.links.push(NsLink {
                index: 3,
                name: "net1".into(),
                state: OperState::Up,
                lower: Some(*lower),
            });
            ns.addresses.push(NsAddress {
                index: 3,
                ..ns_address(SHARED)
            });
        }
    }
    inv
}

fn macvlan(index: u32) -> Lower {
    Lower {
        nsid: HOST,
        index,
        stacked: true,
    }
}

fn duplicates(inv: &Inventory) -> Vec<Finding> {
    detect(inv)
        .into_iter()
        .filter(|f| f.kind == FindingKind::DuplicateSecondaryIp)
        .collect()
}

/// The pods' network-status entries for `net1`, where `Some`.
fn annotate(inv: &mut Inventory, networks: &[Option<&str>]) {
    let pods: &mut Vec<Pod> = Arc::make_mut(&mut inv.cluster.pods);
    for (p, network) in pods.iter_mut().zip(networks.iter().copied()) {
        p.secondary = network
            .map(|n| SecondaryIp {
                network: n.into(),
                interface: Some("net1".into()),
                ip: ip(SHARED),
            })
            .into_iter()
            .collect();
    }
}

#[test]
fn macvlans_on_one_host_link_holding_one_address_are_the_newer_pods_duplicate() {
    let found = duplicates(&node(&[macvlan(ETH1), macvlan(ETH1)]));
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(f.pod().map(|p| p.name.as_str()), Some("b"));
    assert_eq!(f.ip, Some(ip(SHARED)));
    assert_eq!((f.scope, f.trust), (Scope::SameNode, Trust::Hint));
    assert_eq!(f.owner.source, Source::Kernel);
    assert_eq!(f.owner.device.as_deref(), Some("net1"));
    let Cause::Duplicate {
        site,
        holder,
        network,
    } = &f.cause
    else {
        panic!("{f:?}")
    };
    assert_eq!(site.ip_source, IpSource::Kernel);
    assert_eq!(holder.name, "a");
    assert!(
        network.as_deref().is_some_and(|n| n.contains("eth1")),
        "{network:?}"
    );
}

#[test]
fn macvlans_on_two_host_links_or_peers_of_veths_are_not_one_network() {
    assert_eq!(duplicates(&node(&[macvlan(ETH1), macvlan(ETH2)])), []);
    // Two veths to the host: nothing in the kernel ties them to one network.
    let veth = |index| Lower {
        stacked: false,
        ..macvlan(index)
    };
    assert_eq!(duplicates(&node(&[veth(ETH1), veth(ETH1)])), []);
    // A parent in another namespace than the host's.
    let elsewhere = Lower {
        nsid: HOST + 1,
        ..macvlan(ETH1)
    };
    assert_eq!(duplicates(&node(&[elsewhere, elsewhere])), []);
}

#[test]
fn network_status_naming_both_interfaces_decides_the_network() {
    // Different networks on one parent: isolated by design, no finding.
    let mut inv = node(&[macvlan(ETH1), macvlan(ETH1)]);
    annotate(&mut inv, &[Some("tenant/red"), Some("tenant/blue")]);
    assert_eq!(duplicates(&inv), []);
    // One network on two parents: a finding naming the network.
    let mut inv = node(&[macvlan(ETH1), macvlan(ETH2)]);
    annotate(&mut inv, &[Some("tenant/red"), Some("tenant/red")]);
    let found = duplicates(&inv);
    assert_eq!(found.len(), 1, "{found:?}");
    let Cause::Duplicate { network, .. } = &found[0].cause else {
        panic!("{found:?}")
    };
    assert!(
        network
            .as_deref()
            .is_some_and(|n| n.starts_with("tenant/red")),
        "{network:?}"
    );
    // Only one side annotated: the kernel's tie decides.
    let mut inv = node(&[macvlan(ETH1), macvlan(ETH1)]);
    annotate(&mut inv, &[Some("tenant/red"), None]);
    assert_eq!(duplicates(&inv).len(), 1);
    let mut inv = node(&[macvlan(ETH1), macvlan(ETH2)]);
    annotate(&mut inv, &[None, Some("tenant/red")]);
    assert_eq!(duplicates(&inv), []);
}

/// Each finding as (pod, the older pod it names).
fn pairs(found: &[Finding]) -> Vec<(String, String)> {
    found
        .iter()
        .filter_map(|f| match &f.cause {
            Cause::Duplicate { site, holder, .. } => {
                Some((site.pod.name.clone(), holder.name.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_duplicate_on_one_network_is_found_past_an_older_pod_on_another() {
    let pair = |p: &str, o: &str| (p.to_owned(), o.to_owned());
    // a on red, b and c on blue, all on one host link: c names b, not a.
    let mut inv = node(&[macvlan(ETH1); 3]);
    let (red, blue) = (Some("tenant/red"), Some("tenant/blue"));
    annotate(&mut inv, &[red, blue, blue]);
    assert_eq!(pairs(&duplicates(&inv)), [pair("c", "b")]);
    // c without network-status: the host link ties it to the oldest, a.
    annotate(&mut inv, &[red, blue, None]);
    assert_eq!(pairs(&duplicates(&inv)), [pair("c", "a")]);
}

#[test]
fn a_namespace_holding_another_pods_address_is_its_pods_only_where_the_host_routes_there() {
    // b's namespace also holds a's address: the host routes it to a's.
    let mut inv = node(&[macvlan(ETH1), macvlan(ETH1)]);
    let host = Arc::make_mut(&mut inv.host);
    let b = Arc::make_mut(host.namespaces.namespaces.get_mut(&1).expect("b's"));
    b.addresses.push(ns_address(PTP_PODS[0]));
    let found = duplicates(&inv);
    assert_eq!(pairs(&found), [("b".to_owned(), "a".to_owned())]);
    // No per-pod routes: b's namespace could be a's or b's, and is named for neither.
    Arc::make_mut(&mut inv.host).routes.clear();
    assert_eq!(duplicates(&inv), []);
}

#[test]
fn a_namespace_no_live_pod_of_the_node_maps_to_is_not_named() {
    let mut inv = node(&[macvlan(ETH1), macvlan(ETH1)]);
    Arc::make_mut(&mut inv.cluster.pods)[0].terminating = true;
    assert_eq!(duplicates(&inv), []);
    let mut inv = node(&[macvlan(ETH1), macvlan(ETH1)]);
    Arc::make_mut(&mut inv.cluster.pods).remove(1);
    assert_eq!(duplicates(&inv), []);
}

#[test]
fn a_node_without_secondary_links_has_no_duplicate() {
    let inv = node(&[macvlan(ETH1), macvlan(ETH1)]);
    let mut plain = inv.clone();
    for ns in Arc::make_mut(&mut plain.host)
        .namespaces
        .namespaces
        .values_mut()
    {
        Arc::make_mut(ns).addresses.retain(|a| a.index == 2);
    }
    assert_eq!(duplicates(&plain), []);
    assert_eq!(duplicates(&inv).len(), 1);
}
