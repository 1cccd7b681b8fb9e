//! The text of a node's address held by other nodes (its finding kind: [`crate::detect::vip`]):
//! what holds it, which node is cut off, and the fix in Kubernetes' terms.

use super::Reader;
use crate::{
    detect::vip::NodeAddressClaim,
    inventory::{ServiceAddress, ServiceField},
};

/// Who claims or holds the address, for the first sentence.
fn holder(c: &NodeAddressClaim, reader: Reader<'_>) -> String {
    let claimed = c
        .services
        .first()
        .map(|s| format!("{} sets it in {}", reader.service(&s.service), s.field));
    match (&c.held, claimed) {
        (Some((node, device)), Some(claimed)) => {
            format!("node {node} holds it on {device} ({claimed})")
        }
        (Some((node, device)), None) => format!("node {node} holds it on {device}"),
        (None, Some(claimed)) => format!(
            "{claimed}; where kube-proxy runs in IPVS mode (kube-ipvs0) or kube-router proxies \
             Services (kube-dummy-if), every node holds the whole address locally (in iptables or \
             nftables mode only the Service's ports are redirected, and this is harmless)"
        ),
        (None, None) => "another node holds it".to_owned(),
    }
}

/// The long message, without the fix.
pub(super) fn message(c: &NodeAddressClaim, reader: Reader<'_>) -> String {
    let (ip, node, kind) = (c.ip, &c.node, c.address_type);
    let from = c.held.as_ref().map_or_else(
        || "every such node".to_owned(),
        |(n, _)| format!("node {n}"),
    );
    format!(
        "{ip} is node {node}'s {kind}, but {}. That is a local route there, so {from} delivers \
         every packet for {node} to itself: {node} is unreachable from it (kubelet, the API \
         server and pods' traffic to it go nowhere; with a control-plane node's address, its \
         peers turn NotReady, kubernetes#127410, #104679).",
        holder(c, reader)
    )
}

/// The Event note, without the fix: two sentences.
pub(super) fn note(c: &NodeAddressClaim) -> String {
    let by = c.held.as_ref().map_or_else(
        || "a Service's address (IPVS-mode proxies hold it on every node)".to_owned(),
        |(n, d)| format!("{n} on {d}"),
    );
    let host = if c.held.is_some() {
        "That host"
    } else {
        "Each such node"
    };
    format!(
        "{} ({}'s {}) is held by {by}. {host} keeps traffic for {} to itself: {} is \
         unreachable from it.",
        c.ip, c.node, c.address_type, c.node, c.node
    )
}

/// The fix, from the Service when one claims the address, else the device.
pub(super) fn fix(c: &NodeAddressClaim, reader: Reader<'_>, short: bool) -> String {
    if let Some(s) = c.services.first() {
        return service_fix(c, s, reader, short);
    }
    match &c.held {
        Some((_, device)) if c.on_vip_device() => format!(
            "Fix: remove {} from the Service that sets it (kubectl get svc -A -o wide | grep -w \
             {}); kube-proxy then takes it off {device} on every node.",
            c.ip, c.ip
        ),
        Some((node, device)) => format!(
            "Fix: on {node}, delete the address (`ip addr del {}/32 dev {device}`) and stop what \
             added it (a VIP manager such as kube-vip, kube-vip#1288).",
            c.ip
        ),
        None => format!("Fix: remove {} from the Services that set it.", c.ip),
    }
}

fn service_fix(
    c: &NodeAddressClaim,
    s: &ServiceAddress,
    reader: Reader<'_>,
    short: bool,
) -> String {
    let what = format!(
        "Fix: remove {} from {} of {}",
        c.ip,
        s.field,
        reader.service(&s.service)
    );
    if short {
        return format!("{what}.");
    }
    let why = match s.field {
        ServiceField::ExternalIps => {
            "; a node's own address is never a Service's external IP — restrict who may set \
             them (the DenyServiceExternalIPs admission plugin, or a policy)"
        }
        ServiceField::LoadBalancerIp | ServiceField::LoadBalancerIngress => {
            "; take the nodes' addresses out of the load balancer's pool"
        }
        ServiceField::ClusterIps => "; give Services a range apart from the nodes' network",
    };
    let more = match c.services.len() {
        0 | 1 => String::new(),
        n => format!(
            " {} more Service(s) claim it too: remove it there as well.",
            n - 1
        ),
    };
    format!("{what}{why}.{more}")
}
