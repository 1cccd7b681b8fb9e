//! The loud failures of a node and the latent ones behind them: its
//! allocator out of addresses or too small for the pods kubelet accepts,
//! cilium-operator's error, a switch to cluster-pool that never took, an
//! Ingress IP kube-ovn does not masquerade (a sandbox refused an address no
//! node holds: [`super::refused`]).

use std::net::IpAddr;

use ipnet::IpNet;

use super::{
    Cause, Finding, FindingKind, IpamKind, KubeletReport, NodeProblem, Owner, Remedy, Role, Scope,
    Trust, own, status_ips,
};
use crate::detect::{CalicoFix, PodRef};
use crate::inventory::{CniNode, Inventory, SandboxRefusal, Source};

mod kinds;
pub(super) use kinds::*;

/// Cilium's host-scope allocator uses at most this many addresses of an IPv6 range.
const IPV6_RANGE_CAP: u128 = 65_536;

/// The findings about `node` itself: its allocator and Cilium's configuration.
pub(super) fn node_findings(inv: &Inventory, node: &str) -> Vec<Finding> {
    let cilium: Vec<&CniNode> = inv.cluster.cni_nodes().filter(|c| c.name == node).collect();
    let this = ThisNode { inv, node };
    let kube_ovn = inv.cluster.subnets.iter().any(|s| s.primary);
    let mut out = this.exhaustion();
    // Where kube-ovn allocates, pods get addresses from its Subnets, not Cilium's pod range.
    if !kube_ovn {
        out.extend(this.capacity_shortfall(&cilium));
    }
    out.extend(this.operator_trouble());
    out.extend(this.pool_nearly_full());
    if kube_ovn {
        out.extend(not_masqueraded(inv, &cilium));
    }
    out
}

/// One node and the inventory around it: what its own findings are built from.
struct ThisNode<'a> {
    inv: &'a Inventory,
    node: &'a str,
}

impl ThisNode<'_> {
    /// A finding about the node itself, resting on what `source` says.
    fn finding(
        &self,
        kind: FindingKind,
        source: Source,
        problem: NodeProblem,
        remedy: Remedy,
    ) -> Finding {
        Finding {
            kind,
            scope: Scope::SameNode,
            ip: None,
            owner: Owner::new(self.node, Role::Node, None, source),
            cause: Cause::Node(problem),
            remedy,
            trust: Trust::of_source(source),
        }
    }

    /// kubelet reports pods refused for want of an address: by Cilium's
    /// allocator, by host-local's, by Calico's (each in its own words, with
    /// its own fix).
    fn exhaustion(&self) -> Vec<Finding> {
        let ipam = super::pool::ipam_kind(self.inv, self.node);
        [ipam, IpamKind::HostLocal, IpamKind::Calico]
            .into_iter()
            .filter_map(|ipam| {
                let problem = exhausted(self.inv, ipam)?;
                let node = self.node.to_owned();
                let remedy = match ipam {
                    IpamKind::OperatorPool => Remedy::CheckOperatorPool { node },
                    IpamKind::HostScope | IpamKind::Unknown => {
                        Remedy::AddCapacity { node, usable: None }
                    }
                    IpamKind::HostLocal => Remedy::ReleaseHostLocal { node },
                    IpamKind::Calico => Remedy::Calico(CalicoFix::CheckPools { node }),
                };
                let mut f = self.finding(
                    FindingKind::PodIpExhaustion,
                    Source::KubeletEvent,
                    problem,
                    remedy,
                );
                // kubelet's Events can be forged; pods filling the node's Cilium range cannot.
                let cilium = !matches!(ipam, IpamKind::HostLocal | IpamKind::Calico);
                if cilium && filled_by_pods(self.inv, self.node) {
                    f.trust = Trust::Cluster;
                }
                Some(f)
            })
            .collect()
    }

    /// The node accepts more pods than its Cilium pod range has addresses for.
    fn capacity_shortfall(&self, cilium: &[&CniNode]) -> Option<Finding> {
        let cn = cilium.iter().find(|c| !c.pod_cidrs.is_empty())?;
        let allocatable = self
            .inv
            .node_facts
            .as_ref()
            .filter(|n| n.name == self.node)
            .and_then(|n| n.allocatable_pods)?;
        // The first family whose ranges hold fewer usable addresses than `allocatable` pods.
        let (ranges, usable, infra) =
            families(cn).find(|(_, u, _)| *u < u128::from(allocatable))?;
        let usable = u64::try_from(usable).unwrap_or(u64::MAX);
        let problem = NodeProblem::Capacity {
            ranges,
            usable,
            infra: u64::try_from(infra).unwrap_or(u64::MAX),
            allocatable,
        };
        let remedy = Remedy::AddCapacity {
            node: self.node.to_owned(),
            usable: Some(usable),
        };
        Some(self.finding(
            FindingKind::PodIpCapacityShortfall,
            Source::NodeStatus,
            problem,
            remedy,
        ))
    }

    /// A switch to cluster-pool that never took, else cilium-operator's error.
    fn operator_trouble(&self) -> Option<Finding> {
        let cilium_nodes = &self.inv.cluster.cilium_nodes;
        let own = cilium_nodes.iter().find(|c| c.name == self.node)?;
        let node = self.node.to_owned();
        if let Some(problem) = super::pool::migration_stuck(self.inv, own) {
            let remedy = match &problem {
                NodeProblem::MigrationStuck {
                    pool_change: true,
                    pod_cidrs,
                    ..
                } => Remedy::KeepOldPoolOrReallocate {
                    node,
                    old: pod_cidrs.clone(),
                },
                _ => Remedy::ClearPodCidrsAfterRollout { node },
            };
            return Some(self.finding(
                FindingKind::IpamMigrationStuck,
                Source::CiliumConfig,
                problem,
                remedy,
            ));
        }
        // A stuck migration's error is told in its own finding, with the fix.
        let error = own.operator_error.clone()?;
        let pool = super::pool::explaining(self.inv, &error);
        let remedy = match &pool {
            Some(p) => Remedy::GrowClusterPool {
                pools: p.pools.clone(),
            },
            None => Remedy::FixOperatorAllocation { node },
        };
        Some(self.finding(
            FindingKind::CiliumIpamError,
            Source::OperatorStatus,
            NodeProblem::OperatorError { error, pool },
            remedy,
        ))
    }

    /// Latent: the cluster pool has room for no more nodes than there are.
    fn pool_nearly_full(&self) -> Vec<Finding> {
        super::pool::nearly_full(self.inv, self.node)
            .into_iter()
            .map(|fit| {
                let remedy = Remedy::GrowClusterPool {
                    pools: fit.pools.clone(),
                };
                self.finding(
                    FindingKind::ClusterPoolNearlyFull,
                    Source::CiliumConfig,
                    NodeProblem::PoolNearlyFull(fit),
                    remedy,
                )
            })
            .collect()
    }
}

/// The node's pods without an address that kubelet reports the allocator
/// had none left for: host-local's when `ipam` is, else Cilium's.
fn exhausted(inv: &Inventory, ipam: IpamKind) -> Option<NodeProblem> {
    let mut pods = Vec::new();
    // The first report's message, the counts summed.
    let mut kubelet: Option<KubeletReport> = None;
    for p in own(inv).filter(|p| status_ips(p).next().is_none()) {
        let sandbox = inv.cluster.sandbox.iter();
        let mut refused = sandbox
            .filter(|f| ran_dry(&f.refusal, ipam) && f.is_about(p))
            .peekable();
        if refused.peek().is_some() {
            pods.push(PodRef::from(p));
        }
        for f in refused {
            let k = kubelet.get_or_insert_with(|| KubeletReport {
                count: 0,
                message: f.message.clone(),
            });
            k.count = k.count.saturating_add(f.count);
        }
    }
    let kubelet = kubelet?;
    let refused_pods = pods.len();
    pods.truncate(NodeProblem::PODS_NAMED);
    Some(NodeProblem::Exhausted {
        pods,
        refused_pods,
        kubelet,
        ipam,
    })
}

/// Whether `refusal` is the allocator of `ipam` out of addresses.
fn ran_dry(refusal: &SandboxRefusal, ipam: IpamKind) -> bool {
    match refusal {
        SandboxRefusal::RangeSetFull(_) => ipam == IpamKind::HostLocal,
        SandboxRefusal::PoolsExhausted => ipam == IpamKind::Calico,
        SandboxRefusal::NoAddressLeft => !matches!(ipam, IpamKind::HostLocal | IpamKind::Calico),
        _ => false,
    }
}

/// Whether `node`'s own pods hold every address its Cilium pod range has for
/// them (in one family): what corroborates kubelet's "range is full", which
/// reaches the agent as an Event anyone who may create Events can write.
fn filled_by_pods(inv: &Inventory, node: &str) -> bool {
    let Some(cn) = inv
        .cluster
        .cni_nodes()
        .find(|c| c.name == node && !c.pod_cidrs.is_empty())
    else {
        return false;
    };
    families(cn).any(|(ranges, usable, _)| {
        let mut held: Vec<IpAddr> = inv
            .cluster
            .pods
            .iter()
            .filter(|p| p.node.as_deref() == Some(node) && p.can_receive_traffic())
            .flat_map(status_ips)
            .filter(|ip| ranges.iter().any(|r| r.contains(ip)))
            .collect();
        held.sort_unstable();
        held.dedup();
        held.len() as u128 >= usable
    })
}

/// Addresses Cilium's host-scope allocator can hand out of `net`: all but the
/// first and the last, of at most 65,536 for IPv6.
fn allocatable_in(net: &IpNet) -> u128 {
    let bits = u32::from(net.max_prefix_len() - net.prefix_len());
    let size = 1u128.checked_shl(bits).unwrap_or(u128::MAX);
    let size = if net.max_prefix_len() == 128 {
        size.min(IPV6_RANGE_CAP)
    } else {
        size
    };
    size.saturating_sub(2)
}

/// Per family with a pod range of `cn` (IPv4 first): its ranges, the
/// addresses pods can get from them, and how many Cilium's own take.
fn families(cn: &CniNode) -> impl Iterator<Item = (Vec<IpNet>, u128, u128)> + '_ {
    [false, true].into_iter().filter_map(|v6| {
        let ranges: Vec<IpNet> = cn
            .pod_cidrs
            .iter()
            .filter(|c| c.addr().is_ipv6() == v6)
            .copied()
            .collect();
        if ranges.is_empty() {
            return None;
        }
        let mut infra: Vec<IpAddr> = cn
            .addresses
            .iter()
            .map(|a| a.ip)
            .filter(|ip| ranges.iter().any(|r| r.contains(ip)))
            .collect();
        infra.sort_unstable();
        infra.dedup();
        let infra = infra.len() as u128;
        let total: u128 = ranges.iter().map(allocatable_in).sum();
        Some((ranges, total.saturating_sub(infra), infra))
    })
}

/// The node's Ingress IPs outside every Subnet kube-ovn masquerades (per
/// family, where it masquerades any), once its default Subnet is known.
fn not_masqueraded(inv: &Inventory, cilium: &[&CniNode]) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    // Only with kube-ovn's default Subnet in view: a partial list of Subnets
    // (a tenant's only) says nothing about what kube-ovn masquerades.
    let kube_ovn = &inv.cluster.subnets;
    if !kube_ovn.iter().any(|s| s.is_default && s.masqueraded) {
        return out;
    }
    for cn in cilium {
        for a in cn.addresses.iter().filter(|a| a.role == Role::Ingress) {
            let v6 = a.ip.is_ipv6();
            let subnets: Vec<(String, Vec<IpNet>)> = kube_ovn
                .iter()
                .filter(|s| s.masqueraded)
                .map(|s| {
                    let cidrs = s.cidrs.iter().filter(|c| c.addr().is_ipv6() == v6);
                    (s.name.clone(), cidrs.copied().collect::<Vec<_>>())
                })
                .filter(|(_, c)| !c.is_empty())
                .collect();
            let inside = subnets
                .iter()
                .any(|(_, cidrs)| cidrs.iter().any(|c| c.contains(&a.ip)));
            if subnets.is_empty() || inside || out.iter().any(|f| f.ip == Some(a.ip)) {
                continue;
            }
            // kube-ovn's default Subnet (not its join subnet) is where to carve a pool.
            let carve = subnets
                .iter()
                .find(|(name, _)| name == "ovn-default")
                .or_else(|| subnets.iter().find(|(name, _)| name != "join"))
                .map(|(name, cidrs)| (name.clone(), cidrs[0]));
            out.push(Finding {
                kind: FindingKind::IngressIpNotMasqueraded,
                scope: Scope::SameNode,
                ip: Some(a.ip),
                owner: Owner::new(cn.name.clone(), Role::Ingress, None, a.source),
                cause: Cause::Node(NodeProblem::NotMasqueraded { subnets }),
                remedy: Remedy::PoolInMasqueradedSubnet { subnet: carve },
                trust: Trust::of_source(a.source),
            });
        }
    }
    out
}
