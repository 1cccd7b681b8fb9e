//! The text of an address plan overlap ([`crate::detect::plan`]): which two
//! objects share which addresses, what will break, and which object to change.

use crate::{
    cni::{antrea, ovn_kubernetes, plan::Records},
    detect::plan::{Move, PlanOverlap},
    inventory::{PlanOwner, Planned, Purpose},
};

/// `MetalLB's IPAddressPool metallb-system/first (load-balancer IPs,
/// spec.addresses 192.168.10.0/24)`; Kubernetes' own objects (Nodes,
/// ServiceCIDRs) go by their kind alone.
fn named(p: &Planned) -> String {
    let o = &p.owner;
    let whose = if o.allocator == "Kubernetes" {
        String::new()
    } else if o.allocator.ends_with('s') {
        format!("{}' ", o.allocator)
    } else {
        format!("{}'s ", o.allocator)
    };
    format!(
        "{whose}{} {} ({}, {} {})",
        o.kind,
        o.object,
        p.purpose.words(),
        o.field,
        p.text
    )
}

/// What will break when both give one address.
fn breaks(o: &PlanOverlap) -> String {
    use Purpose::{Internal, LoadBalancer, NodeAddress, NodePods, Pods, Secondary, Services};
    let (a, b) = (&o.change, &o.other);
    let node = b.node.as_deref().or(a.node.as_deref()).unwrap_or("a node");
    match (a.purpose, b.purpose) {
        (LoadBalancer, Pods | NodePods) => format!(
            "{} and a pod will be given one address: traffic to it reaches one of them",
            taker(a)
        ),
        (LoadBalancer, NodeAddress) => format!(
            "{} will be given node {node}'s own address: announcing it takes {node}'s \
             traffic{}",
            taker(a),
            if a.owner.allocator == "MetalLB" {
                " (in metallb#1397, ssh to the worker broke)"
            } else {
                ""
            }
        ),
        (LoadBalancer, LoadBalancer) => "two controllers will hand one address to two \
             Services; each checks only its own pools"
            .to_owned(),
        (LoadBalancer, Services) | (Services, LoadBalancer) => "the API server may give a \
             load-balancer IP to a Service as its ClusterIP too"
            .to_owned(),
        (Services, Pods | NodePods) => "a ClusterIP and a pod will share an address: every \
             node's proxy takes traffic for the pod to the Service"
            .to_owned(),
        (Services | Pods | NodePods, NodeAddress) => format!(
            "node {node}'s own address may be handed out: its traffic goes to a pod or a Service \
             instead"
        ),
        (NodePods, NodePods) => "two nodes route one pod range: their pods get the same \
             addresses (antrea#7893)"
            .to_owned(),
        (Secondary, NodeAddress) => format!(
            "a pod on it may be given node {node}'s own address: where {} carries the nodes' \
             network, the pod and the node answer for one address",
            a.domain.as_deref().unwrap_or("its interface")
        ),
        (Internal, Internal) => format!(
            "{} routes both subnets inside its own network: its routers' ports will be given one \
             address twice and traffic through them breaks (ovn-kubernetes#4502)",
            a.owner.allocator
        ),
        (_, Internal) | (Internal, _) => {
            let internal = if b.purpose == Internal { b } else { a };
            format!(
                "{} routes its {} inside its own network: what is given an address there (a pod, \
                 a Service, a node) is unreachable, or takes its routers' traffic",
                internal.owner.allocator,
                internal_name(internal)
            )
        }
        (Secondary, Secondary) => two_secondary(a, b),
        _ => "two allocators will give one address to two pods".to_owned(),
    }
}

/// Two secondary networks' ranges on one network: two attachments, or two
/// pools of one kind (Antrea's, whose webhook never checks one against
/// another: antrea#7306).
fn two_secondary(a: &Planned, b: &Planned) -> String {
    let two = if a.owner.kind == b.owner.kind {
        format!("{}s", a.owner.kind)
    } else {
        "attachments".to_owned()
    };
    let cite = if of(a, &antrea::IP_POOLS) && of(b, &antrea::IP_POOLS) {
        " (antrea#7306)"
    } else {
        ""
    };
    format!(
        "two {two} on {} will give one address to two pods{cite}",
        a.domain.as_deref().unwrap_or("one network")
    )
}

/// Whether `p` is one of `records`' ranges.
fn of(p: &Planned, records: &Records) -> bool {
    p.owner.allocator == records.allocator && p.owner.kind == records.kind
}

/// Who is given an address of a load-balancer range: a Service, or an Egress
/// too where the pool also serves Antrea's Egress IPs.
fn taker(p: &Planned) -> &'static str {
    if of(p, &antrea::EXTERNAL_IP_POOLS) {
        "an Egress or a Service"
    } else {
        "a Service"
    }
}

/// `join subnet`, as the annotation it was read from names it.
fn internal_name(p: &Planned) -> &'static str {
    ovn_kubernetes::internal_of(p.owner.field).map_or("internal subnet", |i| i.name)
}

fn more(o: &PlanOverlap) -> String {
    let (names, count) = &o.more;
    if *count == 0 {
        return String::new();
    }
    format!(
        " It overlaps {count} more {} too ({}).",
        o.other.owner.kind,
        super::and_more(names.iter().cloned(), *count)
    )
}

/// The long message, with the fix.
pub(super) fn render(o: &PlanOverlap) -> String {
    format!(
        "{} and {} both hold {}: {}; nothing checks one against the other.{} {}",
        named(&o.change),
        named(&o.other),
        o.shared,
        breaks(o),
        more(o),
        fix(&o.moving())
    )
}

/// The Event note's prose, without the fix.
pub(super) fn what(o: &PlanOverlap) -> String {
    format!(
        "{} {} and {} {} both hold {}: {}.",
        o.change.owner.kind,
        o.change.owner.object,
        o.other.owner.kind,
        o.other.owner.object,
        o.shared,
        breaks(o)
    )
}

fn object(o: &PlanOwner) -> String {
    format!("{} {}", o.kind, o.object)
}

/// A node's pod range given twice, or over a node's address or an internal
/// subnet: in the terms of the allocator that gave it.
fn node_pods_fix(m: &Move) -> String {
    let (allocator, cluster_range) = match m.owner.allocator {
        "Kubernetes" => ("the node IPAM", "kube-controller-manager's --cluster-cidr"),
        "Cilium" => ("cilium-operator", "cilium-config's cluster pool"),
        "ovn-kubernetes" => (
            "ovn-kubernetes' cluster manager",
            "ovnkube's --cluster-subnets",
        ),
        other => (other, "the cluster's pod network"),
    };
    if m.or.is_some() {
        return format!(
            "Fix: one pod range is given to two nodes, and a node keeps the range it was given: \
             drain, delete and re-register the newer of {} and its peer so that {allocator} gives \
             it a free range.",
            object(&m.owner)
        );
    }
    let what = match m.against {
        Purpose::NodeAddress => format!("the node's address {}", m.shared),
        Purpose::Internal => format!("{} of an internal subnet", m.shared),
        _ => m.shared.to_string(),
    };
    format!(
        "Fix: {what} lies in {}'s pod range {}: give the pod ranges ({cluster_range}) room \
         outside it, or move what holds it.",
        object(&m.owner),
        m.text
    )
}

fn antreas(m: &Move) -> bool {
    m.owner.allocator.starts_with("Antrea")
}

/// Antrea's pools keep their ranges: a new pool, and what uses the old moved.
fn antrea_fix(m: &Move, or: &str) -> String {
    if m.owner.kind == "ExternalIPPool" {
        return format!(
            "Fix: an ExternalIPPool's ipRanges cannot be removed: create a pool without {}, point \
             the Egresses (spec.externalIPPool) and Services (service.antrea.io/external-ip-pool) \
             that use {} at it, then delete it{or}.",
            m.shared,
            object(&m.owner)
        );
    }
    format!(
        "Fix: an Antrea IPPool's existing ipRanges cannot be changed or deleted, nor the pool \
         while it gives addresses: create a pool without {}, point the Namespaces \
         (ipam.antrea.io/ippools) and attachments that name {} at it, and delete {} once its \
         pods are gone{or}.",
        m.shared,
        object(&m.owner),
        m.owner.object
    )
}

/// The fix: which object to change, and how.
pub(super) fn fix(m: &Move) -> String {
    let or =
        m.or.as_ref()
            .map_or_else(String::new, |o| format!(" (or {}'s)", object(o)));
    match (m.purpose, m.owner.kind) {
        (Purpose::NodePods, _) => node_pods_fix(m),
        (Purpose::Internal, _) => {
            let (name, knob) = ovn_kubernetes::internal_of(m.owner.field)
                .map_or(("internal subnet", "its configuration"), |i| {
                    (i.name, i.knob)
                });
            format!(
                "Fix: move ovn-kubernetes' {name} {} ({}) off {}{or}: {knob}.",
                m.text,
                object(&m.owner),
                m.shared
            )
        }
        (Purpose::NodeAddress, _) => format!(
            "Fix: move the other range off {}'s address {}{or}.",
            object(&m.owner),
            m.shared
        ),
        (_, "ServiceCIDR") => format!(
            "Fix: a ServiceCIDR's spec.cidrs cannot change: create one without {} and delete \
             {} (the default one, `kubernetes`, follows kube-apiserver's \
             --service-cluster-ip-range){or}.",
            m.shared,
            object(&m.owner)
        ),
        (_, "IPPool" | "ExternalIPPool") if antreas(m) => antrea_fix(m, &or),
        (_, "IPPool") => format!(
            "Fix: a Calico IPPool's spec.cidr cannot be narrowed in place: reserve {} with an \
             IPReservation, or create a pool without it and disable {} (spec.disabled){or}.",
            m.shared,
            object(&m.owner)
        ),
        (_, "ConfigMap") if m.owner.allocator == "Cilium" => format!(
            "Fix: Cilium's cluster pool cannot shrink under nodes that hold ranges of it \
             (cilium-config's {} only grows: add a CIDR, never remove one): move the other \
             range off {}{or}.",
            m.owner.field.trim_start_matches("data."),
            m.shared
        ),
        (_, "Subnet") => format!(
            "Fix: add \"{}\" to spec.excludeIps of {}{or}.",
            m.shared,
            object(&m.owner)
        ),
        _ => format!(
            "Fix: change {}'s {} ({}) to leave out {}{or}, before anything is handed an address \
             from it.",
            object(&m.owner),
            m.owner.field,
            m.text,
            m.shared
        ),
    }
}
