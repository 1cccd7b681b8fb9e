//! A node laid out as the `ptp` CNI plugin (and Calico, Cilium's endpoint
//! routes) lays it: one veth per pod, a /32 per pod out of it, the pod's
//! address on the peer `eth0` (ifindex 2) of its own namespace.

use std::{net::IpAddr, sync::Arc};

use super::{
    HostIface, Inventory, Link, NsAddress, NsLink, OperState, PeerNamespace, Pod, Route, RouteKind,
    fixtures::{inventory, ip, net},
};

/// The pods' addresses; pod `i` sits behind `veth{i}` (ifindex 10 + i, nsid i).
pub(crate) const PTP_PODS: [&str; 3] = ["10.250.1.2", "10.250.1.3", "10.250.1.4"];

/// The host interface of pod `i`.
pub(crate) fn veth(i: usize) -> u32 {
    10 + u32::try_from(i).expect("small")
}

/// `pods` (the API's) on a node where `PTP_PODS` are laid out and healthy.
pub(crate) fn ptp_inventory(pods: Vec<Pod>) -> Inventory {
    let mut inv = inventory(pods);
    let host = Arc::make_mut(&mut inv.host);
    host.namespaces.read = true;
    for (i, a) in PTP_PODS.iter().enumerate() {
        lay_out(host, i, a);
    }
    inv
}

/// Pod `i` with address `a` as `ptp` lays it: `veth{i}` (ifindex 10 + i) on
/// the host, its namespace (nsid i) holding `a` on `eth0`, a /32 out of it.
pub(crate) fn lay_out(host: &mut super::HostNetwork, i: usize, a: &str) {
    let (index, nsid) = (veth(i), i32::try_from(i).expect("small"));
    let name = format!("veth{i}");
    host.links.push(Link {
        index,
        name: name.clone(),
    });
    host.namespaces.ifaces.push(HostIface {
        index,
        name,
        kind: "veth".into(),
        state: OperState::Up,
        admin_up: true,
        master: None,
        nsid,
        peer_index: 2,
    });
    host.namespaces.namespaces.insert(
        nsid,
        Arc::new(PeerNamespace {
            links: vec![NsLink {
                index: 2,
                name: "eth0".into(),
                state: OperState::Up,
                lower: None,
            }],
            addresses: vec![ns_address(a)],
            truncated: false,
        }),
    );
    host.routes.push(pod_route(a, index));
}

pub(crate) fn ns_address(a: &str) -> NsAddress {
    NsAddress {
        ip: ip(a),
        prefix_len: 24,
        index: 2,
        dad_failed: false,
        dad_stuck: false,
    }
}

pub(crate) fn pod_route(a: &str, oif: u32) -> Route {
    Route {
        table: 254,
        dst: net(&format!("{a}/32")),
        kind: RouteKind::Unicast,
        oif: Some(oif),
        gateway: None,
    }
}

/// The host's /32 to `a` goes out `oif` instead.
pub(crate) fn reroute(inv: &mut Inventory, a: &str, oif: u32) {
    let host = Arc::make_mut(&mut inv.host);
    let target: IpAddr = ip(a);
    host.routes.retain(|r| r.dst.addr() != target);
    host.routes.push(pod_route(a, oif));
}

/// The namespace with `nsid` holds `addrs` on its eth0 instead.
pub(crate) fn hold(inv: &mut Inventory, nsid: i32, addrs: &[&str]) {
    let host = Arc::make_mut(&mut inv.host);
    let ns = Arc::make_mut(host.namespaces.namespaces.get_mut(&nsid).expect("nsid"));
    ns.addresses = addrs.iter().map(|a| ns_address(a)).collect();
}
