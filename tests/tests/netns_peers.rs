//! The netlink adapter reads what pod namespaces hold from the node's
//! namespace alone, on pods laid out by the real `ptp` plugin.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{fmt::Write as _, net::IpAddr};

use futures::TryStreamExt as _;
use ipshadow::{
    inventory::{OperState, PodNamespaces},
    netlink::peers::Peers,
};
use ipshadow_tests::{can_run_netns_tests, cni, guard, kernel_at_least, netns::NetNs};
use netlink_packet_route::{
    address::{AddressAttribute, AddressMessage},
    link::NetkitMode,
};

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

/// Lays out pod `i` behind the host veth `v{i}` of `node`, its address on `eth0`.
fn veth_pod(node: &NetNs, pod: &NetNs, i: usize) -> String {
    let ip = format!("10.253.0.{}", i + 2);
    node.ip_batch(&format!(
        "link add v{i} type veth peer name eth0 netns {}\nlink set v{i} up\nroute add {ip}/32 dev v{i}\n",
        pod.name
    ));
    pod.ip_batch(&format!("addr add {ip}/24 dev eth0\nlink set eth0 up\n"));
    ip
}

#[test]
fn only_new_or_changed_namespaces_are_read_again_and_all_of_them_after_expiry() {
    const TEST: &str = "only_new_or_changed_namespaces_are_read_again_and_all_of_them_after_expiry";
    if !can_run_netns_tests(TEST) || !kernel_at_least(4, 20, TEST, "IFA_TARGET_NETNSID dumps") {
        return;
    }
    let node = NetNs::new("pri");
    let mut pods: Vec<NetNs> = (0..4).map(|_| NetNs::new("prip")).collect();
    for (i, p) in pods.iter().take(3).enumerate() {
        veth_pod(&node, p, i);
    }
    let held = |r: &PodNamespaces, ip: &str| r.holders(ip.parse().unwrap()).count();
    let _in = node.enter();
    let rt = runtime();
    let _rt = rt.enter();
    let peers = Peers::connect().unwrap();
    let read = || rt.block_on(peers.read()).unwrap();
    // Reads until `done` holds, and what was read afresh over those reads: the
    // kernel turns a veth's state a moment after its ends change (linkwatch),
    // and a change of state is a reason to read that namespace again.
    let settle = |done: &dyn Fn(&PodNamespaces) -> bool| {
        let mut reread = 0;
        let r =
            ipshadow_tests::lab::wait_for("the namespaces to settle", ipshadow_tests::HANG, || {
                let r = read();
                reread += r.reread;
                done(&r).then_some(r)
            });
        (r, reread)
    };
    let all_up = |r: &PodNamespaces| r.ifaces.iter().all(|i| i.state == OperState::Up);
    let _ = settle(&all_up);

    peers.expire();
    let first = read();
    assert_eq!((first.reread, first.namespaces.len()), (3, 3), "{first:#?}");
    let again = read();
    assert_eq!(again.reread, 0, "nothing changed: nothing read again");
    assert_eq!(again.namespaces, first.namespaces);

    // Inside a namespace: the host hears nothing, the kept read stands until expiry.
    pods[0].ip(&["addr", "add", "10.253.9.9/32", "dev", "eth0"]);
    let inside = read();
    assert_eq!((inside.reread, held(&inside, "10.253.9.9")), (0, 0));

    // A new pod's veth: that namespace alone is read (again when it turns up).
    veth_pod(&node, &pods[3], 3);
    let (started, reread) = settle(&|r| r.namespaces.len() == 4 && all_up(r));
    assert!(
        (1..=2).contains(&reread),
        "{reread} reads for one new namespace"
    );
    assert_eq!(held(&started, "10.253.0.5"), 1);

    // A pod's link down turns its host veth's state: that namespace alone.
    pods[1].ip(&["link", "set", "eth0", "down"]);
    let (_, reread) = settle(&|r| !all_up(r));
    assert_eq!(reread, 1);

    // The resync: every namespace again, and the change inside is seen.
    peers.expire();
    let resync = read();
    assert_eq!(resync.reread, 4);
    assert_eq!(held(&resync, "10.253.9.9"), 1);

    // A namespace gone (the kernel tears it down a little later, its veth with
    // it): nothing to read, nothing kept of it.
    drop(pods.remove(2));
    let (gone, reread) = settle(&|r| r.namespaces.len() < 4);
    assert_eq!((reread, gone.namespaces.len()), (0, 3), "{gone:#?}");
    assert_eq!(held(&gone, "10.253.0.4"), 0);
}

#[test]
fn a_netkit_pod_is_read_like_a_veth_pod_where_the_kernel_has_netkit() {
    const TEST: &str = "a_netkit_pod_is_read_like_a_veth_pod_where_the_kernel_has_netkit";
    if !can_run_netns_tests(TEST) || !kernel_at_least(6, 7, TEST, "netkit devices") {
        return;
    }
    let node = NetNs::new("prk");
    let pod = NetNs::new("prkp");
    let rt = runtime();
    let created = {
        let _in = node.enter();
        rt.block_on(async {
            let (conn, handle, _) = rtnetlink::new_connection().unwrap();
            drop(tokio::spawn(conn));
            let link = rtnetlink::LinkNetkit::new("nk0", "nkp0", NetkitMode::L3).build();
            handle.link().add(link).execute().await
        })
    };
    match created {
        Ok(()) => {}
        // The kernel's answer to a link kind it was built without — unless its
        // own config says netkit is in: then the refusal is a failure.
        Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::EOPNOTSUPP => {
            assert!(
                !netkit_configured(),
                "this kernel's config has netkit, yet it refused a pair: {e}"
            );
            ipshadow_tests::absent(
                TEST,
                &format!(
                    "this kernel refuses to create a netkit pair ({e}): built without CONFIG_NETKIT"
                ),
            );
            return;
        }
        Err(e) => panic!("creating a netkit pair failed: {e}"),
    }
    guard(TEST, None);
    node.ip(&["link", "set", "nkp0", "netns", &pod.name]);
    pod.ip_batch("link set nkp0 name eth0\naddr add 10.254.0.2/32 dev eth0\nlink set eth0 up\n");
    node.ip_batch("link set nk0 up\nroute add 10.254.0.2/32 dev nk0\n");

    let read = read(&node);
    assert!(read.read && read.unread.is_empty(), "{read:#?}");
    let nk = read.ifaces.iter().find(|i| i.name == "nk0").unwrap();
    assert_eq!(nk.kind, "netkit");
    let ns = &read.namespaces[&nk.nsid];
    assert_eq!(ns.link(nk.peer_index).unwrap().name, "eth0");
    let holders: Vec<_> = read
        .holders("10.254.0.2".parse().unwrap())
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(holders, ["nk0"]);
}

/// Whether this kernel's own config (`/proc/config.gz`, where the kernel
/// exposes it) builds netkit in or as a module; `false` where it is unreadable.
fn netkit_configured() -> bool {
    std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == "CONFIG_NETKIT=y" || l == "CONFIG_NETKIT=m")
        })
}

/// A resync pass reads the host's links, addresses and routes once, however
/// many slices of `STALE_PER_PASS` namespaces it reads them in: on a node of
/// 1,000 pods, 1,000 namespace reads and one host read (before, each slice
/// read the host again: 8 per pass).
#[test]
fn a_resync_pass_reads_the_host_once_on_a_thousand_pod_node() {
    const TEST: &str = "a_resync_pass_reads_the_host_once_on_a_thousand_pod_node";
    const PODS: usize = 1000;
    if !can_run_netns_tests(TEST) || !kernel_at_least(4, 20, TEST, "IFA_TARGET_NETNSID dumps") {
        return;
    }
    let ip = |i: usize| format!("10.252.{}.{}", i / 200, i % 200 + 2);
    let node = NetNs::new("hreads");
    let pods: Vec<NetNs> = (0..PODS).map(|_| NetNs::new("hreadp")).collect();
    let mut batch = String::new();
    for (i, p) in pods.iter().enumerate() {
        let _ = write!(
            batch,
            "link add v{i} type veth peer name eth0 netns {}\nlink set v{i} up\nroute add {}/32 dev v{i}\n",
            p.name,
            ip(i)
        );
    }
    node.ip_batch(&batch);
    for (i, p) in pods.iter().enumerate() {
        p.ip_batch(&format!(
            "addr add {}/24 dev eth0\nlink set eth0 up\n",
            ip(i)
        ));
    }
    // Each veth's carrier comes up a moment later (linkwatch): a host change
    // of its own; let it pass before the agent starts.
    ipshadow_tests::lab::wait_for("the veths up", ipshadow_tests::HANG, || {
        let out = node.ip_output(&["-o", "link", "show", "up"]);
        let up = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("state UP"))
            .count();
        (up >= PODS).then_some(())
    });
    let dir = ipshadow_tests::TempDir::new("host-reads");
    let file = dir.join("pods.json");
    let list: Vec<_> = (0..PODS)
        .map(|i| ipshadow_tests::objects::pod("t", &format!("p-{i}"), "node-a", &[&ip(i)]))
        .collect();
    ipshadow_tests::objects::write_list(&file, list);
    let agent = ipshadow_tests::agent::AgentProc::spawn(
        &node,
        &[
            "--node",
            "node-a",
            "--pods",
            file.to_str().unwrap(),
            "--resync-seconds",
            "3",
        ],
    );
    agent.wait_ready(&node);
    let metric = |m: &str, name: &str| ipshadow_tests::http::sample(m, name, &[]).unwrap_or(0.0);
    let (_, m) = ipshadow_tests::agent::AgentProc::get(&node, "/metrics").unwrap();
    let (hosts, reads) = (
        metric(&m, "ipshadow_host_reads_total"),
        metric(&m, "ipshadow_pod_namespace_reads_total"),
    );
    #[allow(clippy::cast_precision_loss, reason = "1,000")]
    let pass = PODS as f64;
    // The next resync pass has read every namespace again (8 slices): one host read.
    let mut after = String::new();
    let done = ipshadow_tests::agent::AgentProc::wait_metrics(&node, ipshadow_tests::HANG, |m| {
        after = m.to_owned();
        metric(m, "ipshadow_pod_namespace_reads_total") >= reads + pass
    });
    assert!(done.is_some(), "no resync pass; log:\n{}", agent.log_text());
    let host_reads = metric(&after, "ipshadow_host_reads_total") - hosts;
    assert!(
        (host_reads - 1.0).abs() < 0.5,
        "{host_reads} host reads in a resync pass of {PODS} namespaces"
    );
    ipshadow_tests::figure(format!(
        "resync pass on a {PODS}-pod node: {PODS} namespace reads in slices of {}, 1 host read",
        ipshadow::netlink::peers::STALE_PER_PASS
    ));
}
