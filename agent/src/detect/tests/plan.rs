use std::{net::IpAddr, sync::Arc};

use super::*;
use crate::inventory::{CalicoIpam, IpPool, IpSource, NodeAddress, NodeFacts, Pod, PodIp, Subnet};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

pub(super) fn net(s: &str) -> ipnet::IpNet {
    s.parse().expect("test network")
}

pub(super) fn planned(
    allocator: &'static str,
    kind: &'static str,
    name: &str,
    purpose: Purpose,
    text: &str,
) -> Planned {
    let range = crate::cni::plan::parse_entry(text).expect("test range");
    let owner = PlanOwner {
        allocator,
        kind,
        object: name.to_owned(),
        tenant: false,
        field: "spec.x",
    };
    Planned::new(owner, purpose, range, text.to_owned())
}

fn metallb(name: &str, text: &str) -> Planned {
    planned(
        "MetalLB",
        "IPAddressPool",
        name,
        Purpose::LoadBalancer,
        text,
    )
}

pub(super) fn node(name: &str, pod_cidr: &str, internal: &str) -> NodeFacts {
    NodeFacts {
        name: name.to_owned(),
        pod_cidrs: vec![net(pod_cidr)],
        addresses: vec![NodeAddress {
            ip: ip(internal),
            kind: "InternalIP",
        }],
        ..NodeFacts::default()
    }
}

pub(super) fn state(plan: Vec<Planned>, nodes: Vec<NodeFacts>) -> ClusterState {
    ClusterState {
        plan: Arc::new(plan),
        nodes: Arc::new(nodes),
        ..ClusterState::default()
    }
}

/// The overlaps' (changed object, other object, shared addresses).
fn found(s: &ClusterState) -> Vec<(String, String, String)> {
    plan_overlaps(s)
        .0
        .iter()
        .map(|f| {
            let Cause::Plan(o) = &f.cause else {
                panic!("not a plan overlap: {f:?}")
            };
            assert_eq!(f.kind, FindingKind::AddressPlanOverlap);
            (
                o.change.owner.object.clone(),
                o.other.owner.object.clone(),
                o.shared.to_string(),
            )
        })
        .collect()
}

pub(super) fn calico_in_use(pool: &str) -> (Arc<CalicoIpam>, Pod) {
    let pools = vec![IpPool {
        name: "default-ipv4-ippool".into(),
        cidr: net(pool),
        block_size: Some(26),
        disabled: false,
        workloads: true,
        load_balancer: false,
    }];
    let pod = Pod {
        namespace: "default".into(),
        name: "web".into(),
        node: Some("w1".into()),
        ips: vec![PodIp {
            ip: net(pool).hosts().nth(5).expect("a host"),
            source: IpSource::Status,
        }],
        ..Pod::default()
    };
    (Arc::new(CalicoIpam::new(Vec::new(), pools)), pod)
}

#[test]
fn a_metallb_pool_over_a_calico_pool_in_use_names_both_and_changes_metallbs() {
    let (calico, pod) = calico_in_use("192.168.0.0/16");
    let s = ClusterState {
        calico,
        pods: Arc::new(vec![pod]),
        ..state(
            vec![metallb("metallb-system/first-pool", "192.168.10.0/24")],
            Vec::new(),
        )
    };
    assert_eq!(
        found(&s),
        [(
            "metallb-system/first-pool".to_owned(),
            "default-ipv4-ippool".to_owned(),
            "192.168.10.0..192.168.10.255".to_owned()
        )]
    );
    // A pool no pod and no block uses is no allocator of anything yet.
    let (calico, _) = calico_in_use("192.168.0.0/16");
    let idle = ClusterState {
        calico,
        ..state(
            vec![metallb("metallb-system/first-pool", "192.168.10.0/24")],
            Vec::new(),
        )
    };
    assert_eq!(found(&idle), []);
}

#[test]
fn a_load_balancer_pool_holding_a_nodes_internal_ip_is_found_with_the_node() {
    let lb = planned(
        "Cilium LB-IPAM",
        "CiliumLoadBalancerIPPool",
        "lb",
        Purpose::LoadBalancer,
        "192.168.1.3-192.168.1.5",
    );
    let s = state(
        vec![lb],
        vec![node("worker1", "10.244.1.0/24", "192.168.1.3")],
    );
    let findings = plan_overlaps(&s).0;
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].owner.node, "worker1");
    assert_eq!(
        found(&s),
        [(
            "lb".to_owned(),
            "worker1".to_owned(),
            "192.168.1.3".to_owned()
        )]
    );
}

#[test]
fn a_service_cidr_over_nodes_pod_ranges_is_one_finding_naming_the_nodes() {
    let svc = planned(
        "Kubernetes",
        "ServiceCIDR",
        "newcidr1",
        Purpose::Services,
        "10.244.0.0/21",
    );
    let nodes: Vec<NodeFacts> = (0..8)
        .map(|i| {
            node(
                &format!("w{i}"),
                &format!("10.244.{i}.0/24"),
                &format!("172.18.0.{}", i + 2),
            )
        })
        .collect();
    let (findings, _) = plan_overlaps(&state(vec![svc], nodes));
    assert_eq!(findings.len(), 1, "{findings:?}");
    let Cause::Plan(o) = &findings[0].cause else {
        panic!()
    };
    assert_eq!(o.change.owner.kind, "ServiceCIDR");
    assert_eq!(o.other.owner.object, "w0");
    assert_eq!(o.more.1, 7);
    assert_eq!(o.more.0.len(), NAMED);
}

#[test]
fn by_design_overlaps_are_not_findings() {
    let (calico, pod) = calico_in_use("10.244.0.0/16");
    // A node's pod range inside Calico's pool (Calico ignores podCIDRs); two
    // ServiceCIDRs over each other; a Subnet that excludes the pool carved
    // from it; one range on two different interfaces.
    let subnet = Subnet {
        name: "ovn-default".into(),
        primary: true,
        cidrs: vec![net("10.16.0.0/16")],
        exclude: vec![crate::inventory::IpRange {
            first: ip("10.16.255.0"),
            last: ip("10.16.255.255"),
        }],
        ..Subnet::default()
    };
    let mut a = planned(
        "whereabouts",
        "NetworkAttachmentDefinition",
        "a",
        Purpose::Secondary,
        "192.168.2.0/24",
    );
    a.domain = Some("eth1".into());
    let mut b = planned(
        "whereabouts",
        "NetworkAttachmentDefinition",
        "b",
        Purpose::Secondary,
        "192.168.2.0/24",
    );
    b.domain = Some("eth2".into());
    let s = ClusterState {
        calico,
        pods: Arc::new(vec![pod]),
        subnets: Arc::new(vec![subnet]),
        ..state(
            vec![
                planned(
                    "Kubernetes",
                    "ServiceCIDR",
                    "kubernetes",
                    Purpose::Services,
                    "10.96.0.0/28",
                ),
                planned(
                    "Kubernetes",
                    "ServiceCIDR",
                    "newcidr1",
                    Purpose::Services,
                    "10.96.0.0/24",
                ),
                metallb("metallb-system/underlay", "10.16.255.0/24"),
                a,
                b,
            ],
            vec![node("w1", "10.244.1.0/24", "172.18.0.2")],
        )
    };
    assert_eq!(found(&s), []);
}

#[test]
fn secondary_ranges_on_one_interface_overlap_unless_they_share_reservations() {
    let nad = |name: &str, text: &str, shared: Option<&str>| {
        let mut p = planned(
            "whereabouts",
            "NetworkAttachmentDefinition",
            name,
            Purpose::Secondary,
            text,
        );
        p.domain = Some("eth1".into());
        p.shared = shared.map(str::to_owned);
        p
    };
    let apart = state(
        vec![
            nad(
                "ns/a",
                "192.168.2.0/24",
                Some("whereabouts  192.168.2.0/24"),
            ),
            nad(
                "ns/b",
                "192.168.2.128/25",
                Some("whereabouts  192.168.2.128/25"),
            ),
        ],
        Vec::new(),
    );
    assert_eq!(
        found(&apart),
        [(
            "ns/a".to_owned(),
            "ns/b".to_owned(),
            "192.168.2.128..192.168.2.255".to_owned()
        )]
    );
    let shared = state(
        vec![
            nad("ns/a", "192.168.2.0/24", Some("whereabouts ")),
            nad("ns/b", "192.168.2.128/25", Some("whereabouts ")),
        ],
        Vec::new(),
    );
    assert_eq!(found(&shared), []);
}

#[test]
fn the_shared_addresses_leave_out_what_either_side_excludes() {
    let mut lb = metallb("p", "10.16.0.0/24");
    lb.exclude = vec![crate::inventory::IpRange {
        first: ip("10.16.0.0"),
        last: ip("10.16.0.9"),
    }];
    let mut pods = planned("kube-ovn", "Subnet", "s", Purpose::Pods, "10.16.0.0/16");
    pods.exclude = vec![crate::inventory::IpRange {
        first: ip("10.16.0.200"),
        last: ip("10.16.0.255"),
    }];
    assert_eq!(
        found(&state(vec![lb.clone(), pods.clone()], Vec::new())),
        [(
            "p".to_owned(),
            "s".to_owned(),
            "10.16.0.10..10.16.0.199".to_owned()
        )]
    );
    pods.exclude.push(crate::inventory::IpRange {
        first: ip("10.16.0.10"),
        last: ip("10.16.0.199"),
    });
    assert_eq!(found(&state(vec![lb, pods], Vec::new())), []);
}

#[test]
fn two_load_balancer_controllers_collide_but_one_controllers_pools_are_its_own_business() {
    let cilium = planned(
        "Cilium LB-IPAM",
        "CiliumLoadBalancerIPPool",
        "blue",
        Purpose::LoadBalancer,
        "20.0.10.0/24",
    );
    let red = planned(
        "Cilium LB-IPAM",
        "CiliumLoadBalancerIPPool",
        "red",
        Purpose::LoadBalancer,
        "20.0.10.0/24",
    );
    assert_eq!(found(&state(vec![cilium.clone(), red], Vec::new())), []);
    let m = metallb("metallb-system/p", "20.0.10.128/25");
    assert_eq!(found(&state(vec![cilium, m], Vec::new())).len(), 1);
}

#[test]
fn the_kubernetes_services_ip_stands_for_the_service_range_only_without_service_cidrs() {
    let api = planned(
        "Kubernetes",
        "Service",
        "default/kubernetes",
        Purpose::Services,
        "10.96.0.1",
    );
    let pool = metallb("metallb-system/p", "10.96.0.0/30");
    let alone = state(vec![api.clone(), pool.clone()], Vec::new());
    assert_eq!(
        found(&alone),
        [(
            "metallb-system/p".to_owned(),
            "default/kubernetes".to_owned(),
            "10.96.0.1".to_owned()
        )]
    );
    let cidr = planned(
        "Kubernetes",
        "ServiceCIDR",
        "kubernetes",
        Purpose::Services,
        "10.96.0.0/28",
    );
    let (findings, checked) = plan_overlaps(&state(vec![api, pool, cidr], Vec::new()));
    assert_eq!(checked, 2);
    assert_eq!(findings.len(), 1, "{findings:?}");
}

#[path = "plan_owners.rs"]
mod owners;
