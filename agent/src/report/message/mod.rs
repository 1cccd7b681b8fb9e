//! The human text of a finding: what collides, what breaks, and how to fix it.
//! Operators read these in `kubectl describe pod` and in `check`'s output.
//! Rendered from the typed finding; nothing ever parses it back.

mod calico;
mod collision;
mod fix;
mod ipam;
mod kernel;
mod leftover;
mod note;
mod plan;
mod pool;
mod vip;

pub use fix::{fix, remedy_for};
pub use note::{FIX_MAX, IMPACT_MAX, PROSE_MAX, note, traffic};

use std::fmt::Write as _;

use ipnet::IpNet;

use crate::{
    detect::{
        Cause, Finding, InfraAddress, PodRef,
        impact::{Impact, Severity},
    },
    inventory::{Caller, DeadEnd, IpSource, ServiceRef},
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

/// The message of `f` by its cause: what, why it hurts, and the fix.
fn render_cause(f: &Finding, reader: Reader<'_>) -> String {
    match &f.cause {
        Cause::Collision { .. } => collision::collision(f, reader),
        Cause::Refused {
            kubelet, holder, ..
        } => ipam::refused(f, kubelet, holder.as_ref(), reader, false),
        Cause::Leftover { .. } => leftover::render(f, reader),
        Cause::Duplicate {
            holder, network, ..
        } => ipam::duplicate(f, holder, network.as_deref(), reader),
        Cause::Node(problem) => ipam::node(f, problem, reader),
        Cause::Blackhole {
            dead_end, route, ..
        } => blackhole(f, *dead_end, route.as_deref(), reader),
        Cause::Kernel(k) => kernel::render(f, k, reader),
        Cause::Plan(o) => plan::render(o),
        Cause::Overlap {
            subnet,
            block,
            cilium_range,
            held,
            addresses,
        } => {
            let source = cilium_range.map_or_else(String::new, |(r, field)| {
                format!(" Cilium takes its addresses from {r} ({field}).")
            });
            let block = block.map_or_else(String::new, |b| b.to_string());
            format!(
                "{} inside kube-ovn Subnet {subnet} ({block}) and not in its excludeIps, \
                 so kube-ovn can hand {} to a pod at any time — a pod that then sits in \
                 ContainerCreating (Ingress IP) or is unreachable from its node (router, health \
                 IP).{source} {}",
                overlapping(f, *held, *cilium_range, addresses),
                if addresses.len() > 1 {
                    "any of them"
                } else {
                    "it"
                },
                remedy_for(&f.remedy, reader),
            )
        }
    }
}

/// A pod whose own node routes its IP into `dead_end`.
fn blackhole(f: &Finding, dead_end: DeadEnd, route: Option<&str>, reader: Reader<'_>) -> String {
    let node = &f.owner.node;
    let route = route.map(|r| format!(" (route {r})")).unwrap_or_default();
    format!(
        "{} has IP {}, but node {node}'s own route lookup for it ends in {dead_end}{route}: \
         kubelet probes and webhooks from {node}'s host never reach the pod. {}",
        pod_name(f),
        f.ip_text(),
        remedy_for(&f.remedy, reader),
    )
}

/// What of Cilium's lies in a kube-ovn Subnet: the addresses it holds, or
/// the range it allocates from.
fn overlapping(
    f: &Finding,
    held: bool,
    cilium_range: Option<(IpNet, &str)>,
    addresses: &[InfraAddress],
) -> String {
    let (ip, node) = (f.ip_text(), &f.owner.node);
    match (held, cilium_range) {
        (true, _) if addresses.len() > 1 => format!(
            "Cilium's {} of node {node} lie",
            self::addresses(addresses, ADDRESSES_NAMED)
        ),
        (true, _) => format!(
            "Cilium's {} IP {ip} of node {node} (as {} says) lies",
            f.owner.role, f.owner.source
        ),
        (false, Some((r, _))) => {
            format!("Cilium's allocation range {r} of node {node} (e.g. {ip}) lies")
        }
        (false, None) => format!("Cilium's address {ip} of node {node} lies"),
    }
}

/// How many of an overlap's addresses the long message names.
const ADDRESSES_NAMED: usize = 8;

/// `addresses` as "3 addresses: 10.0.0.1 (router), …", naming at most `named`.
fn addresses(addresses: &[InfraAddress], named: usize) -> String {
    let list = and_more(
        addresses
            .iter()
            .take(named)
            .map(|a| format!("{} ({})", a.ip, a.role)),
        addresses.len(),
    );
    format!("{} addresses: {list}", addresses.len())
}

/// `names` as "a, b and 3 more", of `total` in all.
fn and_more(names: impl Iterator<Item = String>, total: usize) -> String {
    let names: Vec<String> = names.collect();
    let mut list = names.join(", ");
    if total > names.len() {
        let _ = write!(list, " and {} more", total - names.len());
    }
    list
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
    impact(i, false)
}

/// What breaks behind a pod, in one sentence; `short`: the Event note's,
/// naming the first Service or caller and counting the rest.
fn impact(i: &Impact, short: bool) -> Option<String> {
    let names = |names: Vec<String>| match names.as_slice() {
        [first, rest @ ..] if short && !rest.is_empty() => {
            format!("{first} and {} more", rest.len())
        }
        _ => names.join(", "),
    };
    let services = names(
        i.services
            .iter()
            .map(|s| format!("Service {}/{}", s.namespace, s.name))
            .collect(),
    );
    match i.severity() {
        Severity::Critical => {
            let callers = names(
                i.callers
                    .iter()
                    .map(|c| match caller(c) {
                        (kind, name, Some(hook)) if !short => {
                            format!("{kind} {name} (webhook {hook})")
                        }
                        (kind, name, _) => format!("{kind} {name}"),
                    })
                    .collect(),
            );
            Some(if short {
                format!("Critical: the kube-apiserver calls through this pod ({callers}).")
            } else {
                format!(
                    "Critical: the kube-apiserver calls through this pod — {callers}, via \
                     {services}: API requests that need it fail or time out wherever the address \
                     is shadowed."
                )
            })
        }
        Severity::High if short => Some(format!(
            "High: it backs {services}; its clients fail where this IP is shadowed."
        )),
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

/// `text` cut to at most `max` bytes at a word boundary, with `…` where cut.
pub fn words(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let cut = &text[..text.floor_char_boundary(max.saturating_sub('…'.len_utf8()))];
    let cut = cut
        .rfind(char::is_whitespace)
        .map_or(cut, |space| &cut[..space]);
    format!("{}…", cut.trim_end_matches([',', ';', ':', ' ']))
}

/// `items` as "10.0.0.0/24, 10.0.1.0/24".
pub(super) fn list(items: impl IntoIterator<Item = impl ToString>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn pod_name(f: &Finding) -> String {
    f.pod()
        .map_or_else(|| "the pod".to_owned(), |p| format!("Pod {p}"))
}

#[cfg(test)]
mod catalog_tests;
#[cfg(test)]
mod tests;
