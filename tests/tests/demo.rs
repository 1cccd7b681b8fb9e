//! `cargo xtask demo`, run non-interactively: it shows every cozystack mode with
//! its Event and the eBPF counts, exits 0, and leaves no namespace, veth or
//! program behind.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::process::Command;

use ipshadow_tests::can_run_netns_tests;

fn programs_named(name: &str) -> usize {
    let out = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .matches(&format!("name {name} "))
        .count()
}

#[test]
fn the_demo_shows_every_mode_and_cleans_up_after_itself() {
    if !can_run_netns_tests("the_demo_shows_every_mode_and_cleans_up_after_itself") {
        return;
    }
    let before = programs_named("ipshadow_lo");
    let out = Command::new(env!("CARGO_BIN_EXE_ipshadow-demo"))
        .arg("--non-interactive")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "postgres-0 10.244.4.251:5432 -> connection refused",
        "web-0 10.244.0.35:80 -> ok",
        "Warning  RouterIPCollision",
        "Warning  HostTrafficBlackholed",
        "Warning  IngressIPCollision",
        "webhook-0    Warning   RouterIPCollision",
        "cache-0      Warning   IngressIPCollision",
        "stale-0      Warning   HostRouteBlackhole",
        "node-a       Warning   AllocatorOverlap",
        "Warning  IPAMMigrationStuck",
        "ipshadow_refused_connections_total{ip=\"10.244.4.251\",namespace=\"tenant-a\",pod=\"postgres-0\"} 5",
        "demo complete",
    ] {
        assert!(
            text.contains(needle),
            "{needle:?} missing from the demo's output:\n{text}"
        );
    }
    // Every Event note within README's bound ("Events"): 300 bytes of prose
    // (160 more for a lead on what breaks behind the pod), then one Fix:
    // sentence of at most 240.
    let sizes: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("note bytes: "))
        .collect();
    assert!(sizes.len() >= 7, "{text}");
    for line in sizes {
        let n: Vec<usize> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [_, prose, lead, fix] = n[..] else {
            panic!("{line}")
        };
        assert!(prose - lead <= 300 && lead <= 160 && fix <= 240, "{line}");
    }
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&netns.stdout);
    assert!(
        !left.contains("ips-demo"),
        "namespaces left behind:\n{left}"
    );
    assert_eq!(
        programs_named("ipshadow_lo"),
        before,
        "an eBPF program outlived the demo"
    );
}
