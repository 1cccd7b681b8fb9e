//! The kernel-truth checks on healthy nodes laid out as kube-ovn and Cilium
//! lay them (no reference plugin makes these): pods behind veths with no
//! per-pod route — kube-ovn's `<id>_h` ports on its OVS bridge, Cilium's
//! `lxc…` veths routed through `cilium_host` and its `lxc_health` namespace.
//! Every pod's namespace is read and tabled; nothing is found. And the kernel's
//! duplicate address detection, failed on a bridge (`dadfailed`) or never
//! ending (`tentative`).
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow_tests::{
    HANG, can_run_netns_tests,
    check::Files,
    ipshadow_bin, kernel_at_least,
    lab::{ME, wait_for},
    netns::NetNs,
    objects::{cilium_node, list, pod, subnet},
};
use serde_json::Value;

/// A node with an uplink and a default route, as a real node has.
fn node(tag: &str) -> NetNs {
    let node = NetNs::new(tag);
    node.add_veth("eth0", "uplink");
    node.ip_batch(
        "addr add 192.168.100.11/24 dev eth0\nlink set eth0 up\nlink set uplink up\n\
         route add default via 192.168.100.1\n",
    );
    node
}

/// A pod namespace behind the node's veth `host_if`, holding `addr` on `eth0`.
fn pod_behind(node: &NetNs, tag: &str, host_if: &str, addr: &str) -> NetNs {
    let pod = NetNs::new(tag);
    node.ip_batch(&format!(
        "link add {host_if} type veth peer name eth0 netns {}\nlink set {host_if} up\n",
        pod.name
    ));
    pod.ip_batch(&format!("addr add {addr} dev eth0\nlink set eth0 up\n"));
    pod
}

/// `ipshadow check --output json` in `node` with these files.
fn check(node: &NetNs, args: &[(&str, Value)]) -> Value {
    let files = Files::new("kernel-layouts");
    let mut cmd = node.command(ipshadow_bin().to_str().unwrap());
    cmd.args(["check", "--node", ME, "--output", "json"]);
    for (flag, v) in args {
        let name = format!("{}.json", flag.trim_start_matches('-'));
        cmd.arg(flag).arg(files.write(&name, v));
    }
    let out = cmd.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Each address's truth-table row: held behind `iface` alone.
fn held_behind(v: &Value, ip: &str, iface: &str) {
    let rows = v["truth_table"]["rows"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["ip"] == ip)
        .unwrap_or_else(|| panic!("no row for {ip}: {v:#}"));
    let holders = row["holders"].as_array().unwrap();
    assert_eq!(holders.len(), 1, "{row:#}");
    assert_eq!(holders[0]["iface"], iface, "{row:#}");
    assert_eq!(holders[0]["peer"], "eth0", "{row:#}");
}

fn can_run(test: &str) -> bool {
    can_run_netns_tests(test) && kernel_at_least(4, 20, test, "IFA_TARGET_NETNSID dumps")
}

#[test]
fn a_healthy_kube_ovn_like_node_has_no_kernel_findings() {
    if !can_run("a_healthy_kube_ovn_like_node_has_no_kernel_findings") {
        return;
    }
    let node = node("klo");
    // kube-ovn: ovn0 on the join subnet, one route for the pod subnet through
    // it, each pod's `<id>_h` port on the OVS bridge (a Linux bridge stands in
    // for OVS, a veth pair within the node for its internal port: this kernel
    // has no dummy devices).
    node.ip_batch(
        "link add br-int type bridge\nlink set br-int up\n\
         link add ovn0 type veth peer name ovn0-peer\nlink set ovn0-peer up\n\
         addr add 100.64.0.2/16 dev ovn0\nlink set ovn0 up\n\
         route add 10.16.0.0/16 via 100.64.0.1 dev ovn0\n",
    );
    let laid = [
        ("5f3c1d2a9b01_h", "10.16.0.5"),
        ("77ab90e1c4d2_h", "10.16.0.6"),
    ];
    let _pods: Vec<NetNs> = laid
        .iter()
        .map(|(port, ip)| {
            let p = pod_behind(&node, "klop", port, &format!("{ip}/16"));
            node.ip(&["link", "set", port, "master", "br-int"]);
            p
        })
        .collect();
    let pods = list(vec![
        pod("tenant", "a", ME, &["10.16.0.5"]),
        pod("tenant", "b", ME, &["10.16.0.6"]),
    ]);
    let subnets = list(vec![subnet("ovn-default", "10.16.0.0/16", &[])]);
    let v = check(&node, &[("--pods", pods), ("--subnets", subnets)]);
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
    assert_eq!(v["truth_table"]["namespaces"], 2, "{v:#}");
    for (port, ip) in laid {
        held_behind(&v, ip, port);
    }
}

#[test]
fn a_healthy_cilium_like_node_has_no_kernel_findings() {
    if !can_run("a_healthy_cilium_like_node_has_no_kernel_findings") {
        return;
    }
    let node = node("clo");
    // Cilium without endpoint routes: the router IP on cilium_host, the pod
    // range routed through it, no per-pod route; lxc_health's namespace holds
    // the health IP, which no pod has.
    node.ip_batch(
        "link add cilium_host type veth peer name cilium_net\nlink set cilium_net up\n\
         link set cilium_host up\naddr add 10.0.1.200/32 dev cilium_host\n\
         route add 10.0.1.200 dev cilium_host scope link\n\
         route add 10.0.1.0/24 via 10.0.1.200 dev cilium_host src 10.0.1.200\n",
    );
    let laid = [
        ("lxc8e2f0a91c3d4", "10.0.1.17"),
        ("lxc03b7d6e5f2a1", "10.0.1.98"),
        ("lxc_health", "10.0.1.33"),
    ];
    let _pods: Vec<NetNs> = laid
        .iter()
        .map(|(veth, ip)| pod_behind(&node, "clop", veth, &format!("{ip}/32")))
        .collect();
    let pods = list(vec![
        pod("tenant", "a", ME, &["10.0.1.17"]),
        pod("tenant", "b", ME, &["10.0.1.98"]),
    ]);
    let mut cn = cilium_node(ME, "10.0.1.200", None, Some("10.0.1.33"));
    cn["spec"]["ipam"] = serde_json::json!({"podCIDRs": ["10.0.1.0/24"]});
    let args = [("--pods", pods), ("--ciliumnodes", list(vec![cn]))];
    let v = check(&node, &args);
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
    assert_eq!(v["truth_table"]["namespaces"], 3, "{v:#}");
    for (veth, ip) in laid {
        held_behind(&v, ip, veth);
    }
    // The same node with a sandbox no pod owns, inside the pod range: a leak.
    let _leaked = pod_behind(&node, "clop", "lxc5a5a5a5a5a5a", "10.0.1.55/32");
    let v = check(&node, &args);
    let found: Vec<_> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap(), f["ip"].as_str().unwrap()))
        .collect();
    assert_eq!(found, [("LeakedSandboxAddress", "10.0.1.55")], "{v:#}");
}

/// Waits (bounded only against a hang) until `ip -6 addr` in `ns` shows
/// `addr` with (`want`) or without the kernel's `flag`.
fn wait_for_flag(ns: &NetNs, addr: &str, flag: &str, want: bool) {
    wait_for_flag_on(ns, "eth0", addr, flag, want);
}

fn wait_for_flag_on(ns: &NetNs, dev: &str, addr: &str, flag: &str, want: bool) {
    let what = format!("{addr} on {dev} in {} with {flag} {want}", ns.name);
    wait_for(&what, HANG, || {
        let out = ns.ip_output(&["-6", "addr", "show", "dev", dev]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text.lines().find(|l| l.contains(addr))?;
        (line.contains(flag) == want).then_some(())
    });
}

/// Two pods on one bridge given one IPv6 address: the kernel fails the second
/// one's duplicate address detection (`dadfailed`), and `check` says so on
/// that pod (issue 39); the first pod, whose address works, is told another
/// namespace holds it too. Which namespace is whose: Calico's veth names.
#[test]
fn a_pods_ipv6_address_the_kernel_marks_dadfailed_is_reported_on_that_pod() {
    if !can_run("a_pods_ipv6_address_the_kernel_marks_dadfailed_is_reported_on_that_pod") {
        return;
    }
    let node = node("dad");
    // The bridge CNI's gateway: the pod range is the bridge's connected route.
    node.ip_batch("link add br0 type bridge\naddr add fd00:10::1/64 dev br0\nlink set br0 up\n");
    let addr = "fd00:10::5";
    // cni::calico::pod_veth("tenant", "a") and ("tenant", "b").
    // On the bridge before the pod's eth0 comes up, so that its DAD is heard;
    // NetNs turns DAD off, so b's eth0 turns it back on.
    let on_bridge = |tag: &str, host_if: &str, dad: bool| {
        let pod = NetNs::new(tag);
        node.ip_batch(&format!(
            "link add {host_if} type veth peer name eth0 netns {}\n\
             link set {host_if} master br0\nlink set {host_if} up\n",
            pod.name
        ));
        if dad {
            let sysctl = pod
                .command("sysctl")
                .args(["-qw", "net.ipv6.conf.eth0.accept_dad=1"])
                .status()
                .unwrap();
            assert!(sysctl.success());
        }
        pod.ip_batch(&format!("addr add {addr}/64 dev eth0\nlink set eth0 up\n"));
        pod
    };
    let a = on_bridge("dada", "cali31ccef0dc46", false);
    wait_for_flag(&a, addr, "tentative", false);
    let b = on_bridge("dadb", "calibc08975e859", true);
    wait_for_flag(&b, addr, "dadfailed", true);
    let pods = list(vec![
        pod("tenant", "a", ME, &[addr]),
        pod("tenant", "b", ME, &[addr]),
    ]);
    let v = check(&node, &[("--pods", pods)]);
    let kind_of = |name: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["pod"]["name"] == name && f["ip"] == addr)
            .unwrap_or_else(|| panic!("no finding about pod {name}: {v:#}"))
            .clone()
    };
    let failed = kind_of("b");
    assert_eq!(failed["kind"], "PodAddressDadFailed", "{failed:#}");
    assert_eq!(failed["owner"]["device"], "calibc08975e859", "{failed:#}");
    assert_eq!(failed["trust"], "hint", "{failed:#}");
    assert_eq!(kind_of("a")["kind"], "PodAddressHeldTwice", "{v:#}");
}

/// A pod whose IPv6 address stays tentative (its DAD stalled: a 10-minute
/// retransmit time) is told so by `check` once the kernel made the address 10 s
/// ago, on the pod and its link (issue 39); that a younger one is not is the
/// parser's unit test, on the kernel's stamps.
#[test]
fn a_pods_ipv6_address_left_tentative_is_reported_once_its_dad_outlasts_ten_seconds() {
    let test = "a_pods_ipv6_address_left_tentative_is_reported_once_its_dad_outlasts_ten_seconds";
    if !can_run(test) {
        return;
    }
    let node = node("tent");
    node.ip_batch("link add br0 type bridge\naddr add fd00:20::1/64 dev br0\nlink set br0 up\n");
    let addr = "fd00:20::5";
    let pod_ns = NetNs::new("tentp");
    node.ip_batch(&format!(
        "link add calibc08975e859 type veth peer name eth0 netns {}\n\
         link set calibc08975e859 master br0\nlink set calibc08975e859 up\n",
        pod_ns.name
    ));
    // NetNs turns DAD off; this pod's runs, and waits 10 minutes for answers.
    for setting in [
        "net.ipv6.conf.eth0.accept_dad=1",
        "net.ipv6.conf.eth0.dad_transmits=3",
        "net.ipv6.neigh.eth0.retrans_time_ms=600000",
    ] {
        let sysctl = pod_ns
            .command("sysctl")
            .args(["-qw", setting])
            .status()
            .unwrap();
        assert!(sysctl.success(), "{setting}");
    }
    pod_ns.ip_batch(&format!("addr add {addr}/64 dev eth0\nlink set eth0 up\n"));
    wait_for_flag(&pod_ns, addr, "tentative", true);
    let pods = list(vec![pod("tenant", "t", ME, &[addr])]);
    let kind_of = |v: &Value| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["ip"] == addr)
            .map(|f| f["kind"].as_str().unwrap().to_owned())
    };
    let found = wait_for("PodAddressTentative", HANG, || {
        let v = check(&node, &[("--pods", pods.clone())]);
        (kind_of(&v).as_deref() == Some("PodAddressTentative")).then_some(v)
    });
    let f = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["ip"] == addr)
        .unwrap()
        .clone();
    assert_eq!(f["pod"]["name"], "t", "{f:#}");
    assert_eq!(f["owner"]["device"], "calibc08975e859", "{f:#}");
    assert_eq!(f["trust"], "hint", "{f:#}");
    // Still tentative: what was told is the kernel's state, not a guess.
    wait_for_flag(&pod_ns, addr, "tentative", true);
}

/// A pod on the bridge holds the bridge's own gateway address before the node
/// adds it: the node's copy fails duplicate address detection (`dadfailed`),
/// its pods lose their next hop, and `check` reports it on the Node, naming
/// the bridge and the pod given the address (issue 39 item 3, a node-held
/// address).
#[test]
fn a_node_address_the_kernel_marks_dadfailed_is_reported_with_its_device_and_holder() {
    if !can_run("a_node_address_the_kernel_marks_dadfailed_is_reported_with_its_device_and_holder")
    {
        return;
    }
    let node = node("ndad");
    node.ip_batch(
        "link add br0 type bridge
link set br0 up
",
    );
    let sysctl = node
        .command("sysctl")
        .args(["-qw", "net.ipv6.conf.br0.accept_dad=1"])
        .status()
        .unwrap();
    assert!(sysctl.success());
    let gateway = "fd00:10::1";
    let taker = NetNs::new("ndadp");
    node.ip_batch(&format!(
        "link add cali31ccef0dc46 type veth peer name eth0 netns {}\n\
         link set cali31ccef0dc46 master br0\nlink set cali31ccef0dc46 up\n",
        taker.name
    ));
    taker.ip_batch(&format!(
        "addr add {gateway}/64 dev eth0\nlink set eth0 up\n"
    ));
    wait_for_flag(&taker, gateway, "tentative", false);
    node.ip_batch(&format!("addr add {gateway}/64 dev br0\n"));
    wait_for_flag_on(&node, "br0", gateway, "dadfailed", true);
    let pods = list(vec![pod("tenant", "taker", ME, &[gateway])]);
    let v = check(&node, &[("--pods", pods)]);
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "NodeAddressDadFailed")
        .unwrap_or_else(|| panic!("no NodeAddressDadFailed: {v:#}"))
        .clone();
    assert_eq!(f["ip"], gateway, "{f:#}");
    assert_eq!(f["owner"]["device"], "br0", "{f:#}");
    assert_eq!(f["pod"], Value::Null, "{f:#}");
    let message = f["message"].as_str().unwrap_or_default();
    assert!(message.contains("tenant/taker"), "{f:#}");
    drop(taker);
}
