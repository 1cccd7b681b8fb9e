//! Collisions and blackholes: one of this node's pods checked against every
//! address a node holds and against its host route; a pod elsewhere against
//! this node's addresses (the rules: [`super`]).

use std::net::IpAddr;

use super::{
    Cause, Finding, Owner, PodSite, Remedy, Role, Scope, Trust, kernel,
    kind::{Alert, Count, Spec, rank},
    owners::{OwnerRef, Owners},
    refused,
    remedy::{collision_remedy, uses_kube_ovn},
};
use crate::{
    cni::{self, Holds},
    inventory::{
        FibResult, Inventory, IpSource, Pod, PodIp, RouteKind, ServiceAddress, Source, TABLE_LOCAL,
        TABLE_MAIN,
    },
};

/// The alert on every collision: host traffic to the pod never reaches it.
const COLLISION: Alert = Alert::Named("IPShadowPodIPCollision");

/// A collision kind: the pod's own node cannot reach it.
const fn collision_spec(name: &'static str, what: &'static str, remediable: bool) -> Spec {
    Spec {
        remediable,
        rank: rank::unreachable,
        ..Spec::pod(name, what, Count::Collisions, COLLISION)
    }
}

/// The pod's IP is Cilium's router IP (`CiliumInternalIP`) of a node.
pub(super) const ROUTER: Spec = collision_spec(
    "RouterIPCollision",
    "the pod's IP is Cilium's router IP (cilium_host) of a node",
    true,
);

/// The pod's IP is Cilium's Ingress IP of a node.
pub(super) const INGRESS: Spec = Spec {
    rank: rank::cannot_start,
    ..collision_spec(
        "IngressIPCollision",
        "the pod's IP is Cilium's Ingress IP of a node",
        true,
    )
};

/// The pod's IP is Cilium's health endpoint IP of a node.
pub(super) const HEALTH: Spec = collision_spec(
    "HealthIPCollision",
    "the pod's IP is Cilium's health endpoint IP of a node",
    true,
);

/// The pod's IP is a node's tunnel address (Calico's IPIP, VXLAN or WireGuard).
pub(super) const TUNNEL: Spec = collision_spec(
    "TunnelIPCollision",
    "the pod's IP is a node's tunnel address (Calico's IPIP, VXLAN or WireGuard)",
    false,
);

/// The pod's IP is a node's own in its pod subnet.
pub(super) const GATEWAY: Spec = collision_spec(
    "GatewayIPCollision",
    "the pod's IP is a node's own in its pod subnet: a bridge's gateway, ovn-kubernetes' \
     gateway or management port",
    false,
);

/// The pod's IP is another local address of a node; only that node's kernel
/// shows it, so the owner reports it too.
pub(super) const LOCAL: Spec = Spec {
    owner_reports: true,
    unseen_by_audit: Some(
        "addresses on the node's other devices live only in its kernel (a pod on a Service's \
         address is reported: kube-proxy binds those on every node)",
    ),
    ..collision_spec(
        "LocalAddressCollision",
        "the pod's IP is another local address of a node",
        true,
    )
};

/// The node's route to its own pod goes nowhere.
pub(super) const BLACKHOLE: Spec = Spec {
    rank: rank::unreachable_anywhere,
    unseen_by_audit: Some("the node's routes live only in its kernel"),
    ..Spec::pod(
        "HostRouteBlackhole",
        "the node's route to its own pod ends in blackhole, unreachable, prohibit or nowhere",
        Count::HostRouteBlackholes,
        Alert::Named("IPShadowHostRouteBlackhole"),
    )
};

pub(super) fn check_own_pod(
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
        .best_route(pip.ip, |r| r.kind == dead_end.route_kind())
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
        .best_route(ip, |r| r.table == TABLE_LOCAL)
        .filter(|r| r.kind == RouteKind::Local)
        .and_then(|r| r.oif);
    let device = route_oif
        .or(fib_oif)
        .and_then(|i| inv.host.link_name(i))
        .map(str::to_owned);
    let role = device.as_deref().map_or(Role::Local, |d| {
        Role::of_device(d, &inv.router_device, &inv.node)
    });
    Owner::new(inv.node.clone(), role, device, Source::Kernel)
}

pub(super) fn check_foreign_pod(
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
    let holders = inv.cluster.services.holders(ip);
    let service = holders.and_then(<[ServiceAddress]>::first).cloned();
    let vip_device = owner
        .device
        .as_deref()
        .is_some_and(|d| cni::holds(d, Holds::ServiceAddresses));
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
        .best_route(ip, |r| r.table == TABLE_MAIN)
        .filter(|r| r.dst.prefix_len() == r.dst.max_prefix_len())?;
    Some(inv.host.describe_route(r))
}
