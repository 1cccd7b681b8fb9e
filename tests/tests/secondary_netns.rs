//! DuplicateSecondaryIP from the node's kernel (issue 39): two pods of one
//! node, each behind its veth as `ptp` lays them, each with a macvlan `net1`
//! given one address. On one link of the node (a veth pair inside the node
//! stands in for its NIC: this kernel has no dummy devices) they are one
//! network; on two links, or on networks Multus names apart, they are not.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow_tests::{
    can_run_netns_tests, check::Files, ipshadow_bin, kernel_at_least, lab::ME, netns::NetNs,
    objects::list,
};
use serde_json::{Value, json};

const SHARED: &str = "192.168.50.4";

/// A node with an uplink and a default route, and two links `nic1`, `nic2`
/// standing in for its NICs.
fn node(tag: &str) -> NetNs {
    let node = NetNs::new(tag);
    node.add_veth("eth0", "uplink");
    node.add_veth("nic1", "nic1-peer");
    node.add_veth("nic2", "nic2-peer");
    node.ip_batch(
        "addr add 192.168.100.11/24 dev eth0\nlink set eth0 up\nlink set uplink up\n\
         route add default via 192.168.100.1\n\
         link set nic1 up\nlink set nic1-peer up\nlink set nic2 up\nlink set nic2-peer up\n",
    );
    node
}

/// A pod namespace behind the node's veth `host_if` holding `addr` on `eth0`
/// (a /32 routed to it), and [`SHARED`] on `net1`, a macvlan on `parent`.
fn pod_on(node: &NetNs, host_if: &str, addr: &str, parent: &str) -> NetNs {
    let pod = NetNs::new("ksp");
    let mac = format!("{host_if}-m");
    node.ip_batch(&format!(
        "link add {host_if} type veth peer name eth0 netns {ns}\nlink set {host_if} up\n\
         route add {addr}/32 dev {host_if}\n\
         link add {mac} link {parent} type macvlan mode bridge\nlink set {mac} netns {ns}\n",
        ns = pod.name
    ));
    pod.ip_batch(&format!(
        "addr add {addr}/32 dev eth0\nlink set eth0 up\n\
         link set {mac} name net1\naddr add {SHARED}/24 dev net1\nlink set net1 up\n"
    ));
    pod
}

/// Pod `name` of this node at `addr`, created at `created`, with Multus'
/// network-status naming `net1`'s network where `network` is given.
fn api_pod(name: &str, addr: &str, created: &str, network: Option<&str>) -> Value {
    let mut p = ipshadow_tests::objects::pod("tenant", name, ME, &[addr]);
    p["metadata"]["creationTimestamp"] = json!(created);
    if let Some(network) = network {
        let status = json!([
            {"name": "ptp", "interface": "eth0", "ips": [addr], "default": true},
            {"name": network, "interface": "net1", "ips": [SHARED]},
        ]);
        p["metadata"]["annotations"] =
            json!({"k8s.v1.cni.cncf.io/network-status": status.to_string()});
    }
    p
}

/// `ipshadow check --output json` in `node` with these pods.
fn check(node: &NetNs, pods: Vec<Value>) -> Value {
    let files = Files::new("secondary-netns");
    let out = node
        .command(ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", ME, "--output", "json", "--pods"])
        .arg(files.write("pods.json", &list(pods)))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Each finding as (kind, ip, pod, holder).
fn found(v: &Value) -> Vec<(String, String, String, String)> {
    let text = |x: &Value| x.as_str().unwrap_or_default().to_owned();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                text(&f["kind"]),
                text(&f["ip"]),
                text(&f["pod"]["name"]),
                text(&f["holder"]["name"]),
            )
        })
        .collect()
}

/// Pods a (older) and b with `networks` in their network-status.
fn pods(networks: [Option<&str>; 2]) -> Vec<Value> {
    vec![
        api_pod("a", "10.250.1.2", "2026-01-01T00:00:00Z", networks[0]),
        api_pod("b", "10.250.1.3", "2026-01-02T00:00:00Z", networks[1]),
    ]
}

#[test]
fn one_secondary_address_on_macvlans_of_one_node_link_is_reported_on_the_newer_pod() {
    let test = "one_secondary_address_on_macvlans_of_one_node_link_is_reported_on_the_newer_pod";
    if !can_run_netns_tests(test) || !kernel_at_least(4, 20, test, "IFA_TARGET_NETNSID dumps") {
        return;
    }
    let one = node("ksn");
    let _a = pod_on(&one, "veth-a", "10.250.1.2", "nic1");
    let _b = pod_on(&one, "veth-b", "10.250.1.3", "nic1");
    let v = check(&one, pods([None, None]));
    let dup = (
        "DuplicateSecondaryIP".to_owned(),
        SHARED.to_owned(),
        "b".to_owned(),
        "a".to_owned(),
    );
    assert_eq!(found(&v), std::slice::from_ref(&dup), "{v:#}");
    let f = &v["findings"][0];
    assert_eq!(f["owner"]["source"], "kernel", "{f:#}");
    assert_eq!(f["owner"]["device"], "net1", "{f:#}");
    assert_eq!(f["trust"], "hint", "{f:#}");
    // Multus naming both interfaces on networks apart: isolated by design.
    let v = check(&one, pods([Some("tenant/red"), Some("tenant/blue")]));
    assert_eq!(found(&v), [], "{v:#}");
    // Naming one network: the finding names it.
    let v = check(&one, pods([Some("tenant/red"), Some("tenant/red")]));
    assert_eq!(found(&v), [dup], "{v:#}");
    let message = v["findings"][0]["message"].as_str().unwrap();
    assert!(message.contains("tenant/red"), "{message}");

    // Macvlans on two links of the node: nothing ties them.
    let two = node("ksn");
    let _a = pod_on(&two, "veth-a", "10.250.1.2", "nic1");
    let _b = pod_on(&two, "veth-b", "10.250.1.3", "nic2");
    let v = check(&two, pods([None, None]));
    assert_eq!(found(&v), [], "{v:#}");
}
