//! A node's own address held by other nodes: kube-proxy in IPVS mode binds
//! every Service's cluster, external and load-balancer IPs on `kube-ipvs0` of
//! every node, each a `local` route, so a Service whose external IP is a
//! node's InternalIP makes every other node deliver that node's traffic to
//! itself (kubernetes#127410, #104679, #93175, #75290); kube-vip has put
//! other nodes' IPs on the uplink as /32s (kube-vip#1288).
//!
//! Two views, one finding kind: a node's kernel holding another Node's
//! `status.addresses` entry (`check`, or any inventory that has every Node),
//! and, from the API alone, a Service claiming a Node's address (`audit`). The
//! agent reads only its own Node, so it has no other node's address to compare
//! and adds no watch for one.

use std::net::IpAddr;

use super::{
    Cause, Finding, FindingKind, NodeProblem, Owner, PodSite, Remedy, Role, Scope, Trust,
    kind::{Alert, Count, Spec},
    status_ips,
};
use crate::{
    cni::{self, Holds},
    inventory::{
        Inventory, IpSource, NodeFacts, Pod, ServiceAddress, ServiceAddresses, ServiceField, Source,
    },
};

/// Another node's InternalIP/ExternalIP held here or claimed by a Service.
pub(super) const NODE_ADDRESS: Spec = Spec {
    rank: |f| if held_by_a_kernel(f) { 0 } else { 4 },
    ..Spec::node(
        "NodeAddressShadowed",
        "another node's InternalIP or ExternalIP held on this node or claimed by a Service: the \
         other nodes cannot reach that node",
        Count::InfoOnly,
        Alert::None(
            "found by audit, and by check given every Node: the agent reads only its own Node, \
             so it never reports it",
        ),
    )
};

/// Whether a claimed node address was seen held on a node (`check`), not only
/// claimed by a Service (`audit`): only kube-proxy in IPVS mode and kube-router
/// bind a Service's whole address; in iptables or nftables mode (the default)
/// a node's address as a Service's externalIP is a documented pattern. Such a
/// claim alone ranks as latent.
fn held_by_a_kernel(f: &Finding) -> bool {
    match &f.cause {
        Cause::Node(NodeProblem::NodeAddressClaimed(c)) => c.held.is_some(),
        _ => true,
    }
}

/// Another node's address, claimed or held where it must not be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddressClaim {
    /// The address.
    pub ip: IpAddr,
    /// The node whose address it is: the one other nodes cannot reach.
    pub node: String,
    /// Its `status.addresses` type (`InternalIP`, `ExternalIP`).
    pub address_type: &'static str,
    /// The Services claiming it, as far as they were read.
    pub services: Vec<ServiceAddress>,
    /// The node and device the kernel shows holding it; `None` from the API alone.
    pub held: Option<(String, String)>,
}

impl NodeAddressClaim {
    /// Whether it sits on a device that holds Services' addresses only.
    #[must_use]
    pub fn on_vip_device(&self) -> bool {
        self.held
            .as_ref()
            .is_some_and(|(_, d)| cni::holds(d, Holds::ServiceAddresses))
    }
}

/// The addresses of `inv`'s kernel that are another Node's own.
pub(super) fn held_node_addresses(inv: &Inventory) -> Vec<Finding> {
    let own: Vec<IpAddr> = inv
        .node_facts
        .iter()
        .flat_map(|n| n.addresses.iter().map(|a| a.ip))
        .collect();
    let mut out = Vec::new();
    for a in inv.host.addresses.iter().filter(|a| !own.contains(&a.ip)) {
        let Some((node, kind)) = owner_of(&inv.cluster.nodes, &inv.node, a.ip) else {
            continue;
        };
        let services = inv.cluster.services.holders(a.ip).unwrap_or_default();
        let claim = NodeAddressClaim {
            ip: a.ip,
            node: node.to_owned(),
            address_type: kind,
            services: services.to_vec(),
            held: Some((inv.node.clone(), a.device.clone())),
        };
        let trust = if claim.services.is_empty() && !claim.on_vip_device() {
            Trust::Kernel
        } else {
            Trust::TenantAddress
        };
        let owner = Owner::new(
            inv.node.clone(),
            Role::Node,
            Some(a.device.clone()),
            Source::Kernel,
        );
        out.push(finding(claim, owner, trust));
    }
    out
}

/// Every Node address a Service claims, from the API alone (`audit`): each
/// under the node made unreachable. Not a load balancer's published ingress
/// alone: k3s' ServiceLB publishes the nodes' own addresses there by design,
/// harmless unless kube-proxy binds them (IPVS mode), which only the node's
/// kernel shows (`check`).
#[must_use]
pub fn claimed_node_addresses(nodes: &[NodeFacts], services: &ServiceAddresses) -> Vec<Finding> {
    let mut out = Vec::new();
    for n in nodes {
        for a in &n.addresses {
            let claims: Vec<ServiceAddress> = services
                .holders(a.ip)
                .unwrap_or_default()
                .iter()
                .filter(|c| c.field != ServiceField::LoadBalancerIngress)
                .cloned()
                .collect();
            if claims.is_empty() {
                continue;
            }
            let claim = NodeAddressClaim {
                ip: a.ip,
                node: n.name.clone(),
                address_type: a.kind,
                services: claims,
                held: None,
            };
            let owner = Owner::new(n.name.clone(), Role::Node, None, Source::Services);
            out.push(finding(claim, owner, Trust::TenantAddress));
        }
    }
    out
}

/// Every live pod whose status IP a Service claims, from the API alone
/// (`audit`): kube-proxy binds the address on every node (in IPVS mode on
/// `kube-ipvs0`, a local route; in iptables mode the Service's ports are
/// DNATed), the pod's own node's too. The fix is the Service's, never the pod's.
#[must_use]
pub fn pods_on_service_addresses(pods: &[Pod], services: &ServiceAddresses) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in pods.iter().filter(|p| p.reportable()) {
        let Some(node) = p.node.as_deref() else {
            continue;
        };
        for ip in status_ips(p) {
            let Some(a) = services.holders(ip).and_then(<[ServiceAddress]>::first) else {
                continue;
            };
            let owner = Owner::new(node.to_owned(), Role::Local, None, Source::Services);
            let site = PodSite::new(p, node, IpSource::Status);
            let remedy = Remedy::RemoveServiceAddress {
                ip,
                service: Some(a.clone()),
                device: None,
            };
            let mut f = Finding::collision(Scope::SameNode, ip, owner, site, (None, None), remedy);
            if let Cause::Collision { service, .. } = &mut f.cause {
                *service = Some(a.clone());
            }
            out.push(f);
        }
    }
    out
}

/// The node other than `me` whose `status.addresses` holds `ip`, and the type.
fn owner_of<'a>(nodes: &'a [NodeFacts], me: &str, ip: IpAddr) -> Option<(&'a str, &'static str)> {
    nodes.iter().filter(|n| n.name != me).find_map(|n| {
        let a = n.addresses.iter().find(|a| a.ip == ip)?;
        Some((n.name.as_str(), a.kind))
    })
}

fn finding(claim: NodeAddressClaim, owner: Owner, trust: Trust) -> Finding {
    let claim = Box::new(claim);
    Finding {
        kind: FindingKind::NodeAddressShadowed,
        scope: Scope::CrossNode,
        ip: Some(claim.ip),
        owner,
        cause: Cause::Node(NodeProblem::NodeAddressClaimed(claim.clone())),
        remedy: Remedy::FreeNodeAddress(claim),
        trust,
    }
}
