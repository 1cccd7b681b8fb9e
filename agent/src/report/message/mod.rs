//! The human text of a finding: what collides, what breaks, and how to fix it.
//! Operators read these in `kubectl describe pod` and in `check`'s output.
//! Rendered from the typed finding; nothing ever parses it back.

mod collision;
mod ipam;

use std::fmt::Write as _;

use crate::{
    detect::{
        Cause, Finding, PodRef, Remedy,
        impact::{Impact, Severity},
    },
    inventory::{Caller, IpSource, ServiceRef},
};

/// Who reads a message, and so what it may say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader<'a> {
    /// The cluster's operators at `check`, `audit` or a log: everything.
    Operator,
    /// The Node's Events: every name, but no text a tenant wrote (kubelet's
    /// messages come from Events, which a tenant can forge).
    Node,
    /// The Events of a pod in this namespace: nothing another namespace holds.
    Namespace(&'a str),
}

impl Reader<'_> {
    /// A pod as this reader may see it.
    fn pod(self, p: &PodRef) -> String {
        match self {
            Self::Namespace(ns) if ns != p.namespace => "a pod in another namespace".to_owned(),
            _ => format!("pod {p}"),
        }
    }

    /// A Service as this reader may see it.
    fn service(self, s: &ServiceRef) -> String {
        match self {
            Self::Namespace(ns) if ns != s.namespace => "a Service in another namespace".to_owned(),
            _ => format!("Service {}/{}", s.namespace, s.name),
        }
    }

    /// Whether this reader may see `s`'s name.
    fn sees(self, s: &ServiceRef) -> bool {
        !matches!(self, Self::Namespace(ns) if ns != s.namespace)
    }

    /// Whether text a tenant wrote may be quoted to this reader.
    fn quotes_tenants(self) -> bool {
        self != Self::Node
    }
}

/// The full message of a finding for the cluster's operators.
pub fn render(f: &Finding) -> String {
    render_for(f, Reader::Operator)
}

/// The full message of a finding for `reader`: what, why it hurts, and the
/// fix; for a pod address read from an annotation, what it rests on.
pub fn render_for(f: &Finding, reader: Reader<'_>) -> String {
    let mut m = render_cause(f, reader);
    match f.site().map(|s| (&s.ip_source, &s.pod)) {
        Some((IpSource::Annotation, _)) => m.push_str(
            " This rests on the pod's IP annotation alone (kube-ovn's ovn.kubernetes.io/ip_address), \
             which anyone who may edit the pod can write; kube-ovn's own record of the allocation \
             does not confirm it: unconfirmed.",
        ),
        Some((IpSource::KubeOvnIp, pod)) => {
            let _ = write!(
                m,
                " This rests on kube-ovn's allocation: its record ips.kubeovn.io {}.{} holds the address.",
                pod.name, pod.namespace
            );
        }
        _ => {}
    }
    m
}

fn render_cause(f: &Finding, reader: Reader<'_>) -> String {
    match &f.cause {
        Cause::Collision {
            fib,
            shadowed_route,
            kubelet,
            service,
            ..
        } => {
            let mut m = collision::collision(
                f,
                (fib.as_deref(), shadowed_route.as_deref()),
                service.as_ref(),
                reader,
            );
            if let Some(k) = kubelet {
                m.push(' ');
                m.push_str(&ipam::kubelet_says(k, reader));
            }
            m
        }
        Cause::Refused {
            kubelet, holder, ..
        } => ipam::refused(f, kubelet, holder.as_ref(), reader),
        Cause::Duplicate { holder, .. } => ipam::duplicate(f, holder, reader),
        Cause::Node(problem) => ipam::node(f, problem, reader),
        Cause::Blackhole {
            dead_end, route, ..
        } => {
            let node = &f.owner.node;
            let route = route
                .as_ref()
                .map(|r| format!(" (route {r})"))
                .unwrap_or_default();
            format!(
                "{} has IP {}, but node {node}'s own route lookup for it ends in {dead_end}{route}: \
                 kubelet probes and webhooks from {node}'s host never reach the pod. {}",
                pod_name(f),
                f.ip_text(),
                remedy_for(&f.remedy, reader),
            )
        }
        Cause::Overlap {
            subnet,
            block,
            cilium_range,
            held,
        } => {
            let (ip, node) = (f.ip_text(), &f.owner.node);
            let what = match (held, cilium_range) {
                (true, _) => format!(
                    "Cilium's {} IP {ip} of node {node} (as {} says)",
                    f.owner.role, f.owner.source
                ),
                (false, Some((r, _))) => {
                    format!("Cilium's allocation range {r} of node {node} (e.g. {ip})")
                }
                (false, None) => format!("Cilium's address {ip} of node {node}"),
            };
            let source = cilium_range.map_or_else(String::new, |(r, field)| {
                format!(" Cilium takes it from {r} ({field}).")
            });
            let block = block.map_or_else(String::new, |b| b.to_string());
            format!(
                "{what} lies inside kube-ovn Subnet {subnet} ({block}) and is not in its excludeIps, \
                 so kube-ovn can hand it to a pod at any time — a pod that then sits in \
                 ContainerCreating (Ingress IP) or is unreachable from its node (router, health \
                 IP).{source} {}",
                remedy_for(&f.remedy, reader),
            )
        }
    }
}

/// A caller as (kind, name, webhook).
#[must_use]
pub fn caller(c: &Caller) -> (&'static str, &str, Option<&str>) {
    match c {
        Caller::ValidatingWebhook(config, hook) => {
            ("ValidatingWebhookConfiguration", config, Some(hook))
        }
        Caller::MutatingWebhook(config, hook) => {
            ("MutatingWebhookConfiguration", config, Some(hook))
        }
        Caller::ApiService(name) => ("APIService", name, None),
    }
}

/// What breaks behind a pod, as the sentence that leads its message; `None`
/// when nothing known routes to it.
#[must_use]
pub fn impact_sentence(i: &Impact) -> Option<String> {
    let services = i
        .services
        .iter()
        .map(|s| format!("Service {}/{}", s.namespace, s.name))
        .collect::<Vec<_>>()
        .join(", ");
    match i.severity() {
        Severity::Critical => {
            let callers = i
                .callers
                .iter()
                .map(|c| match caller(c) {
                    (kind, name, Some(hook)) => format!("{kind} {name} (webhook {hook})"),
                    (kind, name, None) => format!("{kind} {name}"),
                })
                .collect::<Vec<_>>()
                .join(", ");
            Some(format!(
                "Critical: the kube-apiserver calls through this pod — {callers}, via {services}: \
                 API requests that need it fail or time out wherever the address is shadowed."
            ))
        }
        Severity::High => Some(format!(
            "High: it backs {services}; clients of that Service fail where the address is shadowed."
        )),
        Severity::Warning => None,
    }
}

/// Why a Cilium pool outside every kube-ovn Subnet is no fix (seeds/001).
pub(super) const NOT_DISJOINT: &str = "Not a prefix outside every kube-ovn Subnet: kube-ovn masquerades \
    host-originated traffic only from its overlay subnets, so Gateway API (Envoy connects from \
    the node's Ingress IP) breaks across nodes.";

/// The fix, as one or more sentences starting with "Fix:", for the operators.
pub fn remedy(r: &Remedy) -> String {
    remedy_for(r, Reader::Operator)
}

/// The fix for `reader`.
pub fn remedy_for(r: &Remedy, reader: Reader<'_>) -> String {
    match r {
        Remedy::CarveCiliumPool {
            subnet,
            block,
            pool,
        } => format!(
            "Fix: give Cilium's IPAM a pool cut from the end of kube-ovn Subnet {subnet}'s block \
             {block}, e.g. {pool} (ipam.mode=cluster-pool, a small block per node), and add \
             \"{}\" to spec.excludeIps of Subnet {subnet}; then delete the pod so it is given \
             another IP. {NOT_DISJOINT}",
            crate::inventory::IpRange::of(pool)
        ),
        Remedy::ExcludeInPodAllocator => format!(
            "Fix: exclude Cilium's addresses in the kube-ovn Subnet that handed this one out \
             (spec.excludeIps), best by giving Cilium a pool cut from the end of that Subnet's \
             block and excluding the whole pool; then delete the pod so it is given another IP. \
             {NOT_DISJOINT}"
        ),
        Remedy::ReallocatePod { node } => format!(
            "Fix: delete the pod so it is given another address. Cilium's own allocator handed \
             out an address Cilium holds itself (its host-scope allocator starts empty after an \
             agent restart, cilium#46799). If it happens again on {node}: the node's pod CIDR \
             leaves too few addresses once Cilium's router, health and Ingress IPs are taken — \
             lower kubelet's --max-pods or give nodes larger pod CIDRs, and upgrade Cilium \
             (cilium#47360 restores the Ingress IP more robustly)."
        ),
        Remedy::RemoveLocalAddress { device, subnet } => {
            let what = device.as_deref().map_or_else(
                || "the address".to_owned(),
                |d| format!("the address from {d}{}", collision::device_hint(d)),
            );
            match subnet {
                Some(subnet) => format!(
                    "Fix: remove {what}, or exclude it from kube-ovn Subnet {subnet} \
                     (spec.excludeIps); then delete the pod so it is given another IP."
                ),
                None => format!(
                    "Fix: remove {what}, or keep the pod allocator from handing it out; then \
                     delete the pod so it is given another IP."
                ),
            }
        }
        Remedy::RemoveServiceAddress {
            ip,
            service,
            device,
        } => collision::remove_service_address(*ip, service.as_ref(), device.as_deref(), reader),
        Remedy::RestoreRoute { node, kube_ovn } => {
            let layout = if *kube_ovn {
                "kube-ovn lays one route for the subnet via ovn0; Cilium and Calico one per pod"
            } else {
                "the CNI lays it: Cilium and Calico one route per pod"
            };
            format!("Fix: restore the pod network's route on {node} ({layout}).")
        }
        Remedy::DisconnectEndpoint { .. }
        | Remedy::ReallocateDuplicate { .. }
        | Remedy::RecreateNewer { .. }
        | Remedy::AddCapacity { .. }
        | Remedy::FixOperatorAllocation { .. }
        | Remedy::ClearPodCidrsAfterRollout { .. }
        | Remedy::PoolInMasqueradedSubnet { .. } => ipam::remedy(r, reader),
        Remedy::DeleteStaleRoute { node, dead_end } => format!(
            "Fix: delete the stale {dead_end} route on {node}, or restore the pod network's route."
        ),
        Remedy::ExcludeFromSubnet {
            subnet,
            exclude,
            block,
        } => {
            let block = block.map_or_else(String::new, |b| b.to_string());
            format!(
                "Fix: add \"{exclude}\" to spec.excludeIps of Subnet {subnet}, or give Cilium an \
                 IPAM pool cut from the end of {block} and excluded there. {NOT_DISJOINT}"
            )
        }
    }
}

pub(super) fn pod_name(f: &Finding) -> String {
    f.pod()
        .map_or_else(|| "the pod".to_owned(), |p| format!("Pod {p}"))
}

#[cfg(test)]
mod tests;
