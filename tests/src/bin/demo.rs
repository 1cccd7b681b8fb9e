//! `cargo xtask demo`: a simulated node of the cozystack cluster (kube-ovn flat
//! pod CIDR, chained Cilium taking its router and Ingress IPs from the same
//! range), checked by the real `ipshadow` binary. Everything it creates is
//! removed at the end, on Ctrl-C, and on the next run if it was killed.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::process::ExitCode;

use ipshadow_tests::{
    ipshadow_bin,
    netns::delete_leftovers,
    node::SimNode,
    objects::{cilium_node, list, pending_pod, pod, subnet, with_pod_cidrs},
};

const TAG: &str = "demo";
const ME: &str = "node-a";
const OTHER: &str = "node-b";

fn main() -> ExitCode {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("the demo creates network namespaces: run it as root");
        return ExitCode::from(2);
    }
    let stale = delete_leftovers(TAG);
    if stale > 0 {
        println!("removed {stale} namespaces left by an interrupted demo");
    }
    if let Err(e) = ctrlc::set_handler(|| {
        let n = delete_leftovers(TAG);
        eprintln!("\ninterrupted: removed {n} demo namespaces");
        std::process::exit(130);
    }) {
        eprintln!(
            "warning: no Ctrl-C handler ({e}); an interrupted demo is cleaned up by the next run"
        );
    }

    println!(
        "== ipshadow demo: node {ME} of a kube-ovn + chained Cilium cluster (pod CIDR 10.244.0.0/16)"
    );
    println!(
        "   cilium_host carries the router IP 10.244.4.251; Cilium's Ingress IP is 10.244.4.12;"
    );
    println!(
        "   node {OTHER} holds 10.244.1.182 (router) and 10.244.1.12 (ingress). kube-ovn routes"
    );
    println!("   10.244.0.0/16 via ovn0 and knows nothing of either.\n");
    let mut sim = SimNode::kube_ovn(TAG, "10.244.4.251");
    sim.add_pod("10.244.0.35");
    sim.add_pod("10.244.4.251");
    sim.add_pod("10.244.1.182");
    sim.node
        .ip(&["route", "add", "blackhole", "10.244.0.99/32"]);

    let dir = std::env::temp_dir().join(format!("ipshadow-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pods = dir.join("pods.json");
    let cns = dir.join("ciliumnodes.json");
    let pods_json = list(vec![
        pod("tenant-a", "web-0", ME, &["10.244.0.35"]),
        pod("tenant-a", "postgres-0", ME, &["10.244.4.251"]),
        pending_pod("tenant-a", "gateway-0", ME, "10.244.4.12"),
        pod("tenant-b", "webhook-0", ME, &["10.244.1.182"]),
        pod("tenant-b", "cache-0", ME, &["10.244.1.12"]),
        pod("tenant-b", "stale-0", ME, &["10.244.0.99"]),
    ]);
    let cns_json = list(vec![
        with_pod_cidrs(
            cilium_node(ME, "10.244.4.251", Some("10.244.4.12"), None),
            &["10.244.4.0/24"],
        ),
        with_pod_cidrs(
            cilium_node(OTHER, "10.244.1.182", Some("10.244.1.12"), None),
            &["10.244.1.0/24"],
        ),
    ]);
    let subnets = dir.join("subnets.json");
    let subnets_json = list(vec![subnet(
        "ovn-default",
        "10.244.0.0/16",
        &["10.244.0.1"],
    )]);
    std::fs::write(&subnets, serde_json::to_vec_pretty(&subnets_json).unwrap()).unwrap();
    std::fs::write(&pods, serde_json::to_vec_pretty(&pods_json).unwrap()).unwrap();
    std::fs::write(&cns, serde_json::to_vec_pretty(&cns_json).unwrap()).unwrap();

    println!(
        "$ ipshadow check --node {ME} --pods pods.json --ciliumnodes ciliumnodes.json --subnets subnets.json\n"
    );
    let status = sim
        .node
        .command(ipshadow_bin().to_str().unwrap())
        .args(["check", "--node", ME, "--pods"])
        .arg(&pods)
        .arg("--ciliumnodes")
        .arg(&cns)
        .arg("--subnets")
        .arg(&subnets)
        .status()
        .unwrap();
    println!(
        "\n(exit {}: 0 clean, 1 findings, 2 error)",
        status.code().unwrap_or(-1)
    );
    let _ = std::fs::remove_dir_all(&dir);
    drop(sim);
    println!(
        "cleaned up: namespaces left with prefix ips-{TAG}: {}",
        delete_leftovers(TAG)
    );
    if status.code() == Some(1) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
