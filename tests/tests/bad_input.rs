//! Malformed objects (tests/corpus/bad-input, plus a 1 MiB annotation made
//! here): each is named in a warning, counted in
//! `ipshadow_invalid_objects_total`, and never stops or crashes the agent.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::path::PathBuf;

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    can_run_netns_tests, figure,
    http::sample,
    lab::ME,
    node::SimNode,
    objects::{pending_pod, write_list},
};
use serde_json::json;

fn corpus() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/bad-input");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_malformed_object_is_named_counted_and_survived() {
    if !can_run_netns_tests("every_malformed_object_is_named_counted_and_survived") {
        return;
    }
    let sim = SimNode::kube_ovn("bad", "10.244.4.251");
    let dir = ipshadow_tests::TempDir::new("bad");
    let empty = dir.join("empty.json");
    write_list(&empty, vec![]);
    // The megabyte annotation is made here rather than kept in git.
    let megabyte = dir.join("pods--pod-megabyte-annotation.json");
    let annotation = "9".repeat(1 << 20);
    let mut pod = pending_pod("tenant", "pod-megabyte-annotation", ME, "x");
    pod["metadata"]["annotations"]["ovn.kubernetes.io/ip_address"] = json!(annotation);
    write_list(&megabyte, vec![pod]);

    // Bounded work per object: lists far longer than any real object, each cap named.
    let thousand = dir.join("ciliumnodes--cn-thousand-addresses.json");
    let addresses: Vec<_> = (0..1000)
        .map(|i| json!({"type": "CiliumInternalIP", "ip": format!("10.250.{}.{}", i / 250, i % 250 + 1)}))
        .collect();
    write_list(
        &thousand,
        vec![json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                    "metadata": {"name": "cn-thousand-addresses"}, "spec": {"addresses": addresses}})],
    );
    let excludes = dir.join("subnets--subnet-ten-thousand-excludes.json");
    let many: Vec<String> = (0..10_000)
        .map(|i| format!("10.16.{}.{}", i / 250, i % 250 + 1))
        .collect();
    write_list(
        &excludes,
        vec![json!({"apiVersion": "kubeovn.io/v1", "kind": "Subnet",
                    "metadata": {"name": "subnet-ten-thousand-excludes"},
                    "spec": {"cidrBlock": "10.16.0.0/16", "excludeIps": many}})],
    );
    // One object twice in a file: warned about once.
    let twice = dir.join("pods--pod-listed-twice.json");
    let p = ipshadow_tests::objects::pod("tenant", "pod-listed-twice", ME, &["10.244.7.7"]);
    write_list(&twice, vec![p.clone(), p]);

    let mut cases = corpus();
    assert!(cases.len() >= 10, "the corpus is gone: {cases:?}");
    cases.extend([megabyte, thousand, excludes, twice]);
    let mut report = Vec::new();
    for file in &cases {
        let stem = file.file_stem().unwrap().to_str().unwrap();
        let (resource, object) = stem.split_once("--").unwrap();
        let (flag, pods) = match resource {
            "pods" => ("--pods", file),
            "ciliumnodes" => ("--ciliumnodes", &empty),
            "subnets" => ("--subnets", &empty),
            other => panic!("{stem}: unknown resource {other}"),
        };
        let mut args = vec![
            "--node",
            ME,
            "--ebpf",
            "off",
            "--pods",
            pods.to_str().unwrap(),
        ];
        if flag != "--pods" {
            args.extend([flag, file.to_str().unwrap()]);
        }
        let agent = AgentProc::spawn(&sim.node, &args);
        agent.wait_ready(&sim.node);
        let counted = AgentProc::wait_metrics(&sim.node, HANG, |m| {
            sample(
                m,
                "ipshadow_invalid_objects_total",
                &[("resource", resource)],
            )
            .is_some_and(|n| n >= 1.0)
        });
        let log = agent.log_text();
        assert!(counted.is_some(), "{stem}: not counted; log:\n{log}");
        let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
        let n = sample(
            &m,
            "ipshadow_invalid_objects_total",
            &[("resource", resource)],
        )
        .unwrap();
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains(object))
            .collect();
        assert!(
            !warnings.is_empty(),
            "{stem}: no warning names {object}; log:\n{log}"
        );
        // A megabyte of input is quoted back cut short.
        assert!(
            log.lines().all(|l| l.len() < 4096),
            "{stem}: a log line of {} bytes",
            log.lines().map(str::len).max().unwrap_or(0)
        );
        let (code, _) = AgentProc::get(&sim.node, "/healthz").unwrap();
        assert_eq!(code, 200, "{stem}");
        let (status, _) = agent.terminate();
        assert!(status.success(), "{stem}: {status:?}\n{log}");
        report.push(format!("{object} ({n})"));
    }
    figure(format!(
        "bad input: {} malformed objects, each warned about by name, counted and survived: {}",
        cases.len(),
        report.join(", ")
    ));
}
