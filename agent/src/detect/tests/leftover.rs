//! Calico's and the bridge plugin's refusals over what the node kept from
//! before, as the real messages of
//! `tests/corpus/realworld/sandbox/event-messages-other-cnis.json` read
//! (kube/objects/wordings_tests.rs pins the reading; detection does not
//! import the parser's layer).

use std::sync::Arc;

use crate::{
    detect::{Cause, Finding, FindingKind, Remedy, Role, Trust, detect},
    inventory::{
        ClusterState, HostNetwork, Inventory, Link, LocalAddress, Pod, Route, RouteKind,
        SandboxFailure, SandboxRefusal, TABLE_MAIN,
        fixtures::{ME, OTHER, ip, net, pod},
    },
};

/// Calico#8180's message: 172.25.136.1 already routed through calif6cb5368383.
const CALICO: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to \
    setup network for sandbox \"3c8b059ce4c4\": plugin type=\"calico\" failed (add): error adding \
    host side routes for interface: calid29a1cadef5, error: route (Ifindex: 131, Dst: \
    172.25.136.1/32, Scope: link) already exists for an interface other than 'calid29a1cadef5': \
    route (Ifindex: 12, Dst: 172.25.136.1/32, Scope: link, Iface: calif6cb5368383)";
/// calico#1253's: no second route, so no interface named.
const CALICO_OLD: &str = "Error adding network: error adding host side routes for interface: \
    cali05ad595351c, error: route (Ifindex: 93, Dst: 10.203.131.144/32, Scope: \
    %!!(MISSING)s(netlink.Scope=253)) already exists for an interface other than \
    'cali05ad595351c'";
/// minikube PR#9046's: flannel's cni0 wants 10.244.0.1/24.
const BRIDGE: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to \
    set up sandbox container \"efd353915df8\" network for pod \"coredns-f9fd979d6-jxvx5\": \
    networkPlugin cni failed to set up pod \"coredns-f9fd979d6-jxvx5_kube-system\" network: \
    failed to set bridge addr: \"cni0\" already has an IP address different from 10.244.0.1/24";

/// What each message reads as.
fn read(message: &str) -> SandboxRefusal {
    match message {
        CALICO => SandboxRefusal::HostRouteTaken {
            dst: Some(ip("172.25.136.1")),
            holder: Some("calif6cb5368383".into()),
        },
        CALICO_OLD => SandboxRefusal::HostRouteTaken {
            dst: Some(ip("10.203.131.144")),
            holder: None,
        },
        BRIDGE => SandboxRefusal::BridgeAddressDiffers {
            bridge: Some("cni0".into()),
            gateway: Some(net("10.244.0.1/24")),
        },
        other => panic!("not a case: {other}"),
    }
}

/// A pod of this node still starting, refused with `message` (as read).
fn refused(message: &str) -> Inventory {
    let mut p = pod("web", ME, &[]);
    p.phase = Some("Pending".into());
    let refusal = read(message);
    Inventory {
        node: ME.into(),
        cluster: ClusterState {
            pods: Arc::new(vec![p]),
            sandbox: Arc::new(vec![SandboxFailure {
                namespace: "tenant".into(),
                pod: "web".into(),
                uid: "uid-web".into(),
                refusal,
                count: 7,
                message: message.into(),
            }]),
            ..Default::default()
        },
        ..Inventory::default()
    }
}

/// `inv` with `device` (index 9) holding `address` and its connected route,
/// or a host route to it when `address` is a /32.
fn with_device(mut inv: Inventory, device: &str, address: Option<&str>, route: &str) -> Inventory {
    let mut host = HostNetwork::default();
    host.links.push(Link {
        index: 9,
        name: device.into(),
    });
    if let Some(a) = address {
        host.addresses.push(LocalAddress {
            ip: ip(a),
            device: device.into(),
        });
    }
    host.routes.push(Route {
        table: TABLE_MAIN,
        dst: net(route),
        kind: RouteKind::Unicast,
        oif: Some(9),
        gateway: None,
    });
    inv.host = Arc::new(host);
    inv
}

fn only(inv: &Inventory) -> Finding {
    let f = detect(inv);
    assert_eq!(f.len(), 1, "{f:#?}");
    f[0].clone()
}

#[test]
fn calicos_route_through_a_leftover_veth_names_the_address_the_interface_and_calicos_fix() {
    let inv = with_device(refused(CALICO), "calif6cb5368383", None, "172.25.136.1/32");
    let f = only(&inv);
    assert_eq!(f.kind, FindingKind::PodRouteTaken);
    assert_eq!(f.ip, Some(ip("172.25.136.1")));
    assert_eq!(f.owner.device.as_deref(), Some("calif6cb5368383"));
    assert_eq!(f.owner.role, Role::Local);
    assert_eq!(f.pod().map(|p| p.name.as_str()), Some("web"));
    assert_eq!(
        f.remedy,
        Remedy::ClearCalicoRoute {
            node: ME.into(),
            ip: ip("172.25.136.1"),
            interface: Some("calif6cb5368383".into()),
            holder: None,
        }
    );
    let Cause::Leftover { seen, kubelet, .. } = &f.cause else {
        panic!("{f:?}")
    };
    assert!(*seen, "the kernel's route through that veth");
    assert_eq!(kubelet.count, 7);
    // An Event is all the refusal rests on: a hint, on the pod, not the Node.
    assert_eq!(f.trust, Trust::Hint);
    assert!(!f.is_node_level());
}

#[test]
fn calicos_address_held_by_a_live_pod_is_a_double_allocation_with_that_pod_named() {
    let mut inv = refused(CALICO);
    let mut pods = (*inv.cluster.pods).clone();
    pods.push(pod("db-0", ME, &["172.25.136.1"]));
    inv.cluster.pods = Arc::new(pods);
    let f = only(&inv);
    assert_eq!(f.kind, FindingKind::PodRouteTaken);
    assert_eq!(f.owner.role, Role::Pod);
    let Remedy::ClearCalicoRoute { holder, .. } = &f.remedy else {
        panic!("{f:?}")
    };
    assert_eq!(holder.as_ref().map(|h| h.name.as_str()), Some("db-0"));
}

#[test]
fn calicos_older_message_takes_the_interface_from_the_kernel() {
    let inv = with_device(
        refused(CALICO_OLD),
        "calibe6f82e5309",
        None,
        "10.203.131.144/32",
    );
    let f = only(&inv);
    assert_eq!(f.ip, Some(ip("10.203.131.144")));
    assert_eq!(f.owner.device.as_deref(), Some("calibe6f82e5309"));
    // Without the kernel's route, the message names no interface and none is made up.
    let f = only(&refused(CALICO_OLD));
    assert_eq!(f.owner.device, None);
    assert!(matches!(f.cause, Cause::Leftover { seen: false, .. }));
}

#[test]
fn the_bridges_refusal_is_the_stale_bridge_address_on_the_pod_with_the_address_to_delete() {
    // cni0 kept 10.244.3.1/24 of the node's previous range; it wants 10.244.0.1/24.
    let inv = with_device(refused(BRIDGE), "cni0", Some("10.244.3.1"), "10.244.3.0/24");
    let f = only(&inv);
    assert_eq!(f.kind, FindingKind::StaleBridgeAddress);
    assert_eq!(f.ip, Some(ip("10.244.3.1")));
    assert_eq!(f.owner.device.as_deref(), Some("cni0"));
    assert_eq!(
        f.remedy,
        Remedy::DeleteBridgeAddress {
            node: ME.into(),
            bridge: "cni0".into(),
            address: net("10.244.3.1/24"),
        }
    );
    // The pod's finding, though the kind's own is the Node's.
    assert!(!f.is_node_level(), "{f:?}");
    assert_eq!(f.pod().map(|p| p.name.as_str()), Some("web"));
}

#[test]
fn the_bridges_refusal_without_the_kernels_view_asks_to_recreate_the_bridge() {
    let f = only(&refused(BRIDGE));
    assert_eq!(f.kind, FindingKind::StaleBridgeAddress);
    assert_eq!(f.ip, Some(ip("10.244.0.1")), "the gateway wanted");
    assert_eq!(
        f.remedy,
        Remedy::RecreateBridge {
            node: ME.into(),
            bridge: "cni0".into(),
            gateway: Some(net("10.244.0.1/24")),
        }
    );
}

#[test]
fn refusals_of_pods_that_started_since_or_run_elsewhere_give_nothing() {
    for message in [CALICO, BRIDGE] {
        // Started after all: the Events are from before.
        let mut inv = refused(message);
        let started: Vec<Pod> = vec![pod("web", ME, &["10.244.0.9"])];
        inv.cluster.pods = Arc::new(started);
        assert!(detect(&inv).is_empty(), "{message}");
        // Another node's pod: its own agent tells.
        let mut inv = refused(message);
        inv.cluster.pods = Arc::new(vec![pod("web", OTHER, &[])]);
        assert!(detect(&inv).is_empty(), "{message}");
    }
}

#[test]
fn another_plugins_refusal_on_the_same_layout_gives_no_calico_or_bridge_finding() {
    // The node is laid out as both refusals say, but the pod was refused in
    // host-local's and Cilium's words: neither is Calico's nor the bridge's.
    for refusal in [
        SandboxRefusal::RangeSetFull(None),
        SandboxRefusal::NoAddressLeft,
        SandboxRefusal::AddressInUse(ip("172.25.136.1")),
    ] {
        let mut inv = with_device(refused(BRIDGE), "cni0", Some("10.244.3.1"), "10.244.3.0/24");
        Arc::make_mut(&mut inv.cluster.sandbox)[0].refusal = refusal.clone();
        let kinds: Vec<FindingKind> = detect(&inv).iter().map(|f| f.kind).collect();
        assert!(
            !kinds.contains(&FindingKind::StaleBridgeAddress)
                && !kinds.contains(&FindingKind::PodRouteTaken),
            "{refusal:?}: {kinds:?}"
        );
    }
}

#[test]
fn refusals_the_kernel_shows_fixed_since_give_nothing() {
    // The leftover veth and its route were deleted: no route to the address.
    let gone = with_device(refused(CALICO), "eth0", None, "192.168.1.0/24");
    assert!(detect(&gone).is_empty(), "{:#?}", detect(&gone));
    // cni0 holds only the gateway it wants now.
    let fixed = with_device(refused(BRIDGE), "cni0", Some("10.244.0.1"), "10.244.0.0/24");
    assert!(detect(&fixed).is_empty(), "{:#?}", detect(&fixed));
}

#[test]
fn a_route_out_calicos_tunnel_with_no_pod_holding_it_is_no_leftover_veth() {
    // Felix's route to a pod elsewhere (a borrowed block address): deleting
    // vxlan.calico would cut the node off, so nothing is told without the pod.
    let mut inv = with_device(refused(CALICO), "vxlan.calico", None, "172.25.136.1/32");
    Arc::make_mut(&mut inv.cluster.sandbox)[0].refusal = SandboxRefusal::HostRouteTaken {
        dst: Some(ip("172.25.136.1")),
        holder: Some("vxlan.calico".into()),
    };
    assert!(detect(&inv).is_empty(), "{:#?}", detect(&inv));
    // The pod elsewhere holding it is known: Calico handed it out twice.
    let mut p = pod("api", OTHER, &["172.25.136.1"]);
    p.phase = Some("Running".into());
    Arc::make_mut(&mut inv.cluster.pods).push(p);
    let f = only(&inv);
    assert!(
        matches!(&f.remedy, Remedy::ClearCalicoRoute { holder: Some(h), .. } if h.name == "api"),
        "{f:#?}"
    );
}

#[test]
fn a_multus_bridge_outside_the_nodes_range_is_no_stale_pod_bridge() {
    // Two attachments share br1 with different subnets: the bridge plugin
    // refuses the second in the same words, about no podCIDR at all.
    let mut inv = with_device(refused(BRIDGE), "br1", Some("10.10.0.1"), "10.10.0.0/24");
    Arc::make_mut(&mut inv.cluster.sandbox)[0].refusal = SandboxRefusal::BridgeAddressDiffers {
        bridge: Some("br1".into()),
        gateway: Some(net("10.20.0.1/24")),
    };
    assert!(detect(&inv).is_empty(), "{:#?}", detect(&inv));
}

#[test]
fn the_gateway_with_another_prefix_is_the_address_to_delete() {
    // cni0 holds the wanted gateway as a /16: the bridge plugin compares the whole CIDR.
    let inv = with_device(refused(BRIDGE), "cni0", Some("10.244.0.1"), "10.244.0.0/16");
    let f = only(&inv);
    assert_eq!(
        f.remedy,
        Remedy::DeleteBridgeAddress {
            node: ME.into(),
            bridge: "cni0".into(),
            address: net("10.244.0.1/16"),
        }
    );
}
