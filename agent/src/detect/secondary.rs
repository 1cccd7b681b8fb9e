//! DuplicateSecondaryIP: two live pods hold one address on one secondary
//! network (Multus' `network-status`): whereabouts' reconciler freeing the
//! wrong address (whereabouts#176), a static address in an attachment every
//! pod of it gets, overlapping IP pools (antrea#7306). Traffic to the
//! address on that network reaches one of them. `audit` reads it from the
//! annotation; a node's detection from its kernel (`kernel::secondary`).

use std::{collections::BTreeMap, net::IpAddr};

use super::{
    Cause, Finding, FindingKind, Owner, PodRef, PodSite, Remedy, Role, Scope, Trust,
    kind::{Alert, Count, Spec},
};
use crate::inventory::{IpSource, Pod, Source};

/// Two pods on one secondary address.
pub(super) const DUPLICATE_SECONDARY: Spec = Spec::pod(
    "DuplicateSecondaryIP",
    "another live pod holds the pod's address on the same secondary network (Multus' \
     network-status, or on one node its kernel): traffic to it on that network reaches one of \
     them",
    Count::IpamProblems,
    Alert::None(
        "it rests on Multus' network-status annotation, which anyone who may edit the pod can \
         write, or on what the pods' namespaces hold, which a pod with NET_ADMIN writes: a hint",
    ),
);

/// A pod and its interface on the network.
type Held<'a> = (&'a Pod, Option<&'a str>);

/// Every pair of live pods holding one address on one secondary network:
/// the newer pod's finding names the older. Pods on different nodes only
/// where `cluster_wide` says the network's IPAM hands addresses out across
/// nodes (whereabouts, a static address): host-local's ranges are per node,
/// and a node-local bridge gives each node the same addresses by design.
pub(super) fn duplicates(pods: &[Pod], cluster_wide: impl Fn(&str) -> bool) -> Vec<Finding> {
    let mut by: BTreeMap<(&str, IpAddr), Vec<Held<'_>>> = BTreeMap::new();
    for p in pods.iter().filter(|p| p.reportable() && p.node.is_some()) {
        for s in &p.secondary {
            by.entry((s.network.as_str(), s.ip))
                .or_default()
                .push((p, s.interface.as_deref()));
        }
    }
    let mut out = Vec::new();
    for ((network, ip), mut holders) in by.into_iter().filter(|(_, h)| h.len() > 1) {
        holders.sort_by(|(a, _), (b, _)| {
            (a.created, &a.namespace, &a.name).cmp(&(b.created, &b.namespace, &b.name))
        });
        holders.dedup_by(|(a, _), (b, _)| a.uid == b.uid && a.name == b.name);
        let Some(((oldest, old_iface), newer)) = holders.split_first() else {
            continue;
        };
        let across = cluster_wide(network);
        for (p, iface) in newer {
            if across || p.node == oldest.node {
                let on = (Some(network), Source::PodNetworkStatus);
                out.push(finding(on, ip, (oldest, *old_iface), (p, *iface)));
            }
        }
    }
    out
}

/// The finding about `p`, newer than `holder`, on `ip`, as `from` shows
/// both: pod status (a duplicate of the pods' own addresses), or on a
/// secondary `network` Multus' annotation or the node's kernel.
pub(super) fn finding(
    (network, from): (Option<&str>, Source),
    ip: IpAddr,
    (holder, holder_iface): (&Pod, Option<&str>),
    (p, iface): (&Pod, Option<&str>),
) -> Finding {
    let holder_node = holder.node.clone().unwrap_or_default();
    let node = p.node.clone().unwrap_or_default();
    let on = |i: Option<&str>| i.map_or_else(String::new, |i| format!(" {i}"));
    let ip_source = match from {
        Source::PodStatus => IpSource::Status,
        Source::Kernel => IpSource::Kernel,
        _ => IpSource::NetworkStatus,
    };
    Finding {
        kind: if network.is_some() {
            FindingKind::DuplicateSecondaryIp
        } else {
            FindingKind::DuplicatePodIp
        },
        scope: Scope::between(&node, &holder_node),
        ip: Some(ip),
        owner: Owner::new(
            holder_node,
            Role::Pod,
            holder_iface.map(str::to_owned),
            from,
        ),
        // Pod status only kubelet writes; the rest, a tenant.
        trust: Trust::of_source(from).max(Trust::of_ip(&ip_source)),
        cause: Cause::Duplicate {
            site: PodSite::new(p, &node, ip_source),
            holder: PodRef::from(holder),
            network: network.map(|n| {
                format!(
                    "{n} (this pod's{}, the other's{})",
                    on(iface),
                    on(holder_iface)
                )
            }),
        },
        remedy: Remedy::RecreateNewer {
            pod: PodRef::from(p),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::SecondaryIp;

    fn pod(name: &str, node: &str, created: i64, network: &str, ip: &str) -> Pod {
        Pod {
            namespace: "storage".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            node: Some(node.into()),
            phase: Some("Running".into()),
            created: Some(created),
            secondary: vec![SecondaryIp {
                network: network.into(),
                interface: Some("lhnet1".into()),
                ip: ip.parse().expect("test address"),
            }],
            ..Pod::default()
        }
    }

    #[test]
    fn two_pods_on_one_address_of_one_network_make_the_newer_ones_finding() {
        let net = "harvester-system/storagenetwork-58mfl";
        let pods = [
            pod("instance-manager-b", "harv2", 20, net, "192.168.50.4"),
            pod("instance-manager-a", "harv1", 10, net, "192.168.50.4"),
            pod("instance-manager-c", "harv1", 30, net, "192.168.50.5"),
            // The same address on another network is no duplicate.
            pod("other", "harv1", 40, "storage/other-net", "192.168.50.4"),
        ];
        let found = duplicates(&pods, |_| true);
        // A network whose IPAM is per node (or unknown): the same node only.
        assert_eq!(duplicates(&pods, |_| false), []);
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.kind, FindingKind::DuplicateSecondaryIp);
        assert_eq!(f.pod().map(|p| p.name.as_str()), Some("instance-manager-b"));
        assert_eq!(f.scope, Scope::CrossNode);
        assert_eq!(f.trust, Trust::Hint);
        let Cause::Duplicate {
            holder, network, ..
        } = &f.cause
        else {
            panic!("{f:?}")
        };
        assert_eq!(holder.name, "instance-manager-a");
        assert!(
            network.as_deref().is_some_and(|n| n.starts_with(net)),
            "{network:?}"
        );
    }

    #[test]
    fn a_pod_being_deleted_or_done_is_no_holder() {
        let net = "ns/a";
        let mut gone = pod("old", "n1", 10, net, "10.1.1.1");
        gone.terminating = true;
        let mut done = pod("job", "n1", 15, net, "10.1.1.1");
        done.phase = Some("Succeeded".into());
        assert_eq!(
            duplicates(&[gone, done, pod("new", "n1", 20, net, "10.1.1.1")], |_| {
                true
            }),
            []
        );
    }
}
