//! Property tests of the detector: what must hold for any inventory.

use std::{
    net::{IpAddr, Ipv4Addr},
    sync::Arc,
};

use proptest::prelude::*;

use super::*;
use crate::inventory::{
    ClusterState, CniNode, FibResult, HostNetwork, IpSource, LocalAddress, Pod, PodIp, Role,
    SandboxFailure, SandboxRefusal, fixtures::cilium_node, with_refused_addresses,
};

const ME: &str = "node-a";

fn ip4(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0af4_0000 | (n & 0xffff)))
}

fn pod(i: usize, node: &str, ip: IpAddr) -> Pod {
    Pod {
        namespace: "ns".into(),
        name: format!("p{i}"),
        uid: format!("u{i}"),
        node: Some(node.into()),
        ips: vec![PodIp {
            ip,
            source: IpSource::Status,
        }],
        host_network: false,
        secondary: Vec::new(),
        phase: Some("Running".into()),
        created: None,
        logical_switch: None,
        terminating: false,
        controller: None,
        default_network_elsewhere: false,
    }
}

/// An inventory from raw numbers: infra addresses per node, pod IPs, which pods are here.
fn inventory(infra: &[(u8, u32, u32, u32)], pods: &[(u32, bool)]) -> Inventory {
    let cilium_nodes: Vec<CniNode> = infra
        .iter()
        .map(|(n, r, i, h)| {
            let name = if *n == 0 {
                ME.to_owned()
            } else {
                format!("node-{n}")
            };
            cilium_node(&name, &[ip4(*r)], &[ip4(*i)], &[ip4(*h)], &[])
        })
        .collect();
    let mut host = HostNetwork::default();
    for c in cilium_nodes.iter().filter(|c| c.name == ME) {
        for r in c.ips(Role::Router) {
            host.addresses.push(LocalAddress {
                ip: r,
                device: "cilium_host".into(),
            });
        }
    }
    let pods: Vec<Pod> = pods
        .iter()
        .enumerate()
        .map(|(i, (ip, here))| pod(i, if *here { ME } else { "elsewhere" }, ip4(*ip)))
        .collect();
    for p in pods.iter().filter(|p| p.node.as_deref() == Some(ME)) {
        for pip in &p.ips {
            let local = host.addresses.iter().any(|a| a.ip == pip.ip);
            let answer = if local {
                FibResult::Local { oif: Some(1) }
            } else {
                FibResult::Unicast {
                    oif: Some(3),
                    gateway: None,
                }
            };
            host.fib.insert(pip.ip, answer);
        }
    }
    Inventory {
        node: ME.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(host),
        cluster: ClusterState {
            pods: Arc::new(pods),
            cilium_nodes: Arc::new(cilium_nodes),
            annotated_nodes: Arc::default(),
            subnets: Arc::default(),
            ..Default::default()
        },
        ..Inventory::default()
    }
}

fn infra_strategy() -> impl Strategy<Value = Vec<(u8, u32, u32, u32)>> {
    prop::collection::vec((0u8..4, 0u32..512, 0u32..512, 0u32..512), 0..6)
}

fn pods_strategy() -> impl Strategy<Value = Vec<(u32, bool)>> {
    prop::collection::vec((0u32..512, any::<bool>()), 0..40)
}

proptest! {
    #[test]
    fn no_finding_when_infra_addresses_and_pod_ips_are_disjoint(infra in infra_strategy(), pods in pods_strategy()) {
        let taken: std::collections::BTreeSet<u32> =
            infra.iter().flat_map(|(_, r, i, h)| [*r, *i, *h]).collect();
        let pods: Vec<(u32, bool)> = pods.into_iter().filter(|(ip, _)| !taken.contains(ip)).collect();
        prop_assert!(detect(&inventory(&infra, &pods)).is_empty());
    }

    #[test]
    fn every_collision_a_node_can_see_is_found_once(infra in infra_strategy(), pods in pods_strategy()) {
        let inv = inventory(&infra, &pods);
        let findings = detect(&inv);
        for (i, p) in inv.cluster.pods.iter().enumerate() {
            let ip = p.ips[0].ip;
            let here = p.node.as_deref() == Some(ME);
            let mine = inv.cluster.cilium_nodes.iter().filter(|c| c.name == ME)
                .any(|c| c.addresses.iter().any(|a| a.ip == ip));
            let anyone = inv.cluster.cilium_nodes.iter()
                .any(|c| c.addresses.iter().any(|a| a.ip == ip));
            let expected = if here { anyone } else { mine };
            let n = findings.iter().filter(|f| f.pod().is_some_and(|r| r.name == format!("p{i}"))).count();
            prop_assert_eq!(n, usize::from(expected), "pod p{} ip {} here {}", i, ip, here);
        }
    }

    #[test]
    fn findings_do_not_depend_on_the_order_of_pods_or_cilium_nodes(
        (infra, pods, pod_order, node_order) in (infra_strategy(), pods_strategy()).prop_flat_map(|(infra, pods)| {
            let pod_order = Just((0..pods.len()).collect::<Vec<_>>()).prop_shuffle();
            let node_order = Just((0..infra.len()).collect::<Vec<_>>()).prop_shuffle();
            (Just(infra), Just(pods), pod_order, node_order)
        })
    ) {
        let a = inventory(&infra, &pods);
        let mut b = a.clone();
        b.cluster.pods = Arc::new(pod_order.iter().map(|i| a.cluster.pods[*i].clone()).collect());
        b.cluster.cilium_nodes = Arc::new(node_order.iter().map(|i| a.cluster.cilium_nodes[*i].clone()).collect());
        let strip = |v: Vec<Finding>| v.into_iter().map(|f| (f.kind, f.scope, f.ip, f.pod().cloned(), f.owner.node, f.owner.role)).collect::<Vec<_>>();
        let (fa, fb) = (strip(detect(&a)), strip(detect(&b)));
        // Which owner wins when two nodes claim one IP may differ only by name order,
        // which the detector fixes by sorting: so the results are equal.
        prop_assert_eq!(fa, fb);
    }

    #[test]
    fn every_refused_pod_gets_one_diagnosis_that_matches_what_holds_its_address(
        infra in infra_strategy(),
        pods in pods_strategy(),
        refused in prop::collection::vec(0u32..512, 0..10),
    ) {
        let mut inv = inventory(&infra, &pods);
        let failures: Vec<SandboxFailure> = refused.iter().enumerate().map(|(j, n)| SandboxFailure {
            namespace: "ns".into(),
            pod: format!("r{j}"),
            uid: format!("ur{j}"),
            refusal: SandboxRefusal::AddressInUse(ip4(*n)),
            count: 1,
            message: String::new(),
        }).collect();
        let mut all = inv.cluster.pods.to_vec();
        all.extend((0..refused.len()).map(|j| Pod {
            name: format!("r{j}"),
            uid: format!("ur{j}"),
            ips: Vec::new(),
            phase: Some("Pending".into()),
            ..pod(0, ME, ip4(0))
        }));
        inv.cluster.pods = Arc::new(with_refused_addresses(&all, &failures));
        inv.cluster.sandbox = Arc::new(failures);
        let findings = detect(&inv);
        for (j, n) in refused.iter().enumerate() {
            let ip = ip4(*n);
            let name = format!("r{j}");
            let of: Vec<&Finding> = findings.iter().filter(|f| f.pod().is_some_and(|p| p.name == name)).collect();
            prop_assert_eq!(of.len(), 1, "{} refused {}: {:?}", name, ip, of);
            let infra_holds = inv.cluster.cilium_nodes.iter().any(|c| c.addresses.iter().any(|a| a.ip == ip));
            let pod_holds = inv.cluster.pods.iter().any(|p| p.ips.iter().any(|i| i.ip == ip && i.source == IpSource::Status));
            let kind = of[0].kind;
            if infra_holds {
                prop_assert!(matches!(kind, FindingKind::RouterIpCollision | FindingKind::IngressIpCollision | FindingKind::HealthIpCollision), "{:?}", kind);
            } else if pod_holds {
                prop_assert_eq!(kind, FindingKind::DuplicatePodIp);
            } else {
                prop_assert_eq!(kind, FindingKind::StaleCiliumEndpoint);
            }
        }
    }
}
