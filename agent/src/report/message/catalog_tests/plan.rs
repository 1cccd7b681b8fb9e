//! The cases of the address plan (`AddressPlanOverlap`): a MetalLB pool over
//! Calico's pool in use, a Cilium LB-IPAM pool over a node's address, a
//! ServiceCIDR over nodes' pod ranges, two attachments on one interface,
//! ovn-kubernetes' internal subnets under a pool and over a node's address.

use std::sync::Arc;

use super::cases::{Mode, ip, net};
use crate::{
    cni::plan::parse_entry,
    detect::{Finding, plan::plan_overlaps},
    inventory::{
        CalicoIpam, ClusterState, IpPool, IpSource, NodeAddress, NodeFacts, PlanOwner, Planned,
        Pod, PodIp, Purpose,
    },
};

fn planned(
    allocator: &'static str,
    kind: &'static str,
    name: &str,
    purpose: Purpose,
    text: &str,
) -> Planned {
    let owner = PlanOwner {
        allocator,
        kind,
        object: name.to_owned(),
        tenant: false,
        field: "spec.addresses",
    };
    Planned::new(
        owner,
        purpose,
        parse_entry(text).expect("a range"),
        text.to_owned(),
    )
}

fn nodes(n: u8) -> Vec<NodeFacts> {
    (0..n)
        .map(|i| NodeFacts {
            name: format!("worker-{i}"),
            pod_cidrs: vec![net(&format!("10.244.{i}.0/24"))],
            addresses: vec![NodeAddress {
                ip: ip(&format!("192.168.1.{}", i + 3)),
                kind: "InternalIP",
            }],
            ..NodeFacts::default()
        })
        .collect()
}

fn overlaps(plan: Vec<Planned>, state: ClusterState) -> Vec<Finding> {
    let (found, _) = plan_overlaps(&ClusterState {
        plan: Arc::new(plan),
        ..state
    });
    assert!(!found.is_empty(), "no overlap found");
    found
}

pub(super) fn cases() -> Vec<(Mode, Finding)> {
    let calico = CalicoIpam::new(
        Vec::new(),
        vec![IpPool {
            name: "default-ipv4-ippool".into(),
            cidr: net("192.168.0.0/16"),
            block_size: Some(26),
            disabled: false,
            workloads: true,
            load_balancer: false,
        }],
    );
    let pod = Pod {
        namespace: "tenant".into(),
        name: "web".into(),
        node: Some("worker-0".into()),
        ips: vec![PodIp {
            ip: ip("192.168.7.9"),
            source: IpSource::Status,
        }],
        ..Pod::default()
    };
    let mut out = Vec::new();
    let metallb = planned(
        "MetalLB",
        "IPAddressPool",
        "metallb-system/first-pool",
        Purpose::LoadBalancer,
        "192.168.10.0/24",
    );
    let state = ClusterState {
        calico: Arc::new(calico),
        pods: Arc::new(vec![pod]),
        ..ClusterState::default()
    };
    out.extend(
        overlaps(vec![metallb], state)
            .into_iter()
            .map(|f| (Mode::Calico, f)),
    );
    let lb = planned(
        "Cilium LB-IPAM",
        "CiliumLoadBalancerIPPool",
        "private",
        Purpose::LoadBalancer,
        "192.168.1.3-192.168.1.5",
    );
    let with_nodes = ClusterState {
        nodes: Arc::new(nodes(9)),
        ..ClusterState::default()
    };
    out.extend(
        overlaps(vec![lb], with_nodes.clone())
            .into_iter()
            .map(|f| (Mode::CiliumOnly, f)),
    );
    let svc = planned(
        "Kubernetes",
        "ServiceCIDR",
        "newcidr1",
        Purpose::Services,
        "10.244.0.0/20",
    );
    out.extend(
        overlaps(vec![svc], with_nodes)
            .into_iter()
            .map(|f| (Mode::OvnOrBridge, f)),
    );
    let nad = |name: &str, text: &str| {
        let mut p = planned(
            "whereabouts",
            "NetworkAttachmentDefinition",
            name,
            Purpose::Secondary,
            text,
        );
        p.domain = Some("eth1".into());
        p
    };
    let secondary = vec![
        nad("storage/a", "192.168.2.0/24"),
        nad("storage/b", "192.168.2.225-192.168.2.230"),
    ];
    out.extend(
        overlaps(secondary, ClusterState::default())
            .into_iter()
            .map(|f| (Mode::OvnOrBridge, f)),
    );
    out.extend(ovn_internal());
    out
}

/// A MetalLB pool over ovn-kubernetes' join subnet (the pool moves), a node's
/// address in its transit subnet (the subnet moves).
fn ovn_internal() -> Vec<(Mode, Finding)> {
    use crate::cni::ovn_kubernetes::{LRP_IFADDR, TRANSIT_IFADDR};
    let ovn = crate::inventory::CniNode {
        name: "ovn-worker".into(),
        ovn_internal: vec![
            (LRP_IFADDR, net("100.64.0.0/16")),
            (TRANSIT_IFADDR, net("100.88.0.0/16")),
        ],
        ..Default::default()
    };
    let mut edge = nodes(1);
    edge[0].addresses[0].ip = ip("100.88.4.7");
    let state = ClusterState {
        annotated_nodes: Arc::new(vec![ovn]),
        nodes: Arc::new(edge),
        ..ClusterState::default()
    };
    let pool = planned(
        "MetalLB",
        "IPAddressPool",
        "metallb-system/cgnat",
        Purpose::LoadBalancer,
        "100.64.0.0/24",
    );
    overlaps(vec![pool], state)
        .into_iter()
        .map(|f| (Mode::OvnOrBridge, f))
        .collect()
}

/// `dup` (a `DuplicatePodIP`) as two pods on one secondary network's address.
pub(super) fn secondary(dup: &Finding) -> Finding {
    let mut f = dup.clone();
    f.kind = crate::detect::FindingKind::DuplicateSecondaryIp;
    f.trust = crate::detect::Trust::Hint;
    if let crate::detect::Cause::Duplicate { network, .. } = &mut f.cause {
        *network =
            Some("storage/storagenetwork-58mfl (this pod's lhnet1, the other's lhnet1)".into());
    }
    f
}

/// The same as one node's kernel shows it: two macvlans on one host link.
pub(super) fn secondary_from_kernel(dup: &Finding) -> Finding {
    let mut f = secondary(dup);
    f.owner.source = crate::inventory::Source::Kernel;
    if let crate::detect::Cause::Duplicate { network, site, .. } = &mut f.cause {
        f.scope = crate::detect::Scope::SameNode;
        f.owner.node.clone_from(&site.node);
        site.ip_source = crate::inventory::IpSource::Kernel;
        *network = Some(
            "macvlan/ipvlan/VLAN links on the host's eth1 (this pod's net1, the other's net1)"
                .into(),
        );
    }
    f
}

/// Who is given the shared address and which incident is cited follow the
/// objects: an Antrea ExternalIPPool gives Egress IPs too, and antrea#7306
/// is cited for Antrea's IPPools, never for Multus' attachments.
#[test]
fn the_breakage_names_who_takes_the_address_and_cites_only_its_own_incident() {
    use crate::cni::antrea::{EXTERNAL_IP_POOLS, IP_POOLS};
    let text = |plan: Vec<Planned>| {
        let state = ClusterState {
            nodes: Arc::new(nodes(1)),
            ..ClusterState::default()
        };
        let found = overlaps(plan, state);
        found
            .iter()
            .map(crate::report::message::render)
            .collect::<String>()
    };
    let of = |r: &crate::cni::plan::Records, name: &str, purpose, range: &str| {
        let mut p = planned(r.allocator, r.kind, name, purpose, range);
        p.domain = Some("eth1".into());
        p
    };
    let r = &EXTERNAL_IP_POOLS;
    let egress = planned(
        r.allocator,
        r.kind,
        "egress",
        Purpose::LoadBalancer,
        "192.168.1.3",
    );
    let egress = text(vec![egress]);
    assert!(
        egress.contains("an Egress or a Service will be given node worker-0's"),
        "{egress}"
    );
    let pools = text(vec![
        of(&IP_POOLS, "pool1", Purpose::Secondary, "10.2.0.0/24"),
        of(&IP_POOLS, "pool2", Purpose::Secondary, "10.2.0.128/25"),
    ]);
    assert!(
        pools.contains("two IPPools on eth1") && pools.contains("antrea#7306"),
        "{pools}"
    );
    let nad = |name: &str, range: &str| {
        let mut p = planned(
            "whereabouts",
            "NetworkAttachmentDefinition",
            name,
            Purpose::Secondary,
            range,
        );
        p.domain = Some("eth1".into());
        p
    };
    let nads = text(vec![nad("a", "10.3.0.0/24"), nad("b", "10.3.0.128/25")]);
    assert!(
        nads.contains("two NetworkAttachmentDefinitions on eth1"),
        "{nads}"
    );
    assert!(!nads.contains("antrea"), "{nads}");
    let mixed = text(vec![
        of(&IP_POOLS, "pool1", Purpose::Secondary, "10.4.0.0/24"),
        nad("c", "10.4.0.128/25"),
    ]);
    assert!(mixed.contains("two attachments on eth1"), "{mixed}");
    assert!(!mixed.contains("antrea#7306"), "{mixed}");
}
