//! The text of a refusal over what the node kept from before: Calico's host
//! route through another interface (`PodRouteTaken`), the bridge's other
//! address (on the refused pod). Each in its CNI's terms.

use super::{Reader, ipam::kubelet_says, pod_name};
use crate::detect::{Cause, Finding, FindingKind, Remedy};

/// The long message: what, why the pod cannot start, kubelet's words, the fix.
pub(super) fn render(f: &Finding, reader: Reader<'_>) -> String {
    let Cause::Leftover {
        kubelet,
        interface,
        holder,
        wanted,
        seen,
        ..
    } = &f.cause
    else {
        return String::new();
    };
    let node = &f.owner.node;
    let what = if f.kind == FindingKind::PodRouteTaken {
        let ip = f.ip_text();
        let iface = interface.as_deref().unwrap_or("another interface");
        let held = match holder {
            Some(h) => format!(
                ", and {} on {node} holds {ip} in status.podIPs: Calico's IPAM handed one \
                 address to two pods (its datastore lost an allocation in use, calico#1253, \
                 #3940, #11755)",
                reader.pod(h)
            ),
            None => format!(
                ": no pod holds {ip}, so {iface} is a veth a previous sandbox left behind \
                 (calico#2730)"
            ),
        };
        let seen = seen
            .then(|| format!(" The node's kernel shows the route: {ip} dev {iface}."))
            .unwrap_or_default();
        format!(
            "{} cannot start: Calico's IPAM gave it {ip}, but node {node}'s host already routes \
             {ip} through {iface}{held}.{seen}",
            pod_name(f)
        )
    } else {
        let bridge = interface.as_deref().unwrap_or("the bridge");
        let wanted = wanted.map_or_else(String::new, |w| format!(" (it wants {w})"));
        let holds = if *seen {
            format!("still holds {}", f.ip_text())
        } else {
            "holds another address".to_owned()
        };
        format!(
            "{} cannot start: bridge {bridge} on node {node} {holds}, not the gateway of the \
             node's pod range{wanted}: an address kept from a previous podCIDR (kube-router#689, \
             antrea#1685). The bridge plugin refuses every new pod on {node} until it is gone.",
            pod_name(f)
        )
    };
    format!(
        "{what} {} {}",
        kubelet_says(kubelet, reader),
        super::remedy_for(&f.remedy, reader)
    )
}

/// The short note's prose: what is wrong and what breaks.
pub(super) fn what(f: &Finding, reader: Reader<'_>) -> String {
    let Cause::Leftover {
        interface,
        holder,
        seen,
        ..
    } = &f.cause
    else {
        return String::new();
    };
    let (ip, node) = (f.ip_text(), &f.owner.node);
    if f.kind == FindingKind::PodRouteTaken {
        let iface = interface.as_deref().unwrap_or("another interface");
        let by = holder
            .as_ref()
            .map_or_else(String::new, |h| format!(" ({} holds {ip})", reader.pod(h)));
        format!(
            "Calico refused this pod's IP {ip}: {node} already routes it through {iface}{by}. \
             The pod stays in ContainerCreating."
        )
    } else {
        let bridge = interface.as_deref().unwrap_or("the bridge");
        let old = if *seen {
            format!(" {ip}")
        } else {
            " an address".to_owned()
        };
        format!(
            "Bridge {bridge} on {node} kept{old} of a previous pod range, so the bridge plugin \
             refuses this pod. It stays in ContainerCreating."
        )
    }
}

/// The fixes of these findings; `short`: an Event note's one sentence.
pub(super) fn remedy(r: &Remedy, reader: Reader<'_>, short: bool) -> String {
    match r {
        Remedy::ClearCalicoRoute {
            node,
            ip,
            interface,
            holder,
        } => match (holder, short) {
            (Some(h), true) => format!(
                "Fix: run `calicoctl ipam check --show-problem-ips`, then delete this pod so \
                 Calico gives it another address ({} keeps it).",
                reader.pod(h)
            ),
            (Some(h), false) => format!(
                "Fix: run `calicoctl ipam check --show-problem-ips` to see {ip} allocated \
                 twice, then delete the refused pod so Calico gives it another address; {} \
                 keeps {ip}. Do not `calicoctl ipam release` an address a pod holds.",
                reader.pod(h)
            ),
            (None, true) => format!(
                "Fix: on {node}, once no container uses it, run `ip link delete {}`, then \
                 `calicoctl ipam check`.",
                interface.as_deref().unwrap_or("<cali… in the message>")
            ),
            (None, false) => {
                let iface = interface
                    .as_deref()
                    .unwrap_or("<the interface in the message>");
                format!(
                    "Fix: on {node}, check that no container uses {iface} (`ip route get {ip}`), \
                     then delete it (`ip link delete {iface}`) so its route goes with it; kubelet \
                     retries the sandbox. Then run `calicoctl ipam check` for other leaked \
                     addresses."
                )
            }
        },
        Remedy::RecreateBridge { node, bridge, .. } if short => format!(
            "Fix: on {node}, delete {bridge}'s old address (`ip addr del <old> dev {bridge}`), or \
             the bridge itself and restart its pods."
        ),
        Remedy::RecreateBridge {
            node,
            bridge,
            gateway,
        } => {
            let gw = gateway.map_or_else(String::new, |g| format!(" with {g}"));
            format!(
                "Fix: on {node}, delete the bridge's old address (`ip addr show {bridge}`, then \
                 `ip addr del <old address> dev {bridge}`), or delete the bridge (`ip link delete \
                 {bridge}`) and restart the node's pods; the bridge plugin recreates it{gw}."
            )
        }
        _ => String::new(),
    }
}
