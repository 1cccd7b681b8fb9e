//! The loud failures: sandbox refusals without an annotation, exhaustion,
//! capacity, cilium-operator's error, the stuck migration, the masquerade trap.

use std::sync::Arc;

use super::*;
use crate::inventory::{
    CiliumConfig, NodeFacts, SandboxFailure, SandboxRefusal,
    fixtures::{ME, OTHER, cilium_node, inventory, ip, net, ovn_default, pod},
};

/// A Pending pod with no address on `node`.
fn pending(name: &str, node: &str) -> crate::inventory::Pod {
    let mut p = pod(name, node, &[]);
    p.phase = Some("Pending".into());
    p
}

fn failure(pod: &str, refusal: SandboxRefusal, count: u64) -> SandboxFailure {
    SandboxFailure {
        namespace: "tenant".into(),
        pod: pod.into(),
        uid: format!("uid-{pod}"),
        refusal,
        count,
        message: "plugin type=\"cilium-cni\" failed (add): …".into(),
    }
}

/// Cilium-only: no Subnets, no annotations; the refused pods get their IP
/// from kubelet's Events as `check --events` gives it.
fn cilium_only(pods: &[crate::inventory::Pod], failures: Vec<SandboxFailure>) -> Inventory {
    let pods = crate::inventory::with_refused_addresses(pods, &failures);
    let mut inv = inventory(pods);
    inv.cluster.sandbox = Arc::new(failures);
    inv
}

#[test]
fn a_refusal_of_the_nodes_ingress_ip_is_the_ingress_collision_with_kubelets_count() {
    let inv = cilium_only(
        &[pending("gw", ME)],
        vec![failure(
            "gw",
            SandboxRefusal::AddressInUse(ip("10.244.4.12")),
            7,
        )],
    );
    let f = detect(&inv);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].kind, f[0].scope),
        (IngressIpCollision, Scope::SameNode)
    );
    let Cause::Collision {
        kubelet: Some(k),
        site,
        ..
    } = &f[0].cause
    else {
        panic!("{f:#?}")
    };
    assert_eq!((k.count, site.ip_source.clone()), (7, IpSource::Event));
}

#[test]
fn a_refusal_of_another_live_pods_address_is_a_duplicate_naming_both() {
    let inv = cilium_only(
        &[pending("new", ME), pod("old", ME, &["10.244.4.77"])],
        vec![failure(
            "new",
            SandboxRefusal::AddressInUse(ip("10.244.4.77")),
            3,
        )],
    );
    let f = detect(&inv);
    assert_eq!(
        rows(&f),
        vec![(
            DuplicatePodIp,
            Scope::SameNode,
            ip("10.244.4.77"),
            "new".into(),
            ME.into(),
            Pod,
            None
        )]
    );
    let Cause::Refused {
        holder: Some(h),
        kubelet,
        ..
    } = &f[0].cause
    else {
        panic!("{f:#?}")
    };
    assert_eq!((h.name.as_str(), kubelet.count), ("old", 3));
}

#[test]
fn a_refusal_nothing_explains_is_a_stale_endpoint_with_the_cilium_pod_named() {
    let mut agent = pod("cilium-x7k2p", ME, &["192.168.100.11"]);
    agent.namespace = "kube-system".into();
    agent.host_network = true;
    let inv = cilium_only(
        &[pending("web", ME), agent],
        vec![failure(
            "web",
            SandboxRefusal::AddressInUse(ip("10.244.4.99")),
            1,
        )],
    );
    let f = detect(&inv);
    assert_eq!(
        rows(&f),
        vec![(
            StaleCiliumEndpoint,
            Scope::SameNode,
            ip("10.244.4.99"),
            "web".into(),
            ME.into(),
            Endpoint,
            None
        )]
    );
    let Remedy::DisconnectEndpoint {
        cilium_pod: Some(p),
        ..
    } = &f[0].remedy
    else {
        panic!("{f:#?}")
    };
    assert_eq!(p.name, "cilium-x7k2p");
}

#[test]
fn a_pod_that_started_since_its_refusal_is_no_finding() {
    let inv = cilium_only(
        &[pod("web", ME, &["10.244.4.50"])],
        vec![failure(
            "web",
            SandboxRefusal::AddressInUse(ip("10.244.4.99")),
            4,
        )],
    );
    assert_eq!(detect(&inv), vec![]);
}

#[test]
fn no_address_left_is_exhaustion_on_the_node_once_for_all_its_pods() {
    let inv = cilium_only(
        &[
            pending("a", ME),
            pending("b", ME),
            pending("elsewhere", OTHER),
        ],
        vec![
            failure("a", SandboxRefusal::NoAddressLeft, 2),
            failure("b", SandboxRefusal::NoAddressLeft, 5),
            failure("elsewhere", SandboxRefusal::NoAddressLeft, 9),
        ],
    );
    let f = detect(&inv);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        (f[0].kind, f[0].ip, f[0].pod()),
        (PodIpExhaustion, None, None)
    );
    let Cause::Node(NodeProblem::Exhausted {
        refused_pods,
        kubelet,
        ..
    }) = &f[0].cause
    else {
        panic!()
    };
    assert_eq!((*refused_pods, kubelet.count), (2, 7));
}

fn with_capacity(pod_cidrs: &[&str], allocatable: u64) -> Vec<Finding> {
    let mut inv = inventory(vec![]);
    let cns = Arc::make_mut(&mut inv.cluster.cilium_nodes);
    cns[0].pod_cidrs = pod_cidrs.iter().map(|c| net(c)).collect();
    inv.node_facts = Some(NodeFacts {
        name: ME.into(),
        allocatable_pods: Some(allocatable),
        ..NodeFacts::default()
    });
    detect(&inv)
}

#[test]
fn a_slash_27_for_110_pods_is_a_capacity_shortfall_and_a_slash_24_is_not() {
    // Router and health of the fixture lie in 10.244.4.0/24, not in /27 at .0.
    let f = with_capacity(&["10.244.4.224/27"], 110);
    assert_eq!(f.len(), 1, "{f:#?}");
    let Cause::Node(NodeProblem::Capacity {
        usable,
        infra,
        allocatable,
        ..
    }) = &f[0].cause
    else {
        panic!("{f:#?}")
    };
    // 32 - 2 = 30 addresses, the router IP .251 among them.
    assert_eq!((*usable, *infra, *allocatable), (29, 1, 110));
    assert!(with_capacity(&["10.244.4.0/24"], 110).is_empty());
    // IPv6 ranges are capped at 65,536 addresses: a /64 holds any max-pods.
    assert!(with_capacity(&["10.244.4.0/24", "fd00:10:244:4::/64"], 250).is_empty());
    assert_eq!(
        with_capacity(&["10.244.4.0/24", "fd00:10:244:4::/120"], 254).len(),
        1
    );
}

#[test]
fn with_kube_ovn_allocating_the_nodes_range_says_nothing_of_capacity() {
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cluster.cilium_nodes)[0].pod_cidrs = vec![net("10.244.4.224/27")];
    inv.node_facts = Some(NodeFacts {
        name: ME.into(),
        allocatable_pods: Some(110),
        ..NodeFacts::default()
    });
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.255")])]);
    assert!(
        !detect(&inv)
            .iter()
            .any(|f| f.kind == PodIpCapacityShortfall)
    );
}

fn stuck(ipam: &str, pools: &[&str], error: Option<&str>) -> Vec<Finding> {
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cluster.cilium_nodes)[0].operator_error = error.map(Into::into);
    inv.cluster.cilium_config = Some(Arc::new(CiliumConfig {
        ipam: ipam.into(),
        cluster_pool: pools.iter().map(|p| net(p)).collect(),
        ..CiliumConfig::default()
    }));
    detect(&inv)
}

#[test]
fn cluster_pool_with_a_node_on_its_old_range_is_a_stuck_migration_carrying_the_error() {
    let error = "allocator not configured for the requested CIDR 10.244.4.0/24";
    let f = stuck("cluster-pool", &["100.65.0.0/16"], Some(error));
    assert_eq!(
        f.iter().map(|f| f.kind).collect::<Vec<_>>(),
        vec![IpamMigrationStuck]
    );
    let Cause::Node(NodeProblem::MigrationStuck {
        pod_cidrs,
        operator_error,
        ..
    }) = &f[0].cause
    else {
        panic!()
    };
    assert_eq!(
        (pod_cidrs.clone(), operator_error.as_deref()),
        (vec![net("10.244.4.0/24")], Some(error))
    );
    assert!(stuck("cluster-pool", &["10.244.0.0/16"], None).is_empty());
    assert!(stuck("kubernetes", &["100.65.0.0/16"], None).is_empty());
    // The error alone is CiliumIPAMError.
    let f = stuck("kubernetes", &[], Some("Pod IPAM allocation failed"));
    assert_eq!(
        f.iter().map(|f| f.kind).collect::<Vec<_>>(),
        vec![CiliumIpamError]
    );
}

#[test]
fn an_ingress_ip_outside_every_masqueraded_subnet_is_the_masquerade_trap() {
    let mut inv = inventory(vec![]);
    Arc::make_mut(&mut inv.cluster.cilium_nodes)[0] = cilium_node(
        ME,
        &[ip("100.65.3.1")],
        &[ip("100.65.3.7")],
        &[],
        &[net("100.65.3.0/24")],
    );
    let mut join = ovn_default(&[]);
    join.name = "join".into();
    join.cidrs = vec![net("100.64.0.0/16")];
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")]), join]);
    let f = detect(&inv);
    assert_eq!(
        rows(&f),
        vec![(
            IngressIpNotMasqueraded,
            Scope::SameNode,
            ip("100.65.3.7"),
            String::new(),
            ME.into(),
            Ingress,
            None
        )]
    );
    let Remedy::PoolInMasqueradedSubnet {
        subnet: Some((name, _)),
    } = &f[0].remedy
    else {
        panic!()
    };
    assert_eq!(name, "ovn-default");
    // Inside ovn-default and excluded there (the healthy layout): nothing.
    let mut healthy = inventory(vec![]);
    healthy.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.255")])]);
    let healthy = detect(&healthy);
    assert!(healthy.is_empty(), "{healthy:#?}");
    assert!(
        !healthy.iter().any(|f| f.kind == IngressIpNotMasqueraded),
        "{healthy:#?}"
    );
}

#[test]
fn without_kube_ovns_default_subnet_in_view_nothing_is_said_of_masquerading() {
    let mut inv = inventory(vec![]);
    let mut tenant = ovn_default(&[]);
    tenant.name = "tenant-net".into();
    tenant.is_default = false;
    tenant.cidrs = vec![net("10.16.0.0/16")];
    inv.cluster.subnets = Arc::new(vec![tenant]);
    assert!(
        !detect(&inv)
            .iter()
            .any(|f| f.kind == IngressIpNotMasqueraded)
    );
}

#[test]
fn an_annotated_address_outside_the_subnet_its_annotation_names_is_no_finding() {
    let mut forged = pod("forged", ME, &["10.244.4.251"]);
    forged.ips[0].source = IpSource::Annotation;
    forged.phase = Some("Pending".into());
    forged.logical_switch = Some("tenant-net".into());
    let mut inv = inventory(vec![forged.clone()]);
    let mut tenant = ovn_default(&[]);
    tenant.name = "tenant-net".into();
    tenant.cidrs = vec![net("10.16.0.0/16")];
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.255")]), tenant]);
    assert!(detect(&inv).is_empty(), "{:#?}", detect(&inv));
    // In the Subnet it names, the same address is a finding (unconfirmed).
    forged.logical_switch = Some("ovn-default".into());
    inv.cluster.pods = Arc::new(vec![forged]);
    let f = detect(&inv);
    assert_eq!(f.len(), 1);
    assert_eq!(
        f[0].site().map(|s| s.ip_source.clone()),
        Some(IpSource::Annotation)
    );
}

#[test]
fn in_a_mixed_cluster_the_fix_names_the_allocator_that_gave_the_address() {
    // kube-ovn owns 10.16.0.0/16; this node's pods come from Cilium's own IPAM.
    let mut tenant = ovn_default(&[]);
    tenant.name = "tenant-net".into();
    tenant.cidrs = vec![net("10.16.0.0/16")];
    let remedy = |source: IpSource| {
        let mut p = pod("web-0", ME, &["10.244.4.251"]);
        p.ips[0].source = source;
        let mut inv = inventory(vec![p]);
        inv.cluster.subnets = Arc::new(vec![tenant.clone()]);
        let f: Vec<Finding> = detect(&inv)
            .into_iter()
            .filter(|f| f.kind == RouterIpCollision)
            .collect();
        assert_eq!(f.len(), 1, "{f:#?}");
        f[0].remedy.clone()
    };
    // A status address outside every Subnet: Cilium's allocator, not kube-ovn.
    assert_eq!(
        remedy(IpSource::Status),
        Remedy::ReallocatePod { node: ME.into() }
    );
    // kube-ovn's own record of it: kube-ovn handed it out, whatever its Subnets say.
    assert_eq!(remedy(IpSource::KubeOvnIp), Remedy::ExcludeInPodAllocator);
}
