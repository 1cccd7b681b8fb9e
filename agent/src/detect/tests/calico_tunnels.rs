//! A Calico node's tunnel addresses as its kernel and IPAM hold them: the
//! address a tunnel device holds that the Node does not announce, and old
//! allocations without handle or attributes.

use std::sync::Arc;

use super::calico_ipam::{block, inventory, stale};
use crate::{
    detect::{CalicoFix, Remedy, TunnelAllocation, detect},
    inventory::{
        IpamOwner, Source,
        fixtures::{ME, ip},
    },
};

#[test]
fn a_tunnel_address_from_before_calico_wrote_handles_is_not_stale() {
    // Older Calico allocated tunnel addresses with neither handle nor
    // attributes; calico-node marks its own at its next start. Upgraded
    // clusters still hold them: the annotation says whose it is.
    let blocks = vec![block(
        "192.168.185.0/26",
        ME,
        vec![(0, IpamOwner::Unmarked)],
    )];
    assert_eq!(
        stale(&inventory("192.168.185.0", blocks.clone(), vec![])),
        Vec::<TunnelAllocation>::new()
    );
    // Held by the kernel, announced by no annotation of this node: maybe
    // another node's old tunnel address, reported as of unknown owner.
    let mut inv = inventory("192.168.185.9", blocks, vec![]);
    let mut host = crate::inventory::HostNetwork::default();
    host.addresses.push(crate::inventory::LocalAddress {
        ip: ip("192.168.185.0"),
        device: "tunl0".into(),
    });
    inv.host = Arc::new(host);
    let found = detect(&inv);
    let leftover: Vec<_> = found
        .iter()
        .filter(|f| f.ip == Some(ip("192.168.185.0")))
        .map(|f| (&f.cause, &f.remedy))
        .collect();
    assert_eq!(
        leftover,
        [(
            &crate::detect::Cause::Node(crate::detect::NodeProblem::Calico(
                TunnelAllocation::Unmarked {
                    block: "192-168-185-0-26".into(),
                }
            )),
            &Remedy::Calico(CalicoFix::RemoveLeftover {
                node: ME.into(),
                ip: ip("192.168.185.0"),
                device: "tunl0".into()
            })
        )],
        "{found:#?}"
    );
}

#[test]
fn check_judges_the_tunnel_devices_address_too_once_per_address_naming_the_device() {
    let blocks = vec![block("192.168.185.0/26", ME, vec![])];
    let mut inv = inventory("192.168.185.0", blocks, vec![]);
    let mut host = crate::inventory::HostNetwork::default();
    for a in ["192.168.185.0", "192.168.185.5"] {
        host.addresses.push(crate::inventory::LocalAddress {
            ip: ip(a),
            device: "vxlan.calico".into(),
        });
    }
    inv.host = Arc::new(host);
    let found: Vec<_> = detect(&inv)
        .into_iter()
        .map(|f| {
            (
                f.ip.map(|i| i.to_string()),
                f.owner.device,
                f.owner.source,
                f.remedy,
            )
        })
        .collect();
    let vxlan = || Some("vxlan.calico".to_owned());
    // The announced address is re-taken from IPAM; the one the Node does
    // not announce is Felix's leftover, to be removed.
    assert_eq!(
        found,
        [
            (
                Some("192.168.185.0".into()),
                vxlan(),
                Source::Kernel,
                Remedy::Calico(CalicoFix::ReallocateTunnel {
                    node: ME.into(),
                    ip: ip("192.168.185.0")
                })
            ),
            (
                Some("192.168.185.5".into()),
                vxlan(),
                Source::Kernel,
                Remedy::Calico(CalicoFix::RemoveLeftover {
                    node: ME.into(),
                    ip: ip("192.168.185.5"),
                    device: "vxlan.calico".into()
                })
            ),
        ]
    );
    // Without the Node, nothing says the address is not announced.
    inv.node_facts = None;
    let found = detect(&inv);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found
            .iter()
            .all(|f| matches!(f.remedy, Remedy::Calico(CalicoFix::ReallocateTunnel { .. }))),
    );
}

#[test]
fn a_tunnel_mode_switched_off_leaves_a_leftover_and_an_etcd_datastore_says_nothing_of_one() {
    // VXLAN switched off: calico-node dropped the annotation and released
    // the address; vxlan.calico keeps it. The Node still carries Calico's
    // other annotations (the Kubernetes datastore).
    let blocks = vec![block("192.168.185.0/26", ME, vec![])];
    let mut inv = inventory("192.168.185.9", blocks, vec![]);
    inv.cluster.annotated_nodes = Arc::new(vec![]);
    let mut host = crate::inventory::HostNetwork::default();
    host.addresses.push(crate::inventory::LocalAddress {
        ip: ip("192.168.185.0"),
        device: "vxlan.calico".into(),
    });
    inv.host = Arc::new(host);
    let remedies = |inv: &crate::inventory::Inventory| -> Vec<Remedy> {
        detect(inv).into_iter().map(|f| f.remedy).collect()
    };
    assert_eq!(
        remedies(&inv),
        [Remedy::Calico(CalicoFix::RemoveLeftover {
            node: ME.into(),
            ip: ip("192.168.185.0"),
            device: "vxlan.calico".into()
        })]
    );
    // An etcd datastore: the Node carries none of Calico's annotations, so
    // nothing says the address is not announced.
    if let Some(n) = inv.node_facts.as_mut() {
        n.calico_annotated = false;
    }
    assert_eq!(
        remedies(&inv),
        [Remedy::Calico(CalicoFix::ReallocateTunnel {
            node: ME.into(),
            ip: ip("192.168.185.0"),
        })]
    );
}
