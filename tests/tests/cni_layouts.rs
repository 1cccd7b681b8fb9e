//! `ipshadow check` on nodes laid out by the real CNI reference plugins: `ptp`
//! (one veth and one /32 per pod, as Calico and Cilium's endpoint routes lay
//! them) and `bridge` (flannel's `cni0`). Each scenario is made the way it
//! happens on a node: a route replaced onto another veth, an address changed
//! inside a namespace, a DEL that never ran, host-local's store wiped before
//! the next ADD, a pod namespace deleted under its route, a peer set down.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow_tests::{
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    check::{Files, find},
    cni,
    cni_node::CniNode,
    http::sample,
    ipshadow_bin,
    lab::{self, Lab, ME},
    objects::{list, node, pod},
};
use serde_json::Value;

fn kinds(v: &Value) -> Vec<&str> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect()
}

#[test]
fn a_healthy_ptp_node_has_no_findings_and_a_full_truth_table() {
    let Some(n) = CniNode::new(
        "a_healthy_ptp_node_has_no_findings_and_a_full_truth_table",
        "ph",
        3,
    ) else {
        return;
    };
    let (code, v) = n.json(&["a", "b", "c"]);
    assert_eq!((code, kinds(&v)), (Some(0), vec![]), "{v:#}");
    let t = &v["truth_table"];
    assert_eq!(
        (t["namespaces"].as_u64(), t["interfaces"].as_u64()),
        (Some(3), Some(3))
    );
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{t:#}");
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let row = rows.iter().find(|r| r["ip"] == n.ip(i)).unwrap();
        assert_eq!(row["holders"][0]["iface"], n.veth(i));
        assert_eq!(row["holders"][0]["peer"], "eth0");
        assert_eq!(row["route"]["iface"], n.veth(i));
        assert_eq!(row["pods"][0]["pod"], format!("tenant/{name}"));
    }
    let table = String::from_utf8(n.check(&["a", "b", "c"], "table").stdout).unwrap();
    assert!(
        table.contains("kernel truth: 3 pod namespace(s) behind 3 host interface(s)"),
        "{table}"
    );
    let nsid = &rows.iter().find(|r| r["ip"] == n.ip(0)).unwrap()["holders"][0]["nsid"];
    assert!(
        table.contains(&format!("{} {nsid} eth0", n.veth(0))),
        "{table}"
    );
}

#[test]
fn a_route_replaced_onto_another_veth_sends_the_pod_to_another_pod() {
    let Some(n) = CniNode::new(
        "a_route_replaced_onto_another_veth_sends_the_pod_to_another_pod",
        "pr",
        2,
    ) else {
        return;
    };
    let dst = format!("{}/32", n.ip(0));
    n.node.ip(&["route", "replace", &dst, "dev", n.veth(1)]);
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["PodRouteMisdirected"]),
        "{v:#}"
    );
    let fs = v["findings"].as_array().unwrap().clone();
    let f = find(&fs, n.ip(0));
    assert_eq!(f["pod"]["name"], "a");
    assert_eq!(f["owner"]["device"], n.veth(1));
    assert_eq!(f["owner"]["role"], "pod");
    assert_eq!(f["holder"]["name"], "b", "the pod the traffic reaches");
    assert_eq!(
        f["kernel"]["holders"][0]["iface"],
        n.veth(0),
        "who really holds it"
    );
    assert_eq!(f["trust"], "kernel");
    let m = f["message"].as_str().unwrap();
    assert!(m.contains(n.veth(1)) && m.contains("tenant/b"), "{m}");
}

#[test]
fn an_address_changed_inside_a_namespace_leaves_the_pod_unreached() {
    let Some(n) = CniNode::new(
        "an_address_changed_inside_a_namespace_leaves_the_pod_unreached",
        "pa",
        2,
    ) else {
        return;
    };
    n.pods[1].ip(&["addr", "del", &format!("{}/24", n.ip(1)), "dev", "eth0"]);
    n.pods[1].ip(&["addr", "add", "10.250.1.200/24", "dev", "eth0"]);
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["PodRouteMisdirected"]),
        "{v:#}"
    );
    let fs = v["findings"].as_array().unwrap().clone();
    let f = find(&fs, n.ip(1));
    assert_eq!(f["pod"]["name"], "b");
    assert_eq!(f["owner"]["device"], n.veth(1));
    assert!(f["kernel"]["holders"].as_array().unwrap().is_empty());
}

#[test]
fn a_del_that_never_ran_leaves_a_leaked_sandbox_on_the_node() {
    let Some(n) = CniNode::new(
        "a_del_that_never_ran_leaves_a_leaked_sandbox_on_the_node",
        "pl",
        3,
    ) else {
        return;
    };
    // Pod c is gone from the API; its sandbox was never torn down (no DEL).
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["LeakedSandboxAddress"]),
        "{v:#}"
    );
    let fs = v["findings"].as_array().unwrap().clone();
    let f = find(&fs, n.ip(2));
    assert!(f["pod"].is_null());
    assert_eq!(f["owner"]["device"], n.veth(2));
    assert_eq!(f["kernel"]["reached"]["peer"], "eth0");
    // The runtime's DEL clears it.
    n.net.del("pl-c2", &n.pods[2]);
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!((code, kinds(&v)), (Some(0), vec![]), "{v:#}");
}

#[test]
fn a_wiped_ipam_store_then_an_add_puts_one_address_in_two_namespaces() {
    let Some(mut n) = CniNode::new(
        "a_wiped_ipam_store_then_an_add_puts_one_address_in_two_namespaces",
        "pw",
        1,
    ) else {
        return;
    };
    // host-local's store lost (a node restart with it on tmpfs), then the next ADD.
    std::fs::remove_dir_all(n.net.store.join("ipam")).unwrap();
    n.add_pod();
    assert_eq!(n.ip(0), n.ip(1), "host-local handed the address out again");
    let (code, v) = n.json(&["old", "new"]);
    assert_eq!(code, Some(1), "{v:#}");
    assert_eq!(
        kinds(&v),
        ["PodAddressHeldTwice", "PodAddressHeldTwice"],
        "{v:#}"
    );
    for f in v["findings"].as_array().unwrap() {
        let ifaces: Vec<&str> = f["kernel"]["holders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["iface"].as_str().unwrap())
            .collect();
        assert_eq!(ifaces.len(), 2, "{f:#}");
        assert!(
            ifaces.contains(&n.veth(0)) && ifaces.contains(&n.veth(1)),
            "{f:#}"
        );
        // ptp left the first pod's route: the new pod's traffic reaches the old sandbox.
        assert_eq!(f["kernel"]["route"]["iface"], n.veth(0));
    }
}

#[test]
fn a_pod_namespace_deleted_under_its_route_leaves_the_pod_unheld() {
    let Some(mut n) = CniNode::new(
        "a_pod_namespace_deleted_under_its_route_leaves_the_pod_unheld",
        "pd",
        2,
    ) else {
        return;
    };
    let gone = n.pods.pop().unwrap();
    drop(gone);
    // The kernel frees the namespace (and its veth, and the route) asynchronously.
    let veth = n.veth(1).to_owned();
    lab::wait_for(
        "the deleted namespace's veth to go",
        ipshadow_tests::HANG,
        || (!n.node.ip_output(&["link", "show", &veth]).status.success()).then_some(()),
    );
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["PodAddressNotHeld"]),
        "{v:#}"
    );
    let fs = v["findings"].as_array().unwrap().clone();
    let f = find(&fs, n.ip(1));
    assert_eq!(f["pod"]["name"], "b");
    assert!(f["kernel"]["route"].is_null());
}

#[test]
fn a_pod_link_set_down_makes_its_route_a_dead_end() {
    let Some(n) = CniNode::new("a_pod_link_set_down_makes_its_route_a_dead_end", "pn", 2) else {
        return;
    };
    n.pods[0].ip(&["link", "set", "eth0", "down"]);
    let veth = n.veth(0).to_owned();
    lab::wait_for(
        "the host veth to see its peer down",
        ipshadow_tests::HANG,
        || {
            let out = n.node.ip_output(&["link", "show", &veth]);
            String::from_utf8_lossy(&out.stdout)
                .contains("NO-CARRIER")
                .then_some(())
        },
    );
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["PodRouteDeadEnd"]),
        "{v:#}"
    );
    let fs = v["findings"].as_array().unwrap().clone();
    let f = find(&fs, n.ip(0));
    assert_eq!(f["owner"]["device"], n.veth(0));
    // A veth whose peer is down reports itself down (NO-CARRIER); the route stays, `linkdown`.
    assert_eq!(f["kernel"]["route"]["state"], "down");
}

#[test]
fn a_healthy_bridge_node_has_no_findings_and_shows_its_pods_behind_cni0() {
    let test = "a_healthy_bridge_node_has_no_findings_and_shows_its_pods_behind_cni0";
    let Some(n) = CniNode::laid_by(test, "bh", 2, cni::Network::bridge) else {
        return;
    };
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!((code, kinds(&v)), (Some(0), vec![]), "{v:#}");
    let rows = v["truth_table"]["rows"].as_array().unwrap();
    for i in 0..2 {
        let row = rows.iter().find(|r| r["ip"] == n.ip(i)).unwrap();
        assert_eq!(row["holders"][0]["iface"], n.veth(i), "{row:#}");
        // No per-pod route: the bridge's connected route reaches them.
        assert!(row["route"].is_null(), "{row:#}");
    }
}

#[test]
fn the_agent_counts_the_namespaces_it_read_and_a_misdirected_route_as_it_happens() {
    let test = "the_agent_counts_the_namespaces_it_read_and_a_misdirected_route_as_it_happens";
    let Some(n) = CniNode::new(test, "pg", 2) else {
        return;
    };
    let files = Files::new("cni-agent");
    let pods = files.write(
        "pods.json",
        &list(vec![
            pod("tenant", "a", ME, &[n.ip(0)]),
            pod("tenant", "b", ME, &[n.ip(1)]),
        ]),
    );
    // A veth's state turns up a moment after the plugin's ADD (linkwatch): that
    // change would be a reason to read its namespace again; let it pass first.
    lab::wait_for("the pods' veths up", ipshadow_tests::HANG, || {
        let out = n.node.ip_output(&["-o", "link", "show", "up"]);
        let links = String::from_utf8_lossy(&out.stdout).into_owned();
        (0..2)
            .all(|i| {
                links
                    .lines()
                    .any(|l| l.contains(&format!(" {}@", n.veth(i))) && l.contains("state UP"))
            })
            .then_some(())
    });
    let agent = AgentProc::spawn(&n.node, &["--node", ME, "--pods", pods.to_str().unwrap()]);
    agent.wait_ready(&n.node);
    let misdirected = |m: &str| {
        sample(
            m,
            "ipshadow_kernel_truth_problems",
            &[("kind", "PodRouteMisdirected")],
        )
    };
    let (_, m) = AgentProc::get(&n.node, "/metrics").unwrap();
    assert_eq!(sample(&m, "ipshadow_pod_namespaces", &[]), Some(2.0), "{m}");
    assert_eq!(
        sample(&m, "ipshadow_pod_namespace_addresses", &[]),
        Some(2.0),
        "{m}"
    );
    assert_eq!(misdirected(&m), Some(0.0), "{m}");
    let reads = |m: &str| sample(m, "ipshadow_pod_namespace_reads_total", &[]);
    assert_eq!(reads(&m), Some(2.0), "each namespace read once: {m}");
    // The route change is a netlink notification: the agent reconciles on it.
    n.node.ip(&[
        "route",
        "replace",
        &format!("{}/32", n.ip(0)),
        "dev",
        n.veth(1),
    ]);
    let seen = AgentProc::wait_metrics(&n.node, ipshadow_tests::HANG, |m| {
        misdirected(m) == Some(1.0)
    });
    assert!(seen.is_some(), "no finding; log:\n{}", agent.log_text());
    // A host route changed, no veth: neither namespace was read again.
    let (_, m) = AgentProc::get(&n.node, "/metrics").unwrap();
    assert_eq!(reads(&m), Some(2.0), "{m}");
}

#[test]
fn net_admin_alone_reads_the_namespaces_and_without_it_nothing_is_guessed() {
    let test = "net_admin_alone_reads_the_namespaces_and_without_it_nothing_is_guessed";
    let Some(n) = CniNode::new(test, "pc", 2) else {
        return;
    };
    let files = Files::new("cni-caps");
    let pods = files.write(
        "pods.json",
        &list(vec![
            pod("tenant", "a", ME, &[n.ip(0)]),
            pod("tenant", "b", ME, &[n.ip(1)]),
        ]),
    );
    // Readable by an unprivileged user, the binary too: a checkout may sit in
    // a directory only root can enter (CI's clone is under a 0700 mktemp -d).
    let bin = pods.with_file_name("ipshadow");
    std::fs::copy(ipshadow_bin(), &bin).unwrap();
    for p in [pods.parent().unwrap(), pods.as_path(), bin.as_path()] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let check = format!(
        "{} check --node {ME} --output json --pods {}",
        bin.display(),
        pods.display()
    );
    let run = |capsh: &[&str]| {
        let out = n
            .node
            .command("capsh")
            .args(capsh)
            .args(["--", "-c", &check])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), v)
    };
    // The DaemonSet's capability alone, as an ordinary user: both namespaces read.
    let (code, v) = run(&[
        "--caps=cap_net_admin+eip cap_setuid,cap_setgid+ep",
        "--keep=1",
        "--user=nobody",
        "--addamb=cap_net_admin",
    ]);
    assert_eq!((code, kinds(&v)), (Some(0), vec![]), "{v:#}");
    assert_eq!(v["truth_table"]["namespaces"], 2, "{v:#}");
    // No capability at all: the kernel refuses the peer (EACCES) and answers the dumps empty.
    // Both namespaces are unread, with the reason, and no finding is made up.
    let (code, v) = run(&["--drop=all"]);
    assert_eq!((code, kinds(&v)), (Some(0), vec![]), "{v:#}");
    let unread = v["truth_table"]["unread"].as_array().unwrap();
    assert_eq!(unread.len(), 2, "{v:#}");
    assert!(
        unread[0]["reason"]
            .as_str()
            .unwrap()
            .contains("CAP_NET_ADMIN"),
        "{v:#}"
    );
}

#[test]
fn a_collision_names_the_namespace_that_really_holds_the_address() {
    let test = "a_collision_names_the_namespace_that_really_holds_the_address";
    let Some(n) = CniNode::new(test, "pk", 1) else {
        return;
    };
    // The node takes the pod's address itself: host traffic to it stays on the node.
    n.node
        .ip(&["addr", "add", &format!("{}/32", n.ip(0)), "dev", "eth0"]);
    let (code, v) = n.json(&["a"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["LocalAddressCollision"]),
        "{v:#}"
    );
    let f = &v["findings"][0];
    // The kernel's evidence: the pod's namespace, behind its veth, still holds it.
    assert_eq!(f["kernel"]["holders"][0]["iface"], n.veth(0), "{f:#}");
    assert_eq!(f["kernel"]["holders"][0]["peer"], "eth0", "{f:#}");
    // … and the message says so, naming the interface.
    let said = format!("The namespace behind {} holds it too.", n.veth(0));
    assert!(f["message"].as_str().unwrap().contains(&said), "{f:#}");
}

#[test]
fn ipv6_pods_are_read_and_a_misdirected_128_is_found() {
    let test = "ipv6_pods_are_read_and_a_misdirected_128_is_found";
    let Some(n) = CniNode::laid_over(test, "p6", 2, cni::Network::ptp, "fd00:250:1::/64") else {
        return;
    };
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!((code, kinds(&v)), (Some(0), vec![]), "{v:#}");
    let rows = v["truth_table"]["rows"].as_array().unwrap();
    let row = rows.iter().find(|r| r["ip"] == n.ip(0)).unwrap();
    assert_eq!(row["holders"][0]["iface"], n.veth(0), "{row:#}");
    assert_eq!(row["route"]["iface"], n.veth(0), "{row:#}");
    n.node.ip(&[
        "-6",
        "route",
        "replace",
        &format!("{}/128", n.ip(0)),
        "dev",
        n.veth(1),
    ]);
    let (code, v) = n.json(&["a", "b"]);
    assert_eq!(
        (code, kinds(&v)),
        (Some(1), vec!["PodRouteMisdirected"]),
        "{v:#}"
    );
    assert_eq!(v["findings"][0]["holder"]["name"], "b", "{v:#}");
}

#[test]
fn the_agent_writes_kernel_truth_events_on_the_pod_and_the_node() {
    let test = "the_agent_writes_kernel_truth_events_on_the_pod_and_the_node";
    let Some(n) = CniNode::new(test, "pe", 3) else {
        return;
    };
    // Pod c's sandbox leaked (no DEL); pod a's route points into pod b's namespace.
    n.node.ip(&[
        "route",
        "replace",
        &format!("{}/32", n.ip(0)),
        "dev",
        n.veth(1),
    ]);
    let api = ApiServer::start(Some(&n.node));
    api.apply(Res::Nodes, node(ME, &[]));
    api.apply(Res::Pods, pod("tenant", "a", ME, &[n.ip(0)]));
    api.apply(Res::Pods, pod("tenant", "b", ME, &[n.ip(1)]));
    let lab = Lab::new("kt", &api);
    // A leak is told only once it outlasts its grace (a forced deletion's teardown is none).
    let agent = lab.agent_with(&n.node, ME, &["--leak-grace-seconds", "10"]);
    agent.wait_ready(&n.node);
    let e = lab::wait_for("PodRouteMisdirected on pod a", ipshadow_tests::HANG, || {
        lab::event(&api, "tenant", "a", "PodRouteMisdirected")
    });

    assert_eq!(
        (e["type"].as_str(), e["involvedObject"]["kind"].as_str()),
        (Some("Warning"), Some("Pod"))
    );
    let msg = e["message"].as_str().unwrap();
    for needle in [n.ip(0), n.veth(1), "pod tenant/b", "Fix:"] {
        assert!(msg.contains(needle), "{needle:?} missing in {msg}");
    }
    let e = lab::wait_for(
        "LeakedSandboxAddress on the Node",
        ipshadow_tests::HANG,
        || lab::event(&api, "default", ME, "LeakedSandboxAddress"),
    );
    assert_eq!(e["involvedObject"]["kind"], "Node");
    // Told only once it outlasted its grace: the misdirected route was told at once.
    let at = |e: &Value| {
        e["eventTime"]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .unwrap()
    };
    let misdirected = lab::event(&api, "tenant", "a", "PodRouteMisdirected").unwrap();
    let waited = at(&e).duration_since(at(&misdirected));
    assert!(
        waited >= jiff::SignedDuration::from_secs(9),
        "the leak was told {waited:?} after the misdirected route, within its 10 s grace"
    );
    let msg = e["message"].as_str().unwrap();
    for needle in [n.ip(2), n.veth(2), "Fix:"] {
        assert!(msg.contains(needle), "{needle:?} missing in {msg}");
    }
    assert!(lab::event(&api, "tenant", "b", "PodRouteMisdirected").is_none());
}
