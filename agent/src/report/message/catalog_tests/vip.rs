//! The cases of a node's address held elsewhere (`NodeAddressShadowed`): a
//! Service's external IP on kube-ipvs0 (from the kernel, and from the API
//! alone), a Service in another namespace, and a /32 no Service claims; a
//! pod on NodeLocal DNSCache's address.

use super::cases::{Mode, ip};
use crate::{
    detect::{Cause, Finding, NodeProblem, Owner, Remedy, Role, Scope, vip::NodeAddressClaim},
    inventory::{ServiceAddress, ServiceField, ServiceRef, Source},
};

fn service(namespace: &str, field: ServiceField) -> ServiceAddress {
    ServiceAddress {
        service: ServiceRef {
            namespace: namespace.into(),
            name: "nginx".into(),
        },
        field,
    }
}

fn case(services: Vec<ServiceAddress>, held: Option<(&str, &str)>) -> Finding {
    let claim = Box::new(NodeAddressClaim {
        ip: ip("10.128.149.177"),
        node: "mudit-cks-worker1".into(),
        address_type: "InternalIP",
        services,
        held: held.map(|(n, d)| (n.to_owned(), d.to_owned())),
    });
    Finding {
        kind: crate::detect::FindingKind::NodeAddressShadowed,
        scope: Scope::CrossNode,
        ip: Some(claim.ip),
        owner: Owner {
            node: held.map_or("mudit-cks-worker1", |(n, _)| n).into(),
            role: Role::Node,
            device: held.map(|(_, d)| d.to_owned()),
            source: if held.is_some() {
                Source::Kernel
            } else {
                Source::Services
            },
        },
        cause: Cause::Node(NodeProblem::NodeAddressClaimed(claim.clone())),
        remedy: Remedy::FreeNodeAddress(claim),
        trust: crate::detect::Trust::TenantAddress,
    }
}

/// Every shape, under each CNI's mode: the finding names no CNI.
pub(super) fn cases() -> Vec<(Mode, Finding)> {
    let shapes = [
        case(
            vec![service("tenant", ServiceField::ExternalIps)],
            Some(("mudit-cks-master", "kube-ipvs0")),
        ),
        case(
            vec![
                service("other", ServiceField::LoadBalancerIngress),
                service("tenant", ServiceField::ExternalIps),
            ],
            None,
        ),
        case(vec![service("tenant", ServiceField::ClusterIps)], None),
        case(vec![], Some(("mudit-cks-master", "kube-ipvs0"))),
        case(vec![], Some(("mudit-cks-master", "eth0"))),
    ];
    [Mode::Calico, Mode::OvnOrBridge, Mode::CiliumOnly]
        .into_iter()
        .flat_map(|m| shapes.iter().cloned().map(move |f| (m, f)))
        .collect()
}

#[test]
fn a_pod_on_node_local_dnss_address_is_told_whose_it_is_and_how_to_move_it() {
    let (_, f) = super::cases::catalog()
        .into_iter()
        .find(|(_, f)| f.owner.device.as_deref() == Some(crate::cni::node_local_dns::DEVICE))
        .expect("a NodeLocal DNSCache case");
    let m = super::super::render_for(&f, super::super::Reader::Operator);
    assert!(
        m.contains("NodeLocal DNSCache's address on node worker-node-a on device nodelocaldns"),
        "{m}"
    );
    assert!(
        m.contains("a -localip outside every pod range, 169.254.20.10 by default"),
        "{m}"
    );
    let n = super::super::note(&f, super::super::Reader::Node, None);
    assert!(n.contains("nodelocaldns"), "{n}");
}

#[test]
fn a_pod_on_a_cluster_ip_is_told_the_ranges_overlap_never_to_remove_it() {
    let (_, f) = super::cases::catalog()
        .into_iter()
        .find(|(_, f)| {
            matches!(
                &f.remedy,
                Remedy::RemoveServiceAddress { service: Some(a), .. }
                    if a.field == ServiceField::ClusterIps
            )
        })
        .expect("a cluster-IP case");
    for (reader, note, long) in [
        (
            super::super::Reader::Operator,
            "Fix: 10.244.4.251 is a Service's cluster IP: give Services and pods disjoint ranges",
            "is the cluster IP of Service kube-system/ingress-nginx-controller: the Service range \
             overlaps the pod range; give Services",
        ),
        (
            super::super::Reader::Namespace("tenant"),
            "the cluster's operators must give Services and pods disjoint ranges",
            "the cluster's operators must give Services and pods disjoint ranges",
        ),
    ] {
        let n = super::super::note(&f, reader, None);
        assert!(n.contains(note), "{reader:?}: {n}");
        let m = super::super::render_for(&f, reader);
        assert!(m.contains(long), "{reader:?}: {m}");
        for text in [&n, &m] {
            assert!(!text.contains("remove 10.244.4.251"), "{reader:?}: {text}");
        }
    }
}
