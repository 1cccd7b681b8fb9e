//! A CNI refused a pod's sandbox, in its own words, over what the node kept
//! from before (kubelet's `FailedCreatePodSandBox`):
//! - Calico: a host route to the address its IPAM gave the pod still leads
//!   to another `cali…` interface, a veth a previous sandbox left or a live
//!   pod given the same address (calico#2730, #3940, #11755): `PodRouteTaken`.
//! - The bridge plugin: its bridge holds another address than the gateway of
//!   the node's pod range, kept from a previous podCIDR (kube-router#689,
//!   #496; antrea#1685): a stale bridge address on the pod, the face kubelet
//!   shows of the node's own finding, which needs another node to own the
//!   old range while every refused pod is harmed anyway.
//!
//! Only the plugin's own wording leads here ([`SandboxRefusal::cni`]): a
//! look-alike of another plugin was never read as one of these. The refusal
//! rests on an Event, which a tenant can write: a hint, whatever the kernel
//! shows beside it.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{
    Cause, Finding, FindingKind, Owner, PodRef, PodSite, Remedy, Role, Scope, Trust,
    kind::{Alert, Spec},
    own,
    refused::{holder_of, refusal, summed},
    status_ips,
};
use crate::{
    cni::{self, Holds},
    inventory::{
        Inventory, IpSource, Pod, RouteKind, SandboxFailure, SandboxRefusal, Source, TABLE_MAIN,
        link_local,
    },
};

/// The CNI refused the pod: the host routes its address through another interface.
pub(super) const ROUTE_TAKEN: Spec = refusal(
    "PodRouteTaken",
    "the CNI refused the pod: the host routes its address through another interface (Calico's \
     \"route … already exists for an interface other than\")",
    Alert::Named("IPShadowPodRouteTaken"),
);

/// The refusals of this node's pods that have not started since (with no
/// address of their own: the refusal names it, [`IpSource::Event`]).
pub(super) fn leftovers(inv: &Inventory) -> Vec<Finding> {
    let mut out = Vec::new();
    let sandbox = &inv.cluster.sandbox;
    // A pod with an address in its status got a sandbox after all: the
    // Events left from before are no longer its trouble.
    for pod in own(inv).filter(|p| status_ips(p).next().is_none()) {
        let failures: Vec<&SandboxFailure> = sandbox.iter().filter(|f| f.is_about(pod)).collect();
        out.extend(route_taken(inv, pod, &failures));
        out.extend(bridge_refused(inv, pod, &failures));
    }
    out
}

/// Calico's refusal of `pod`: the route to its address is another interface's.
fn route_taken(inv: &Inventory, pod: &Pod, failures: &[&SandboxFailure]) -> Option<Finding> {
    let ip = failures.iter().find_map(|f| match f.refusal {
        SandboxRefusal::HostRouteTaken { dst, .. } => dst,
        _ => None,
    })?;
    let about_ip = |r: &SandboxRefusal| matches!(r, SandboxRefusal::HostRouteTaken { dst: Some(d), .. } if *d == ip);
    let kubelet = summed(failures.iter().copied().filter(|f| about_ip(&f.refusal)))?;
    let named = failures.iter().find_map(|f| match &f.refusal {
        r @ SandboxRefusal::HostRouteTaken { holder, .. } if about_ip(r) => holder.clone(),
        _ => None,
    });
    let kernel = host_route_through(inv, ip);
    // The route is gone: whatever held it was cleared, kubelet's next retry succeeds.
    if kernel.is_none() && !inv.host.links.is_empty() {
        return None;
    }
    // The kernel shows the route where it leads through the interface named
    // (or through any, when the message names none: Calico before 3.x).
    let seen = kernel.is_some() && (named.is_none() || named == kernel);
    let interface = named.or(kernel);
    let holder = holder_of(inv, pod, ip, &inv.node);
    // Through no pod's veth (Felix's route to a pod elsewhere out vxlan.calico
    // or tunl0): deleting that interface would cut the node off; without the
    // pod holding it, nothing here can be told safely.
    if holder.is_none() && !through_pod_veth(inv, interface.as_deref()) {
        return None;
    }
    let (role, source) = match holder {
        Some(_) => (Role::Pod, Source::PodStatus),
        None if seen => (Role::Local, Source::Kernel),
        None => (Role::Local, Source::KubeletEvent),
    };
    Some(Finding {
        kind: FindingKind::PodRouteTaken,
        scope: Scope::SameNode,
        ip: Some(ip),
        owner: Owner::new(inv.node.clone(), role, interface.clone(), source),
        remedy: Remedy::ClearCalicoRoute {
            node: inv.node.clone(),
            ip,
            interface: interface.clone(),
            holder: holder.map(PodRef::from),
        },
        cause: Cause::Leftover {
            site: PodSite::new(pod, &inv.node, IpSource::Event),
            kubelet,
            interface,
            holder: holder.map(PodRef::from),
            wanted: None,
            seen,
        },
        trust: Trust::Hint,
    })
}

/// Whether `iface` may be a leftover pod veth: not one of Calico's tunnels,
/// and a host veth with a peer namespace where the namespaces were read.
fn through_pod_veth(inv: &Inventory, iface: Option<&str>) -> bool {
    let Some(iface) = iface else { return true };
    let ns = &inv.host.namespaces;
    !cni::holds(iface, Holds::Tunnel) && (!ns.read || ns.ifaces.iter().any(|i| i.name == iface))
}

/// The interface the main table's host route to `ip` leads through.
fn host_route_through(inv: &Inventory, ip: IpAddr) -> Option<String> {
    inv.host
        .routes
        .iter()
        .find(|r| {
            r.table == TABLE_MAIN
                && r.kind == RouteKind::Unicast
                && r.dst.addr() == ip
                && r.dst.prefix_len() == r.dst.max_prefix_len()
        })
        .and_then(|r| r.oif)
        .and_then(|i| inv.host.link_name(i))
        .map(str::to_owned)
}

/// The bridge plugin's refusal of `pod`: its bridge holds another address.
fn bridge_refused(inv: &Inventory, pod: &Pod, failures: &[&SandboxFailure]) -> Option<Finding> {
    let (bridge, wanted) = failures.iter().find_map(|f| match &f.refusal {
        SandboxRefusal::BridgeAddressDiffers {
            bridge: Some(b),
            gateway,
        } => Some((b.clone(), *gateway)),
        _ => None,
    })?;
    let kubelet = summed(failures.iter().copied().filter(|f| {
        matches!(&f.refusal, SandboxRefusal::BridgeAddressDiffers { bridge: Some(b), .. } if *b == bridge)
    }))?;
    if !pods_bridge(inv, &bridge, wanted) {
        return None;
    }
    let stale = other_address(inv, &bridge, wanted);
    // The kernel shows no other address: fixed since kubelet's Event was written.
    if stale.is_none() && !inv.host.links.is_empty() {
        return None;
    }
    let remedy = match stale {
        Some(address) => Remedy::DeleteBridgeAddress {
            node: inv.node.clone(),
            bridge: bridge.clone(),
            address,
        },
        None => Remedy::RecreateBridge {
            node: inv.node.clone(),
            bridge: bridge.clone(),
            gateway: wanted,
        },
    };
    let source = stale.map_or(Source::KubeletEvent, |_| Source::Kernel);
    Some(Finding {
        kind: FindingKind::StaleBridgeAddress,
        scope: Scope::SameNode,
        ip: stale.or(wanted).map(|a| a.addr()),
        owner: Owner::new(inv.node.clone(), Role::Node, Some(bridge.clone()), source),
        cause: Cause::Leftover {
            site: PodSite::new(pod, &inv.node, IpSource::Event),
            kubelet,
            interface: Some(bridge),
            holder: None,
            wanted,
            seen: stale.is_some(),
        },
        remedy,
        trust: Trust::Hint,
    })
}

/// Whether `bridge` is a CNI's pod bridge, or its gateway `wanted` lies in this
/// node's pod range: a Multus bridge shared by two networks is no stale podCIDR.
fn pods_bridge(inv: &Inventory, bridge: &str, wanted: Option<IpNet>) -> bool {
    cni::holds(bridge, Holds::Gateway)
        || wanted.is_some_and(|w| {
            inv.node_facts
                .iter()
                .any(|n| n.pod_cidrs.iter().any(|c| c.contains(&w.addr())))
        })
}

/// An address of `bridge` in the kernel other than the gateway `wanted` (of
/// its family, not link-local), with the prefix of its connected route: the
/// bridge plugin compares the whole CIDR, so the gateway with another prefix
/// (`10.244.0.1/16` where `/24` is wanted) is refused too.
fn other_address(inv: &Inventory, bridge: &str, wanted: Option<IpNet>) -> Option<IpNet> {
    let with_prefix = |ip: IpAddr| {
        let prefix = inv
            .host
            .routes
            .iter()
            .filter(|r| r.table == TABLE_MAIN && r.gateway.is_none() && r.dst.contains(&ip))
            .find(|r| r.oif.and_then(|i| inv.host.link_name(i)) == Some(bridge))
            .map_or_else(
                || wanted.map_or(if ip.is_ipv4() { 32 } else { 128 }, |w| w.prefix_len()),
                |r| r.dst.prefix_len(),
            );
        IpNet::new(ip, prefix).ok()
    };
    inv.host
        .addresses
        .iter()
        .filter(|a| a.device == bridge && !link_local(a.ip))
        .filter_map(|a| with_prefix(a.ip))
        .find(|held| match wanted {
            Some(w) => w.addr().is_ipv4() == held.addr().is_ipv4() && *held != w,
            None => true,
        })
}
