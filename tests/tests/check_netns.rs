//! The real `ipshadow check` binary on a simulated kube-ovn + Cilium node.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::process::Output;

use ipshadow_tests::{
    can_run_netns_tests,
    check::{Files, check, find, findings},
    lab::{INGRESS, ME, OTHER, OTHER_INGRESS, OTHER_ROUTER, ROUTER},
    node::SimNode,
    objects::{cilium_node, list, pending_pod, pod, subnet, with_pod_cidrs},
};
use serde_json::Value;

/// `check` with a pods file and, if given, CiliumNodes and Subnets files.
fn check_files(
    sim: &SimNode,
    pods: &std::path::Path,
    cns: Option<&std::path::Path>,
    subnets: Option<&std::path::Path>,
) -> Output {
    let mut args = vec!["--pods", pods.to_str().unwrap()];
    if let Some(c) = cns {
        args.extend(["--ciliumnodes", c.to_str().unwrap()]);
    }
    if let Some(s) = subnets {
        args.extend(["--subnets", s.to_str().unwrap()]);
    }
    check(sim, &args)
}

#[test]
fn check_finds_every_cozystack_mode_on_a_simulated_node() {
    if !can_run_netns_tests("check_finds_every_cozystack_mode_on_a_simulated_node") {
        return;
    }
    let mut sim = SimNode::kube_ovn("chk", ROUTER);
    // Two real pods behind ovn0: a healthy one and one kube-ovn gave the router IP.
    sim.add_pod("10.244.0.35");
    sim.add_pod(ROUTER);
    // A stale host route that blackholes a third pod, and a /32 pod route
    // (Calico/Cilium style) shadowed by an address on kube-ipvs0.
    sim.node
        .ip(&["route", "add", "blackhole", "10.244.0.99/32"]);
    sim.node
        .ip(&["route", "add", "unreachable", "10.244.0.98/32"]);
    sim.node.ip(&["route", "add", "prohibit", "10.244.0.97/32"]);
    sim.node.add_veth("kube-ipvs0", "ipvs-peer");
    sim.node
        .ip(&["addr", "add", "10.244.0.50/32", "dev", "kube-ipvs0"]);
    sim.node
        .ip(&["route", "add", "10.244.0.50/32", "dev", "cilium_net"]);

    let files = Files::new("check");
    let pods = files.write(
        "pods.json",
        &list(vec![
            pod("tenant", "web-0", ME, &["10.244.0.35"]),
            pod("tenant", "postgres-0", ME, &[ROUTER]),
            pending_pod("tenant", "gateway-0", ME, INGRESS),
            pod("tenant", "api-0", ME, &[OTHER_ROUTER]),
            pod("tenant", "cache-0", ME, &[OTHER_INGRESS]),
            pod("tenant", "lost-0", ME, &["10.244.0.99"]),
            pod("tenant", "lost-1", ME, &["10.244.0.98"]),
            pod("tenant", "lost-2", ME, &["10.244.0.97"]),
            pod("tenant", "ipvs-0", ME, &["10.244.0.50"]),
            pod("tenant", "elsewhere-ok", OTHER, &["10.244.0.36"]),
        ]),
    );
    let cns = files.write(
        "ciliumnodes.json",
        &list(vec![
            cilium_node(ME, ROUTER, Some(INGRESS), None),
            cilium_node(OTHER, OTHER_ROUTER, Some(OTHER_INGRESS), None),
        ]),
    );
    let out = check_files(&sim, &pods, Some(&cns), None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fs = findings(&out);
    assert_eq!(fs.len(), 8, "{fs:#?}");

    let f = find(&fs, ROUTER);
    assert_eq!(
        (f["kind"].as_str(), f["scope"].as_str()),
        (Some("RouterIPCollision"), Some("same-node"))
    );
    assert_eq!(f["pod"]["name"], "postgres-0");
    assert_eq!(
        f["owner"],
        serde_json::json!({"node": ME, "role": "router", "device": "cilium_host", "source": "ciliumnode.spec.addresses"})
    );
    // No /32 for the pod in the main table (kube-ovn routes the /16): the kernel's
    // local-table answer is what shows the host never reaches this pod.
    assert_eq!(f["fib"], "local dev lo");

    let f = find(&fs, INGRESS);
    assert_eq!(
        (f["kind"].as_str(), f["scope"].as_str()),
        (Some("IngressIPCollision"), Some("same-node"))
    );
    // From files there is no kube-ovn record to confirm it: the finding says what it rests on.
    assert_eq!(f["ip_source"], "annotation");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("rests on the pod's IP annotation alone"),
        "{f:#}"
    );
    assert_eq!(f["ip_source"], "annotation");
    assert_eq!(f["owner"]["device"], Value::Null);

    let f = find(&fs, OTHER_ROUTER);
    assert_eq!(
        (f["kind"].as_str(), f["scope"].as_str()),
        (Some("RouterIPCollision"), Some("cross-node"))
    );
    assert_eq!(f["owner"]["node"], OTHER);
    assert!(f["fib"].as_str().unwrap().contains("dev ovn0"), "{f:#}");

    let f = find(&fs, OTHER_INGRESS);
    assert_eq!(
        (f["kind"].as_str(), f["scope"].as_str()),
        (Some("IngressIPCollision"), Some("cross-node"))
    );

    for (ip, word) in [
        ("10.244.0.99", "blackhole"),
        ("10.244.0.98", "unreachable"),
        ("10.244.0.97", "prohibit"),
    ] {
        let f = find(&fs, ip);
        assert_eq!(f["kind"], "HostRouteBlackhole", "{f:#}");
        assert_eq!(f["fib"], word, "{f:#}");
    }

    let f = find(&fs, "10.244.0.50");
    assert_eq!(f["kind"], "LocalAddressCollision");
    assert_eq!(f["owner"]["device"], "kube-ipvs0");
    assert_eq!(f["shadowed_route"], "10.244.0.50/32 dev cilium_net");
}

#[test]
fn a_local_route_without_an_address_is_found_only_through_the_fib_lookup() {
    if !can_run_netns_tests("a_local_route_without_an_address_is_found_only_through_the_fib_lookup")
    {
        return;
    }
    let sim = SimNode::kube_ovn("fib", ROUTER);
    // A whole range routed locally (as a TPROXY or anycast setup does): no device
    // holds 10.244.7.7, no CiliumNode names it; only the FIB says "local".
    sim.node.ip(&[
        "route",
        "add",
        "local",
        "10.244.7.0/24",
        "dev",
        "cilium_host",
        "table",
        "local",
    ]);
    let files = Files::new("fib");
    let pods = files.write(
        "pods.json",
        &list(vec![pod("tenant", "anycast-0", ME, &["10.244.7.7"])]),
    );
    let out = check_files(&sim, &pods, None, None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fs = findings(&out);
    assert_eq!(fs.len(), 1, "{fs:#?}");
    assert_eq!(fs[0]["kind"], "RouterIPCollision");
    assert_eq!(fs[0]["owner"]["device"], "cilium_host");
    assert!(
        fs[0]["fib"].as_str().unwrap().starts_with("local"),
        "{:#}",
        fs[0]
    );
}

#[test]
fn a_clean_node_exits_zero_and_bad_input_exits_two_naming_the_file() {
    if !can_run_netns_tests("a_clean_node_exits_zero_and_bad_input_exits_two_naming_the_file") {
        return;
    }
    let sim = SimNode::kube_ovn("cln", ROUTER);
    let files = Files::new("clean");
    let pods = files.write(
        "pods.json",
        &list(vec![pod("tenant", "web-0", ME, &["10.244.0.35"])]),
    );
    let cns = files.write(
        "cns.json",
        &list(vec![cilium_node(ME, ROUTER, Some(INGRESS), None)]),
    );
    let out = check_files(&sim, &pods, Some(&cns), None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(findings(&out).is_empty());

    let broken = files.path("broken.json");
    std::fs::write(&broken, "{\"items\": [").unwrap();
    let out = check_files(&sim, &broken, None, None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("broken.json") && err.contains("kubectl get pods -o json"),
        "{err}"
    );

    // A malformed CiliumNode field is skipped with a warning naming it; the rest still works.
    let bad_cn = files.write(
        "bad-cn.json",
        &list(vec![serde_json::json!({
            "metadata": {"name": ME},
            "spec": {"addresses": [{"type": "CiliumInternalIP", "ip": "ten.two.four"}], "ingress": {"ipv4": INGRESS}}
        })]),
    );
    let pods = files.write(
        "pods2.json",
        &list(vec![pod("tenant", "gw", ME, &[INGRESS])]),
    );
    let out = check_files(&sim, &pods, Some(&bad_cn), None);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node-a") && err.contains("ten.two.four"),
        "{err}"
    );
    assert_eq!(findings(&out)[0]["kind"], "IngressIPCollision");
}

#[test]
fn allocator_overlap_is_reported_from_a_subnets_file_and_gone_once_excluded() {
    if !can_run_netns_tests(
        "allocator_overlap_is_reported_from_a_subnets_file_and_gone_once_excluded",
    ) {
        return;
    }
    let sim = SimNode::kube_ovn("ovl", ROUTER);
    let files = Files::new("overlap");
    let pods = files.write(
        "pods.json",
        &list(vec![pod("tenant", "web-0", ME, &["10.244.0.35"])]),
    );
    let cns = files.write(
        "cns.json",
        &list(vec![with_pod_cidrs(
            cilium_node(ME, ROUTER, Some(INGRESS), None),
            &["10.244.4.0/24"],
        )]),
    );
    let cozystack = files.write(
        "subnets.json",
        &list(vec![subnet(
            "ovn-default",
            "10.244.0.0/16",
            &["10.244.0.1"],
        )]),
    );
    let out = check_files(&sim, &pods, Some(&cns), Some(&cozystack));
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One finding for the one range and Subnet, listing both addresses.
    let fs = findings(&out);
    assert_eq!(fs.len(), 1, "{fs:#?}");
    for f in &fs {
        assert_eq!(f["kind"], "AllocatorOverlap");
        assert_eq!(f["pod"], Value::Null);
        assert_eq!(f["subnet"], "ovn-default");
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .contains("10.244.4.0..10.244.4.255"),
            "{f:#}"
        );
    }
    let f = find(&fs, ROUTER);
    assert_eq!(f["owner"]["role"], "router");
    assert_eq!(
        f["addresses"],
        serde_json::json!([
            {"ip": ROUTER, "role": "router", "source": "ciliumnode.spec.addresses"},
            {"ip": INGRESS, "role": "ingress", "source": "ciliumnode.spec.ingress"},
        ]),
        "{f:#}"
    );

    let fixed = files.write(
        "fixed.json",
        &list(vec![subnet(
            "ovn-default",
            "10.244.0.0/16",
            &["10.244.0.1", "10.244.4.0..10.244.4.255"],
        )]),
    );
    let out = check_files(&sim, &pods, Some(&cns), Some(&fixed));
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
