//! Pod addresses no allocator can have given: written by hand into what a
//! tenant can write (an annotation, an Event), and skipped before any check so
//! a forgery finds nothing.

use std::net::IpAddr;

use ipnet::IpNet;

use super::Trust;
use crate::inventory::{Inventory, IpSource, Pod, PodIp};

/// An annotated address outside the Subnet the pod's own annotation names
/// (when that Subnet is known): kube-ovn never gave it, someone wrote it.
pub(super) fn outside_its_subnet(inv: &Inventory, pod: &Pod, pip: &PodIp) -> bool {
    pip.source == IpSource::Annotation
        && pod.logical_switch.as_ref().is_some_and(|name| {
            inv.cluster
                .subnets
                .iter()
                .find(|s| s.name == *name)
                .is_some_and(|s| !s.cidrs.iter().any(|c| c.contains(&pip.ip)))
        })
}

/// An address from what a tenant can write (an Event, an annotation) that no
/// pod can have, refused outright: loopback, link-local, unspecified,
/// multicast, or outside every range the cluster's pod allocators hand out
/// (where one of its family is known). A forged Event naming the node's own
/// 127.0.0.1 or another network's address finds nothing.
pub(super) fn refused_outright(inv: &Inventory, pip: &PodIp) -> bool {
    if Trust::of_ip(&pip.source) != Trust::Hint {
        return false;
    }
    let ip = pip.ip;
    let no_pod_address = ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || crate::inventory::link_local(ip)
        || matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    let mut ranges = pod_ranges(inv)
        .filter(|r| r.addr().is_ipv4() == ip.is_ipv4())
        .peekable();
    let known = ranges.peek().is_some();
    no_pod_address || (known && !ranges.any(|r| r.contains(&ip)))
}

/// The ranges the cluster's pods get addresses from, as far as the inventory
/// shows them: Cilium's for every node (podCIDRs, multi-pool; a pod may hold an
/// address of another node's range, which is a finding, not a forgery), its
/// cluster pools, kube-ovn's primary Subnets, Calico's IPPools where its
/// IPAM is seen in use ([`Inventory::calico_pod_ranges`]).
/// Node.spec.podCIDRs is not one of them: in ENI or kube-ovn clusters pods get
/// addresses outside it.
fn pod_ranges(inv: &Inventory) -> impl Iterator<Item = IpNet> + '_ {
    inv.cluster
        .cni_nodes()
        .flat_map(|c| c.ranges().map(|(r, _)| r))
        .chain(
            inv.cluster
                .cilium_config
                .iter()
                .flat_map(|c| c.cluster_pool.iter().copied()),
        )
        .chain(inv.primary_subnet_ranges())
        // Every pool for workloads, disabled too (pods stay on one through
        // Calico's pool migration), and every block: where pods are given
        // addresses, once Calico's IPAM is seen in use. Pools alone prove
        // nothing: Canal creates the default pool and gives pods host-local
        // addresses.
        .chain(inv.calico_pod_ranges())
}
