//! The kernel-truth findings, table-style, on a `ptp`-laid node.

use std::sync::Arc;

use crate::{
    detect::{Cause, Finding, FindingKind, detect},
    inventory::{
        Inventory, NodeFacts, OperState,
        fixtures::{ME, OTHER, ip, net, pod},
        ptp_fixtures::{PTP_PODS, hold, ptp_inventory, reroute, veth},
    },
};

/// The API's pods a, b, c at `PTP_PODS`, Running on this node.
pub(super) fn api() -> Vec<crate::inventory::Pod> {
    ["a", "b", "c"]
        .iter()
        .zip(PTP_PODS)
        .map(|(n, a)| pod(n, ME, &[a]))
        .collect()
}

/// The kernel-truth findings as (kind, ip, pod name, device).
fn kernel(inv: &Inventory) -> Vec<(FindingKind, String, Option<String>, Option<String>)> {
    detect(inv)
        .into_iter()
        .filter(|f| matches!(f.cause, Cause::Kernel(_)))
        .map(|f: Finding| {
            (
                f.kind,
                f.ip_text(),
                f.pod().map(|p| p.name.clone()),
                f.owner.device.clone(),
            )
        })
        .collect()
}

fn one(
    kind: FindingKind,
    a: &str,
    pod: Option<&str>,
    dev: &str,
) -> Vec<(FindingKind, String, Option<String>, Option<String>)> {
    vec![(
        kind,
        a.to_owned(),
        pod.map(str::to_owned),
        Some(dev.to_owned()),
    )]
}

#[test]
fn a_healthy_ptp_node_shows_nothing_and_its_table_has_a_row_per_pod() {
    let inv = ptp_inventory(api());
    assert!(kernel(&inv).is_empty());
    let table = super::truth_table(&inv);
    assert_eq!(table.len(), 3);
    let row = &table[0];
    assert_eq!(row.ip, ip("10.250.1.2"));
    assert_eq!(row.holders[0].iface, "veth0");
    assert_eq!(row.holders[0].peer.as_deref(), Some("eth0"));
    assert_eq!(
        row.route.as_ref().and_then(|r| r.iface.as_deref()),
        Some("veth0")
    );
    assert_eq!(row.pods[0].pod, "tenant/a");
}

#[test]
fn a_route_moved_onto_another_pods_veth_sends_the_pod_to_that_pod() {
    let mut inv = ptp_inventory(api());
    reroute(&mut inv, "10.250.1.2", veth(1));
    assert_eq!(
        kernel(&inv),
        one(
            FindingKind::PodRouteMisdirected,
            "10.250.1.2",
            Some("a"),
            "veth1"
        )
    );
    let f = detect(&inv)
        .into_iter()
        .find(|f| f.kind == FindingKind::PodRouteMisdirected)
        .expect("finding");
    let Cause::Kernel(k) = &f.cause else {
        panic!("kernel cause")
    };
    assert_eq!(k.other_pod.as_ref().map(|p| p.name.as_str()), Some("b"));
    assert_eq!(
        k.row.holders[0].iface, "veth0",
        "the namespace that holds it"
    );
}

#[test]
fn an_address_changed_inside_a_namespace_leaves_the_route_pointing_at_no_holder() {
    let mut inv = ptp_inventory(api());
    hold(&mut inv, 2, &["10.250.1.40"]);
    // The new address is in no pod's status and no route leads to it: not a leak.
    assert_eq!(
        kernel(&inv),
        one(
            FindingKind::PodRouteMisdirected,
            "10.250.1.4",
            Some("c"),
            "veth2"
        )
    );
}

#[test]
fn a_sandbox_no_pod_owns_is_a_leak_named_on_the_node() {
    let mut pods = api();
    pods.truncate(2);
    let inv = ptp_inventory(pods);
    assert_eq!(
        kernel(&inv),
        one(
            FindingKind::LeakedSandboxAddress,
            "10.250.1.4",
            None,
            "veth2"
        )
    );
    // A pod elsewhere with the address is named: the address is held twice.
    let mut pods = api();
    pods[2].node = Some(OTHER.into());
    let f = detect(&ptp_inventory(pods))
        .into_iter()
        .find(|f| f.kind == FindingKind::LeakedSandboxAddress)
        .expect("finding");
    let Cause::Kernel(k) = &f.cause else {
        panic!("kernel cause")
    };
    assert_eq!(k.other_pod.as_ref().map(|p| p.name.as_str()), Some("c"));
}

#[test]
fn an_unrouted_namespace_address_is_a_leak_only_inside_the_pod_range() {
    let mut pods = api();
    pods.truncate(2);
    let mut inv = ptp_inventory(pods);
    Arc::make_mut(&mut inv.host)
        .routes
        .retain(|r| r.dst.addr() != ip("10.250.1.4"));
    assert!(kernel(&inv).is_empty(), "a router's address, say");
    let unrouted = inv.clone();
    inv.node_facts = Some(NodeFacts {
        name: ME.into(),
        pod_cidrs: vec![net("10.250.1.0/24")],
        ..NodeFacts::default()
    });
    assert_eq!(kernel(&inv).len(), 1);
    // The range from this node's CiliumNode (cluster-pool leaves the Node's
    // empty) or its ovn-kubernetes node subnets, alike; another node's is not it.
    for (name, cilium) in [(ME, true), (ME, false), (OTHER, true)] {
        let mut inv = unrouted.clone();
        let mut c = crate::inventory::CniNode {
            name: name.into(),
            ..crate::inventory::CniNode::default()
        };
        if cilium {
            c.pod_cidrs = vec![net("10.250.1.0/24")];
            inv.cluster.cilium_nodes = Arc::new(vec![c]);
        } else {
            c.ovn_subnets = vec![net("10.250.1.0/24")];
            inv.cluster.annotated_nodes = Arc::new(vec![c]);
        }
        assert_eq!(
            kernel(&inv).len(),
            usize::from(name == ME),
            "{name} {cilium}"
        );
    }
}

#[test]
fn two_namespaces_holding_one_address_name_both_interfaces() {
    let mut inv = ptp_inventory(api());
    hold(&mut inv, 1, &["10.250.1.3", "10.250.1.2"]);
    let got = kernel(&inv);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, FindingKind::PodAddressHeldTwice);
    assert_eq!(got[0].2.as_deref(), Some("a"));
    let f = detect(&inv)
        .into_iter()
        .find(|f| f.kind == FindingKind::PodAddressHeldTwice)
        .expect("finding");
    let Cause::Kernel(k) = &f.cause else {
        panic!("kernel cause")
    };
    let ifaces: Vec<_> = k.row.holders.iter().map(|h| h.iface.as_str()).collect();
    assert_eq!(ifaces, ["veth0", "veth1"]);
    // Pod b's namespace took a's address: a pod with NET_ADMIN can do that, so
    // it never speaks for the node.
    assert_eq!(f.trust, crate::detect::Trust::Hint);
}

#[test]
fn a_running_pod_no_namespace_holds_is_found_where_pods_get_routes() {
    let mut pods = api();
    pods.push(pod("d", ME, &["10.250.1.9"]));
    let inv = ptp_inventory(pods.clone());
    assert_eq!(
        kernel(&inv),
        vec![(
            FindingKind::PodAddressNotHeld,
            "10.250.1.9".to_owned(),
            Some("d".to_owned()),
            None
        )]
    );
    // Multus gave its eth0 another network (SR-IOV, macvlan): no veth is expected.
    pods[3].default_network_elsewhere = true;
    assert!(kernel(&ptp_inventory(pods.clone())).is_empty());
    pods[3].default_network_elsewhere = false;
    // Pending: its sandbox may still be on its way.
    pods[3].phase = Some("Pending".into());
    assert!(kernel(&ptp_inventory(pods)).is_empty());
}

#[test]
fn a_route_out_a_down_interface_is_a_dead_end() {
    let mut inv = ptp_inventory(api());
    Arc::make_mut(&mut inv.host).namespaces.ifaces[1].state = OperState::Down;
    assert_eq!(
        kernel(&inv),
        one(
            FindingKind::PodRouteDeadEnd,
            "10.250.1.3",
            Some("b"),
            "veth1"
        )
    );
}

#[test]
fn nothing_is_found_where_the_namespaces_were_not_read() {
    let mut inv = ptp_inventory(api());
    reroute(&mut inv, "10.250.1.2", veth(1));
    Arc::make_mut(&mut inv.host).namespaces.read = false;
    assert!(kernel(&inv).is_empty());
    assert!(super::truth_table(&inv).is_empty());
}

#[test]
fn a_kube_ovn_node_without_pod_routes_reports_no_missing_sandbox() {
    // The fixture's own node: pods behind ovn0, no veth peers seen, no /32s.
    let mut inv = crate::inventory::fixtures::inventory(api());
    Arc::make_mut(&mut inv.host).namespaces.read = true;
    assert!(kernel(&inv).is_empty());
}

#[test]
fn an_unread_namespace_makes_no_pod_look_unheld() {
    let mut pods = api();
    pods.push(pod("d", ME, &["10.250.1.9"]));
    let mut inv = ptp_inventory(pods);
    let host = Arc::make_mut(&mut inv.host);
    host.namespaces.namespaces.remove(&2);
    host.namespaces.unread.push(crate::inventory::Unread {
        nsid: 2,
        iface: "veth2".into(),
        reason: "gone".into(),
    });
    // Pod c's namespace and pod d's may be the unread one: nothing is said of them.
    assert!(kernel(&inv).is_empty(), "{:?}", kernel(&inv));
}

#[test]
fn a_calico_named_veth_names_its_pod_even_where_its_namespace_holds_nothing_known() {
    let mut inv = ptp_inventory(api());
    // Calico's names: pod b's veth is cali + sha1("tenant.b")[..11].
    let host = Arc::make_mut(&mut inv.host);
    host.namespaces.ifaces[1].name = "calibc08975e859".into();
    host.links
        .iter_mut()
        .find(|l| l.index == veth(1))
        .expect("link")
        .name = "calibc08975e859".into();
    hold(&mut inv, 1, &["10.250.1.77"]);
    reroute(&mut inv, "10.250.1.2", veth(1));
    let f = detect(&inv)
        .into_iter()
        .find(|f| f.ip == Some(ip("10.250.1.2")))
        .expect("finding");
    assert_eq!(f.kind, FindingKind::PodRouteMisdirected);
    let Cause::Kernel(k) = &f.cause else {
        panic!("kernel cause")
    };
    let reached = k.reached.as_ref().expect("reached");
    assert_eq!(reached.named_for.as_deref(), Some("tenant/b"));
    assert_eq!(k.other_pod.as_ref().map(|p| p.name.as_str()), Some("b"));
}

#[test]
fn a_healthy_thousand_pod_node_in_a_hundred_thousand_pod_cluster_finds_nothing_and_tables_each_pod()
{
    let ip_of = |i: usize| {
        std::net::Ipv4Addr::from(0x0a64_0002 + u32::try_from(i).expect("small")).to_string()
    };
    let mut pods: Vec<_> = (0..1000)
        .map(|i| pod(&format!("p{i}"), ME, &[&ip_of(i)]))
        .collect();
    pods.extend((1000..100_000).map(|i| pod(&format!("q{i}"), OTHER, &[&ip_of(i)])));
    let mut inv = crate::inventory::fixtures::inventory(pods);
    let host = Arc::make_mut(&mut inv.host);
    host.namespaces.read = true;
    for i in 0..1000 {
        crate::inventory::ptp_fixtures::lay_out(host, i, &ip_of(i));
    }
    assert!(kernel(&inv).is_empty());
    assert_eq!(super::truth_table(&inv).len(), 1000);
}

#[test]
fn the_nodes_own_addresses_behind_a_veth_are_no_leak() {
    // Cilium's health endpoint lives in a namespace of its own behind
    // lxc_health, holding the health IP inside the pod range: no pod has it.
    let mut pods = api();
    pods.truncate(2);
    let mut inv = ptp_inventory(pods);
    let mut me = crate::inventory::CniNode {
        name: ME.into(),
        ..Default::default()
    };
    me.add(
        ip("10.250.1.4"),
        crate::inventory::Role::Health,
        crate::inventory::Source::SpecHealth,
    );
    inv.cluster.cilium_nodes = Arc::new(vec![me]);
    assert!(kernel(&inv).is_empty(), "{:?}", kernel(&inv));
}

#[test]
fn a_terminating_or_finished_pods_sandbox_is_no_leak() {
    // Pod c is being deleted (or has finished): kubelet has not torn down its
    // sandbox yet, which still holds its address.
    for phase in ["Running", "Succeeded"] {
        let mut pods = api();
        pods[2].terminating = phase == "Running";
        pods[2].phase = Some(phase.into());
        let inv = ptp_inventory(pods);
        assert!(
            !kernel(&inv)
                .iter()
                .any(|f| f.0 == FindingKind::LeakedSandboxAddress),
            "{phase}: {:?}",
            kernel(&inv)
        );
    }
}

#[test]
fn a_sandbox_that_took_the_address_off_its_veth_is_not_misdirected() {
    // gVisor (and KubeVirt's bridge binding) move the pod address off the
    // veth: the namespace behind the route holds nothing, no one else holds it.
    let mut inv = ptp_inventory(api());
    let host = Arc::make_mut(&mut inv.host);
    for n in host.namespaces.namespaces.values_mut() {
        Arc::make_mut(n)
            .addresses
            .retain(|a| a.ip != ip("10.250.1.4"));
    }
    assert!(kernel(&inv).is_empty(), "{:?}", kernel(&inv));
}
