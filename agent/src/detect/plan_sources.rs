//! The ranges of the address plan that the cluster's other objects already
//! tell: Nodes' pod ranges and addresses, CiliumNodes' pod ranges, Cilium's
//! cluster pool, Calico's pools in use and its LoadBalancer pools, kube-ovn's
//! primary Subnets of the default VPC's overlay, ovn-kubernetes' node subnets
//! and internal subnets from its Node annotations.

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
};

use ipnet::IpNet;

use crate::cni::ovn_kubernetes::NODE_SUBNETS;

use crate::inventory::{ClusterState, IpRange, PlanOwner, Planned, Purpose};

fn owner(
    allocator: &'static str,
    kind: &'static str,
    object: &str,
    field: &'static str,
) -> PlanOwner {
    PlanOwner {
        allocator,
        kind,
        object: object.to_owned(),
        tenant: false,
        field,
    }
}

fn node_range(owner: PlanOwner, purpose: Purpose, net: &IpNet, node: &str) -> Planned {
    Planned {
        node: Some(node.to_owned()),
        ..Planned::new(owner, purpose, IpRange::of(net), net.to_string())
    }
}

/// Every range `state` tells beyond its allocators' own records that `keep`
/// accepts (asked before a range is built: a node's agent keeps a few of
/// thousands).
pub(super) fn derived(state: &ClusterState, keep: impl Fn(&IpRange) -> bool) -> Vec<Planned> {
    let mut out = Vec::new();
    for n in state.nodes.iter() {
        for c in n.pod_cidrs.iter().filter(|c| keep(&IpRange::of(c))) {
            let o = owner("Kubernetes", "Node", &n.name, "spec.podCIDRs");
            out.push(node_range(o, Purpose::NodePods, c, &n.name));
        }
        for a in &n.addresses {
            let one = IpRange::one(a.ip);
            if !keep(&one) {
                continue;
            }
            let o = owner("Kubernetes", "Node", &n.name, "status.addresses");
            out.push(Planned {
                node: Some(n.name.clone()),
                ..Planned::new(o, Purpose::NodeAddress, one, format!("{} {}", a.kind, a.ip))
            });
        }
    }
    ovn_node_subnets(state, &keep, &mut out);
    for c in state.cilium_nodes.iter() {
        for r in c.pod_cidrs.iter().filter(|r| keep(&IpRange::of(r))) {
            let o = owner("Cilium", "CiliumNode", &c.name, "spec.ipam.podCIDRs");
            out.push(node_range(o, Purpose::NodePods, r, &c.name));
        }
    }
    out.extend(cilium_cluster_pool(state, &keep));
    out.extend(calico_pools(state, &keep));
    out.extend(ovn_internal(state).into_iter().filter(|p| keep(&p.range)));
    // Only the default VPC's overlay Subnets: a custom VPC's reuse addresses
    // by design, and an underlay Subnet holds the nodes' own network.
    for s in state.primary_subnets().filter(|s| s.masqueraded) {
        for c in s.cidrs.iter().filter(|c| keep(&IpRange::of(c))) {
            let o = owner("kube-ovn", "Subnet", &s.name, "spec.cidrBlock");
            out.push(Planned {
                exclude: s.exclude.clone(),
                ..Planned::new(o, Purpose::Pods, IpRange::of(c), c.to_string())
            });
        }
    }
    out
}

/// ovn-kubernetes' subnets of its nodes (OpenShift's Nodes have no
/// podCIDRs), each but one the same Node already records.
fn ovn_node_subnets(
    state: &ClusterState,
    keep: &impl Fn(&IpRange) -> bool,
    out: &mut Vec<Planned>,
) {
    if state.annotated_nodes.is_empty() {
        return;
    }
    let by_name: HashMap<&str, &crate::inventory::NodeFacts> =
        state.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    for n in state.annotated_nodes.iter() {
        let recorded = by_name.get(n.name.as_str());
        for s in n.ovn_subnets.iter().filter(|s| keep(&IpRange::of(s))) {
            if recorded.is_some_and(|f| f.pod_cidrs.contains(s)) {
                continue;
            }
            let o = owner("ovn-kubernetes", "Node", &n.name, NODE_SUBNETS);
            out.push(node_range(o, Purpose::NodePods, s, &n.name));
        }
    }
}

/// Cilium's cluster pool, where cilium-config says its IPAM is cluster-pool
/// (the key stays in configs of other modes, often its default 10.0.0.0/8:
/// nothing is drawn from it there).
fn cilium_cluster_pool<'a>(
    state: &'a ClusterState,
    keep: &'a impl Fn(&IpRange) -> bool,
) -> impl Iterator<Item = Planned> + 'a {
    let config = state
        .cilium_config
        .as_deref()
        .filter(|c| c.ipam == "cluster-pool");
    config
        .into_iter()
        .flat_map(|c| c.cluster_pool.iter())
        .filter(|net| keep(&IpRange::of(net)))
        .map(|net| {
            let field = if net.addr().is_ipv4() {
                "data.cluster-pool-ipv4-cidr"
            } else {
                "data.cluster-pool-ipv6-cidr"
            };
            let o = owner("Cilium", "ConfigMap", "cilium-config", field);
            Planned::new(o, Purpose::Pods, IpRange::of(net), net.to_string())
        })
}

/// Calico's pools that give pods addresses and are in use (a block of them
/// exists, or a pod's status address lies in them), and its LoadBalancer pools.
fn calico_pools<'a>(
    state: &'a ClusterState,
    keep: &'a impl Fn(&IpRange) -> bool,
) -> impl Iterator<Item = Planned> + 'a {
    let calico = &state.calico;
    let wanted = calico.pools.iter().any(|p| keep(&IpRange::of(&p.cidr)));
    let pod_ips: Vec<IpAddr> = state
        .pods
        .iter()
        .filter(|p| wanted && !p.host_network)
        .flat_map(super::status_ips)
        .collect();
    calico
        .pools
        .iter()
        .filter(move |p| {
            p.workloads
                && keep(&IpRange::of(&p.cidr))
                && (calico.blocks().iter().any(|b| p.cidr.contains(&b.cidr))
                    || pod_ips.iter().any(|ip| p.cidr.contains(ip)))
        })
        .map(|p| (p, Purpose::Pods))
        // A LoadBalancer pool (Calico 3.29+) is kube-controllers' LB IPAM's,
        // in use or not: a Service may be given any of its addresses.
        .chain(
            calico
                .pools
                .iter()
                .filter(|p| p.load_balancer && !p.disabled && keep(&IpRange::of(&p.cidr)))
                .map(|p| (p, Purpose::LoadBalancer)),
        )
        .map(|(p, purpose)| {
            let o = owner("Calico", "IPPool", &p.name, "spec.cidr");
            Planned::new(o, purpose, IpRange::of(&p.cidr), p.cidr.to_string())
        })
}

/// ovn-kubernetes' internal subnets, each once however many Nodes tell it
/// (named by the first Node, by name): the CIDRs of its router ports'
/// annotations, the masquerade subnet's, and the default join subnet where a
/// node's join address is derived from its node-id — unless the join subnet
/// is known moved (as [`super::owners`] reads it).
fn ovn_internal(state: &ClusterState) -> Vec<Planned> {
    use crate::cni::ovn_kubernetes::{JOIN, NODE_ID, internal_of, shared};
    // A config file that names the join subnet says where it is.
    let join = shared(&JOIN);
    let moved = super::owners::join_moved(&state.annotated_nodes)
        || state.plan.iter().any(|p| p.shared.as_ref() == Some(&join));
    // A Node's own address in the default join subnet says it was moved off it
    // (that is why it is moved), where no annotation tells where to.
    let mut holds_a_node: BTreeMap<IpNet, bool> = BTreeMap::new();
    let mut default_taken = |net: IpNet| {
        *holds_a_node.entry(net).or_insert_with(|| {
            let mut addresses = state.nodes.iter().flat_map(|n| &n.addresses);
            addresses.any(|a| net.contains(&a.ip))
        })
    };
    let mut first: BTreeMap<(&str, IpNet), (&str, &'static str)> = BTreeMap::new();
    for n in state.annotated_nodes.iter() {
        for &(field, net) in &n.ovn_internal {
            let derived = field == NODE_ID;
            if derived && (moved || default_taken(net)) {
                continue;
            }
            let Some(internal) = internal_of(field) else {
                continue;
            };
            let by = first
                .entry((internal.name, net))
                .or_insert((&n.name, field));
            // A subnet a node publishes is named before a default one derived.
            if (field == NODE_ID, n.name.as_str()) < (by.1 == NODE_ID, by.0) {
                *by = (&n.name, field);
            }
        }
    }
    first
        .into_iter()
        .map(|((name, net), (node, field))| {
            let o = owner("ovn-kubernetes", "Node", node, field);
            let text = if field == NODE_ID {
                format!("{net} (the default)")
            } else {
                net.to_string()
            };
            Planned {
                shared: Some(format!("ovn-kubernetes {name}")),
                ..Planned::new(o, Purpose::Internal, IpRange::of(&net), text)
            }
        })
        .collect()
}
