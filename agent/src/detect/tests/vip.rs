//! A node's own address held by another node (kubernetes#127410: an external
//! IP equal to a node's InternalIP, bound on kube-ipvs0 of every node) or
//! claimed by a Service, read from the API alone (`audit`).

use std::sync::Arc;

use crate::{
    detect::{
        Cause, FindingKind, NodeProblem, Remedy, Role, Scope, Trust, detect, vip::NodeAddressClaim,
    },
    inventory::{
        ClusterState, HostNetwork, Inventory, LocalAddress, NodeAddress, NodeFacts, ServiceAddress,
        ServiceAddresses, ServiceField, ServiceRef, Source,
        fixtures::{ME, OTHER, ip},
    },
};

fn node(name: &str, internal: &str) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        addresses: vec![NodeAddress {
            ip: ip(internal),
            kind: "InternalIP",
        }],
        ..NodeFacts::default()
    }
}

fn external_ip(service: &str, at: &str) -> (std::net::IpAddr, ServiceAddress) {
    (
        ip(at),
        ServiceAddress {
            service: ServiceRef {
                namespace: "default".into(),
                name: service.into(),
            },
            field: ServiceField::ExternalIps,
        },
    )
}

/// This node (192.168.100.11 on eth0) with `held` on `device`; OTHER is 192.168.100.12.
fn node_holding(held: &str, device: &str, services: ServiceAddresses) -> Inventory {
    let mut host = HostNetwork::default();
    for (a, d) in [("192.168.100.11", "eth0"), (held, device)] {
        host.addresses.push(LocalAddress {
            ip: ip(a),
            device: d.into(),
        });
    }
    let me = node(ME, "192.168.100.11");
    Inventory {
        node: ME.into(),
        host: Arc::new(host),
        node_facts: Some(me.clone()),
        cluster: ClusterState {
            nodes: Arc::new(vec![me, node(OTHER, "192.168.100.12")]),
            services: Arc::new(services),
            ..Default::default()
        },
        ..Inventory::default()
    }
}

fn claim(f: &crate::detect::Finding) -> &NodeAddressClaim {
    let Cause::Node(NodeProblem::NodeAddressClaimed(c)) = &f.cause else {
        panic!("{f:#?}");
    };
    c
}

#[test]
fn another_nodes_address_on_kube_ipvs0_names_that_node_and_the_service() {
    let services = ServiceAddresses::whole([external_ip("nginx", "192.168.100.12")]);
    let findings = detect(&node_holding("192.168.100.12", "kube-ipvs0", services));
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(
        (f.kind, f.scope, f.trust, f.owner.role, f.owner.source),
        (
            FindingKind::NodeAddressShadowed,
            Scope::CrossNode,
            Trust::TenantAddress,
            Role::Node,
            Source::Kernel
        )
    );
    assert!(f.is_node_level() && f.pod().is_none());
    let c = claim(f);
    assert_eq!((c.node.as_str(), c.address_type), (OTHER, "InternalIP"));
    assert_eq!(c.held, Some((ME.to_owned(), "kube-ipvs0".to_owned())));
    assert_eq!(c.services[0].service.name, "nginx");
    assert!(matches!(f.remedy, Remedy::FreeNodeAddress(_)));
}

#[test]
fn a_vip_on_the_uplink_equal_to_another_node_is_found_without_a_service() {
    // kube-vip#1288: another node's IP added as a /32 alias on the uplink.
    let f = detect(&node_holding(
        "192.168.100.12",
        "eth0",
        ServiceAddresses::default(),
    ));
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].trust, Trust::Kernel);
    assert!(claim(&f[0]).services.is_empty());
}

#[test]
fn service_addresses_and_this_nodes_own_are_no_finding() {
    // A ClusterIP on kube-ipvs0 is no node's; this node's own address is its own.
    for held in ["10.96.0.10", "192.168.100.11"] {
        let f = detect(&node_holding(
            held,
            "kube-ipvs0",
            ServiceAddresses::default(),
        ));
        assert!(f.is_empty(), "{held}: {f:#?}");
    }
    // Without the other Nodes' addresses (the agent reads only its own Node) nothing is known.
    let mut inv = node_holding("192.168.100.12", "kube-ipvs0", ServiceAddresses::default());
    inv.cluster.nodes = Arc::new(vec![node(ME, "192.168.100.11")]);
    assert!(detect(&inv).is_empty());
}

#[test]
fn from_the_api_alone_a_service_claiming_a_node_address_is_found_under_that_node() {
    let nodes = [node(ME, "192.168.100.11"), node(OTHER, "192.168.100.12")];
    let services = ServiceAddresses::whole([
        external_ip("nginx", "192.168.100.12"),
        external_ip("clean", "192.168.100.200"),
    ]);
    let found = crate::detect::vip::claimed_node_addresses(&nodes, &services);
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(
        (
            f.owner.node.as_str(),
            f.owner.source,
            f.owner.device.as_deref()
        ),
        (OTHER, Source::Services, None)
    );
    assert_eq!(claim(f).held, None);
    // k3s' ServiceLB publishes node addresses as the load balancer's ingress by
    // design: from the API alone, not a finding (the kernel shows when it binds).
    let mut lb = external_ip("traefik", "192.168.100.12");
    lb.1.field = ServiceField::LoadBalancerIngress;
    let published = ServiceAddresses::whole([lb]);
    assert!(crate::detect::vip::claimed_node_addresses(&nodes, &published).is_empty());
    // Services not read: nothing claimed, nothing found.
    let none = crate::detect::vip::claimed_node_addresses(&nodes, &ServiceAddresses::default());
    assert!(none.is_empty());
}

#[test]
fn from_the_api_alone_a_pod_on_a_services_address_is_found_with_the_service_to_fix() {
    use crate::inventory::fixtures::pod;
    let services = ServiceAddresses::whole([external_ip("mitm", "10.244.1.50")]);
    let mut gone = pod("gone-0", OTHER, &["10.244.1.50"]);
    gone.terminating = true;
    let pods = [
        pod("cart-0", OTHER, &["10.244.1.50"]),
        pod("clean-0", OTHER, &["10.244.1.51"]),
        gone,
    ];
    let found = crate::detect::vip::pods_on_service_addresses(&pods, &services);
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(
        (f.kind, f.scope, f.trust, f.owner.source),
        (
            FindingKind::LocalAddressCollision,
            Scope::SameNode,
            Trust::TenantAddress,
            Source::Services
        )
    );
    assert_eq!(f.pod().map(|p| p.name.as_str()), Some("cart-0"));
    let Remedy::RemoveServiceAddress {
        service: Some(s), ..
    } = &f.remedy
    else {
        panic!("{f:#?}");
    };
    assert_eq!(s.service.name, "mitm");
}

/// kube-vip's layout: a Service's address on the uplink (not a device that
/// holds Services' addresses only), a pod of this node on it.
fn pod_on_uplink_vip(services: ServiceAddresses) -> Inventory {
    use crate::inventory::{
        FibResult,
        fixtures::{inventory, pod, with_fib},
    };
    let mut inv = inventory(vec![pod("web", ME, &["10.244.4.50"])]);
    Arc::make_mut(&mut inv.host).addresses.push(LocalAddress {
        ip: ip("10.244.4.50"),
        device: "eth0".into(),
    });
    inv.cluster.services = Arc::new(services);
    with_fib(inv, &[("10.244.4.50", FibResult::Local { oif: Some(2) })])
}

#[test]
fn a_collision_on_the_uplink_is_cluster_trust_only_once_every_service_was_read() {
    let unreadable = || crate::inventory::Invalid {
        resource: "services",
        object: "tenant/odd".into(),
        problem: "spec.externalIPs holds \"10.244.4.5o\"".into(),
    };
    let covered = || crate::inventory::Covered::Only([ip("10.244.4.50")].into());
    let only = |unread: bool| ServiceAddresses {
        covered: covered(),
        unreadable: if unread { vec![unreadable()] } else { vec![] },
        ..ServiceAddresses::default()
    };
    let mut whole_but_one = ServiceAddresses::whole([]);
    whole_but_one.unreadable.push(unreadable());
    for (what, services, want) in [
        ("not read", ServiceAddresses::default(), Trust::Unchecked),
        ("read, none claims it", only(false), Trust::Cluster),
        ("read, one Service unreadable", only(true), Trust::Unchecked),
        (
            "a whole list, one Service unreadable",
            whole_but_one,
            Trust::Unchecked,
        ),
        (
            "claimed",
            ServiceAddresses::whole([external_ip("grab", "10.244.4.50")]),
            Trust::TenantAddress,
        ),
    ] {
        let f = detect(&pod_on_uplink_vip(services));
        assert_eq!(f.len(), 1, "{what}: {f:#?}");
        assert_eq!(
            (f[0].kind, f[0].owner.device.as_deref(), f[0].trust),
            (FindingKind::LocalAddressCollision, Some("eth0"), want),
            "{what}"
        );
        assert_eq!(f[0].trust.acted_on(), want == Trust::Cluster, "{what}");
    }
}
