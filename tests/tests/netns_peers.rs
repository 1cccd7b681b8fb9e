//! The netlink adapter reads what pod namespaces hold from the node's
//! namespace alone, on pods laid out by the real `ptp` plugin.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{fmt::Write as _, net::IpAddr};

use futures::TryStreamExt as _;
use ipshadow::{inventory::PodNamespaces, netlink::peers::Peers};
use ipshadow_tests::{can_run_netns_tests, cni, guard, kernel_at_least, netns::NetNs};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};

const TEST: &str = "peer_namespaces_are_read_by_nsid_and_hold_the_pods_addresses";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// What the adapter reads from inside `node`.
fn read(node: &NetNs) -> PodNamespaces {
    let _in = node.enter();
    runtime().block_on(async { Peers::connect().unwrap().read().await.unwrap() })
}

/// An address dump with `IFA_TARGET_NETNSID` on a socket *without* strict checking.
fn lax_dump(node: &NetNs, nsid: i32) -> Vec<AddressMessage> {
    let _in = node.enter();
    runtime().block_on(async {
        let (conn, handle, _) = rtnetlink::new_connection().unwrap();
        drop(tokio::spawn(conn));
        let mut req = handle.address().get();
        req.message_mut()
            .attributes
            .push(AddressAttribute::TargetNetNsId(nsid));
        req.execute().try_collect().await.unwrap()
    })
}

fn ip_of(m: &AddressMessage) -> Option<IpAddr> {
    m.attributes.iter().find_map(|a| match a {
        AddressAttribute::Local(ip) | AddressAttribute::Address(ip) => Some(*ip),
        _ => None,
    })
}

#[test]
fn peer_namespaces_are_read_by_nsid_and_hold_the_pods_addresses() {
    if !can_run_netns_tests(TEST) || !kernel_at_least(4, 20, TEST, "IFA_TARGET_NETNSID dumps") {
        return;
    }
    if let Some(why) = cni::missing() {
        guard(TEST, Some(&why));
        return;
    }
    let node = NetNs::new("prn");
    let pods = [NetNs::new("prp"), NetNs::new("prp")];
    let net = cni::Network::ptp(&node, "peers", "10.250.1.0/24");
    let laid: Vec<(String, String)> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| net.add(&format!("c{i}"), p))
        .collect();

    let read = read(&node);
    assert!(read.read && read.unread.is_empty(), "{read:#?}");
    assert_eq!(read.ifaces.len(), 2, "{read:#?}");
    for (ip, host_if) in &laid {
        let ip: IpAddr = ip.parse().unwrap();
        let iface = read.ifaces.iter().find(|i| &i.name == host_if).unwrap();
        assert_eq!(iface.kind, "veth");
        let ns = &read.namespaces[&iface.nsid];
        // The pod's own address, on the veth's peer (its eth0), and nothing of the node's.
        let held = ns.addresses.iter().find(|a| a.ip == ip).unwrap();
        assert_eq!(held.index, iface.peer_index);
        assert_eq!(ns.link(iface.peer_index).unwrap().name, "eth0");
        assert_eq!(ns.addresses.len(), 1, "only the pod's address: {ns:#?}");
        let holders: Vec<_> = read.holders(ip).map(|i| i.name.as_str()).collect();
        assert_eq!(holders, [host_if.as_str()]);
    }
    // ptp puts the gateway on the host veth: the node holds it, no pod does.
    assert_eq!(read.holders("10.250.1.1".parse().unwrap()).count(), 0);

    // Without NETLINK_GET_STRICT_CHK the same request is answered for the node:
    // the gateway, none of the pods' addresses, and no target nsid in the answer.
    let nsid = read.ifaces[0].nsid;
    let lax = lax_dump(&node, nsid);
    let ips: Vec<IpAddr> = lax.iter().filter_map(ip_of).collect();
    assert!(ips.contains(&"10.250.1.1".parse().unwrap()), "{ips:?}");
    for (ip, _) in &laid {
        assert!(!ips.contains(&ip.parse().unwrap()), "{ips:?}");
    }
    assert!(
        lax.iter()
            .all(|m| !ipshadow::netlink::peers::address_answers_for(m, nsid))
    );
    for (i, p) in pods.iter().enumerate() {
        net.del(&format!("c{i}"), p);
    }
}

/// A read of 110 pod namespaces (kubelet's default max-pods) beside one dump of
/// the node's own addresses: the figure, not an assertion (that is the bench's).
#[test]
fn a_hundred_and_ten_pod_namespaces_are_read_in_one_pass() {
    const TEST: &str = "a_hundred_and_ten_pod_namespaces_are_read_in_one_pass";
    const PODS: usize = 110;
    if !can_run_netns_tests(TEST) || !kernel_at_least(4, 20, TEST, "IFA_TARGET_NETNSID dumps") {
        return;
    }
    let node = NetNs::new("prb");
    let pods: Vec<NetNs> = (0..PODS).map(|_| NetNs::new("prbp")).collect();
    let mut batch = String::new();
    for (i, p) in pods.iter().enumerate() {
        let ip = format!("10.252.{}.{}", i / 200, i % 200 + 2);
        let _ = write!(
            batch,
            "link add v{i} type veth peer name eth0 netns {}\nlink set v{i} up\nroute add {ip}/32 dev v{i}\n",
            p.name
        );
    }
    node.ip_batch(&batch);
    for (i, p) in pods.iter().enumerate() {
        let ip = format!("10.252.{}.{}", i / 200, i % 200 + 2);
        p.ip_batch(&format!("addr add {ip}/24 dev eth0\nlink set eth0 up\n"));
    }
    let _in = node.enter();
    let rt = runtime();
    let (read, took, host_took) = rt.block_on(async {
        let peers = Peers::connect().unwrap();
        let start = std::time::Instant::now();
        let read = peers.read().await.unwrap();
        let took = start.elapsed();
        let (conn, handle, _) = rtnetlink::new_connection().unwrap();
        drop(tokio::spawn(conn));
        let start = std::time::Instant::now();
        let host: Vec<AddressMessage> = handle
            .address()
            .get()
            .execute()
            .try_collect()
            .await
            .unwrap();
        let host_took = start.elapsed();
        assert!(!host.is_empty());
        (read, took, host_took)
    });
    assert_eq!(read.namespaces.len(), PODS, "{:?}", read.unread);
    assert!(read.namespaces.values().all(|n| n.addresses.len() == 1));
    ipshadow_tests::figure(format!(
        "{PODS} pod namespaces read in {took:?}; one host-wide address dump {host_took:?} (ratio {:.0})",
        took.as_secs_f64() / host_took.as_secs_f64().max(1e-9)
    ));
}
