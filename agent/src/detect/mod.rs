//! Detection: a pure function from one [`Inventory`] to the findings it shows.
//!
//! Rules (DESIGN.md):
//! - this node's pods are checked against every address this node holds (its
//!   kernel's FIB answer first, then its addresses and CiliumNode) and against
//!   the Cilium infrastructure addresses of every other node;
//! - pods on other nodes are checked only against this node's addresses;
//! - one finding per (pod, IP), never two kinds for the same collision; a
//!   shadowing address wins over a blackhole route;
//! - pods that cannot receive traffic (hostNetwork, Succeeded, Failed) are skipped,
//!   and so are pods being deleted (`metadata.deletionTimestamp`).

pub mod audit;
mod bridge;
mod calico;
mod cause;
mod finding;
mod forged;
pub mod impact;
mod kernel;
mod leftover;
mod node;
mod overlap;
mod owners;
mod pool;
mod refused;
mod remedy;
mod trust;
mod truth;
pub mod vip;

use std::{collections::HashSet, net::IpAddr};

pub use bridge::foreign_bridge_ranges;
pub use calico::{CalicoFix, TunnelAllocation};
pub use finding::{
    Cause, Finding, FindingKind, InfraAddress, IpamKind, KubeletReport, NodeProblem, Owner, PodRef,
    PodSite, PoolFit, Remedy, Reserver, Role, Scope, Trust,
};
pub use kernel::{truth_report, truth_table};
pub use owners::Index;
use owners::{OwnerRef, Owners};
use remedy::{collision_remedy, uses_kube_ovn};
pub use truth::{KernelFix, KernelTruth};

use crate::inventory::{
    FibResult, Inventory, IpSource, Pod, PodIp, RouteKind, ServiceAddress, Source, TABLE_LOCAL,
    TABLE_MAIN, TruthRow, TruthTable, VIP_DEVICES,
};

/// Every finding `inv` shows, in a stable order (see [`Finding::sort_key`]).
pub fn detect(inv: &Inventory) -> Vec<Finding> {
    detect_with_truth(inv).0
}

/// [`detect`] and [`truth_report`] of `inv` at once: the truth table is built
/// once for both.
pub fn detect_with_truth(inv: &Inventory) -> (Vec<Finding>, TruthTable) {
    let index = Index::of(inv);
    let (findings, rows) = findings_and_rows(inv, &index, Pods::All);
    (findings, kernel::report_of(inv, rows))
}

/// Whose pods a node's detection looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pods {
    /// The agent's: its node's pods, and pods elsewhere holding one of its addresses.
    All,
    /// An audit's: only the node's own pods; a pod elsewhere is checked under its own node.
    Own,
}

/// [`detect`] on a prebuilt [`Index`] of every node's Cilium addresses, which
/// an audit builds once for all nodes.
pub fn detect_with<'a>(inv: &'a Inventory, index: &'a Index<'a>, pods: Pods) -> Vec<Finding> {
    findings_and_rows(inv, index, pods).0
}

/// [`detect_with`]'s findings, and the truth table's rows they were found in.
fn findings_and_rows<'a>(
    inv: &'a Inventory,
    index: &'a Index<'a>,
    pods: Pods,
) -> (Vec<Finding>, Vec<TruthRow>) {
    let owners = Owners::new(inv, index);
    let mut seen = HashSet::new();
    let mut findings = Vec::new();
    for pod in inv.pods.iter().filter(|p| p.reportable()) {
        let Some(pod_node) = pod.node.as_deref() else {
            continue;
        };
        for pip in &pod.ips {
            if forged::outside_its_subnet(inv, pod, pip) || forged::refused_outright(inv, pip) {
                continue;
            }
            if !seen.insert((
                pod.uid.as_str(),
                pod.namespace.as_str(),
                pod.name.as_str(),
                pip.ip,
            )) {
                continue;
            }
            // The pod's side is built (strings cloned) only for a finding.
            let site = || PodSite {
                pod: PodRef {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                },
                node: pod_node.to_owned(),
                ip_source: pip.source.clone(),
                created: pod.created,
                controller: pod.controller.clone(),
            };
            let finding = if pod_node == inv.node {
                check_own_pod(inv, &owners, pod, site, pip)
            } else if pods == Pods::Own {
                None
            } else {
                check_foreign_pod(inv, &owners, site, pip)
            };
            findings.extend(finding);
        }
    }
    let (kernel, rows) = kernel::kernel_findings(inv, &seen_findings(&findings));
    findings.extend(kernel);
    findings.extend(overlap::allocator_overlaps(inv, &owners));
    findings.extend(node::node_findings(inv, &inv.node));
    findings.extend(bridge::stale_bridges(inv));
    findings.extend(leftover::leftovers(inv));
    findings.extend(vip::held_node_addresses(inv));
    findings.extend(calico::unallocated_tunnels(inv));
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    (findings, rows)
}

/// The (pod uid, IP) pairs that already have a finding: one finding per (pod, IP).
fn seen_findings(findings: &[Finding]) -> HashSet<(&str, IpAddr)> {
    findings
        .iter()
        .filter_map(|f| Some((f.pod()?.uid.as_str(), f.ip?)))
        .collect()
}

/// The IPs whose FIB answer detection needs: those of `node`'s pods.
pub fn lookups<'a>(node: &'a str, pods: &'a [Pod]) -> impl Iterator<Item = IpAddr> + 'a {
    pods.iter()
        .filter(move |p| p.node.as_deref() == Some(node) && p.reportable())
        .flat_map(|p| p.ips.iter().map(|i| i.ip))
}

fn check_own_pod(
    inv: &Inventory,
    owners: &Owners<'_>,
    pod: &Pod,
    site: impl FnOnce() -> PodSite,
    pip: &PodIp,
) -> Option<Finding> {
    let mut found = check_own_ip(inv, owners, pod, site, pip);
    // kubelet's refusal is the evidence when the IP came from it.
    if pip.source == IpSource::Event
        && let Some(Finding {
            cause: Cause::Collision { kubelet, .. },
            ..
        }) = &mut found
    {
        *kubelet = refused::kubelet_report(inv, pod, pip.ip);
    }
    found
}

/// The checks of one of this node's pod addresses, in order: the first that
/// finds something is the finding (one per address, see the module's rules).
fn check_own_ip(
    inv: &Inventory,
    owners: &Owners<'_>,
    pod: &Pod,
    site: impl FnOnce() -> PodSite,
    pip: &PodIp,
) -> Option<Finding> {
    let fib = inv.host.fib.get(&pip.ip);
    let fib_text = || fib.map(|f| inv.host.describe_fib(f));

    // 1. The kernel delivers the IP locally: whatever holds it, host traffic never reaches the pod.
    if let Some(FibResult::Local { oif }) = fib {
        let owner = local_owner(inv, owners, pip.ip, *oif);
        let evidence = (fib_text(), shadowed_pod_route(inv, pip.ip));
        return Some(collision(
            inv,
            (Scope::SameNode, pip),
            owner,
            site(),
            evidence,
        ));
    }

    // 2. An address this node or another node holds without the kernel showing it
    //    as local (Cilium's Ingress IP lives only in its endpoint manager).
    if let Some((held_by, scope)) = held(owners, pip.ip) {
        let owner = held_by.to_owner();
        return Some(collision(
            inv,
            (scope, pip),
            owner,
            site(),
            (fib_text(), None),
        ));
    }

    // 3. An address the pod was refused (kubelet's Event) that no node holds:
    //    another live pod's, or an endpoint Cilium keeps for a pod that is gone.
    //    No route check: the pod never had the address.
    if pip.source == IpSource::Event {
        return refused::refused(inv, pod, site(), pip.ip);
    }
    // 4. No one else holds it, but the host's route to it goes nowhere.
    blackhole(inv, pip, fib?, site)
}

/// Who holds a locally delivered IP: the address naming it, else the `local`
/// route covering it.
fn local_owner(inv: &Inventory, owners: &Owners<'_>, ip: IpAddr, oif: Option<u32>) -> Owner {
    owners
        .mine
        .get(&ip)
        .map_or_else(|| local_route_owner(inv, ip, oif), |o| o.to_owner())
}

/// The node address `ip` is, this node's first, and so the collision's scope.
fn held<'a>(owners: &Owners<'a>, ip: IpAddr) -> Option<(OwnerRef<'a>, Scope)> {
    owners
        .mine
        .get(&ip)
        .copied()
        .map(|o| (o, Scope::SameNode))
        .or_else(|| owners.other(&ip).map(|o| (o, Scope::CrossNode)))
}

/// The host's route to the pod's IP ends nowhere (a blackhole, unreachable or
/// prohibit route, or none at all).
fn blackhole(
    inv: &Inventory,
    pip: &PodIp,
    fib: &FibResult,
    site: impl FnOnce() -> PodSite,
) -> Option<Finding> {
    let dead_end = fib.dead_end()?;
    let route = inv
        .host
        .best_route_of_kind(pip.ip, dead_end.route_kind())
        .map(|r| inv.host.describe_route(r));
    Some(Finding::blackhole(
        pip.ip,
        site(),
        dead_end,
        route,
        uses_kube_ovn(inv, pip),
    ))
}

/// The owner of a locally delivered IP that no address names: a `local` route
/// covering it (the lookup itself answers `dev lo`), named by its device.
fn local_route_owner(inv: &Inventory, ip: IpAddr, fib_oif: Option<u32>) -> Owner {
    let route_oif = inv
        .host
        .best_route(ip, TABLE_LOCAL)
        .filter(|r| r.kind == RouteKind::Local)
        .and_then(|r| r.oif);
    let device = route_oif
        .or(fib_oif)
        .and_then(|i| inv.host.link_name(i))
        .map(str::to_owned);
    let role = device.as_deref().map_or(Role::Local, |d| {
        Role::of_device(d, &inv.router_device, &inv.node)
    });
    Owner {
        node: inv.node.clone(),
        role,
        device,
        source: Source::Kernel,
    }
}

fn check_foreign_pod(
    inv: &Inventory,
    owners: &Owners<'_>,
    site: impl FnOnce() -> PodSite,
    pip: &PodIp,
) -> Option<Finding> {
    let owner = owners.mine.get(&pip.ip)?.to_owner();
    Some(collision(
        inv,
        (Scope::CrossNode, pip),
        owner,
        site(),
        (None, None),
    ))
}

/// The collision of `pip` with `owner`'s address. A local address (not
/// Cilium's) is checked against the Services' addresses: one a tenant chose is
/// fixed by removing it from the Service, never by moving the pod.
fn collision(
    inv: &Inventory,
    (scope, pip): (Scope, &PodIp),
    owner: Owner,
    site: PodSite,
    evidence: (Option<String>, Option<String>),
) -> Finding {
    let claim = (owner.role == Role::Local).then(|| service_claim(inv, pip.ip, &owner));
    let remedy = match &claim {
        Some((Trust::TenantAddress, service)) => Remedy::RemoveServiceAddress {
            ip: pip.ip,
            service: service.clone(),
            device: owner.device.clone(),
        },
        _ => collision_remedy(inv, &owner, pip),
    };
    let mut f = Finding::collision(scope, pip.ip, owner, site, evidence, remedy);
    if let Cause::Collision {
        service,
        held_behind,
        ..
    } = &mut f.cause
    {
        if let Some((trust, claimed)) = claim {
            f.trust = f.trust.max(trust);
            *service = claimed;
        }
        // Only a namespace of this node can be the pod's: a pod elsewhere is
        // not behind our veths. Named only where exactly one pod namespace
        // holds it (not the node's own, like Cilium's health endpoint).
        if scope == Scope::SameNode {
            *held_behind = kernel::sole_pod_holder(inv, pip.ip);
        }
    }
    f
}

/// How far a node's local address is a tenant's choice: a Service claims it,
/// or it sits on a device that holds Services' addresses only (tenant-address);
/// the Services were read and none claims it (kernel); not known yet (unchecked).
fn service_claim(inv: &Inventory, ip: IpAddr, owner: &Owner) -> (Trust, Option<ServiceAddress>) {
    let holders = inv.services.holders(ip);
    let service = holders.and_then(<[ServiceAddress]>::first).cloned();
    let vip_device = owner
        .device
        .as_deref()
        .is_some_and(|d| VIP_DEVICES.contains(&d));
    let trust = if service.is_some() || vip_device {
        Trust::TenantAddress
    } else if holders.is_some() {
        Trust::of_source(owner.source)
    } else {
        Trust::Unchecked
    };
    (trust, service)
}

/// A host route in the main table that points at the pod (a /32 or /128 as
/// Cilium and Calico lay them) but loses to the local table.
fn shadowed_pod_route(inv: &Inventory, ip: IpAddr) -> Option<String> {
    let r = inv
        .host
        .best_route(ip, TABLE_MAIN)
        .filter(|r| r.dst.prefix_len() == r.dst.max_prefix_len())?;
    Some(inv.host.describe_route(r))
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
