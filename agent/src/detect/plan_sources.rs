//! The ranges of the address plan that the cluster's other objects already
//! tell: Nodes' pod ranges and addresses, CiliumNodes' pod ranges, Cilium's
//! cluster pool, Calico's pools in use, kube-ovn's primary Subnets of the
//! default VPC's overlay.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::inventory::{ClusterState, IpRange, IpSource, PlanOwner, Planned, Purpose};

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
            let one = IpRange {
                first: a.ip,
                last: a.ip,
            };
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
    for c in state.cilium_nodes.iter() {
        for r in c.pod_cidrs.iter().filter(|r| keep(&IpRange::of(r))) {
            let o = owner("Cilium", "CiliumNode", &c.name, "spec.ipam.podCIDRs");
            out.push(node_range(o, Purpose::NodePods, r, &c.name));
        }
    }
    out.extend(cilium_cluster_pool(state, &keep));
    out.extend(calico_pools(state, &keep));
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

/// Calico's pools that give pods addresses and are in use: a block of them
/// exists, or a pod's status address lies in them.
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
        .flat_map(|p| p.ips.iter().filter(|i| i.source == IpSource::Status))
        .map(|i| i.ip)
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
        .map(|p| {
            let o = owner("Calico", "IPPool", &p.name, "spec.cidr");
            Planned::new(o, Purpose::Pods, IpRange::of(&p.cidr), p.cidr.to_string())
        })
}
