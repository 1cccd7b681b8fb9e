//! Antrea's two allocators in `audit`'s address plan, added by the recipe
//! "Adding an allocator's ranges", on Antrea's own published objects
//! (tests/corpus/realworld/antrea/): its IPPools, whose webhook never checks
//! one pool against another (antrea#7306), and its ExternalIPPools, which
//! Antrea's docs put on the very range of a MetalLB pool of the same page.
//! Each overlap names both objects and the fix in that allocator's own terms.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::collections::BTreeSet;

use ipshadow_tests::{
    ipshadow_bin,
    objects::{node, write_list},
};
use serde_json::{Value, json};

fn real(file: &str) -> Vec<Value> {
    let path = format!(
        "{}/corpus/realworld/antrea/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["items"].as_array().unwrap().clone()
}

fn named<'a>(items: &'a [Value], name: &str) -> &'a Value {
    items
        .iter()
        .find(|i| i["metadata"]["name"] == name)
        .unwrap()
}

/// `audit` of two Nodes (InternalIPs `internal`) and `plan`, from files, as JSON.
fn audit(internal: [&str; 2], plan: &[Value]) -> (Option<i32>, Value) {
    let dir = ipshadow_tests::TempDir::new("address-plan-antrea");
    let nodes: Vec<Value> = ["worker-a", "worker-b"]
        .iter()
        .zip(internal)
        .enumerate()
        .map(|(i, (name, ip))| {
            let mut n = node(name, &[&format!("10.244.{i}.0/24")]);
            n["status"] = json!({"addresses": [{"type": "InternalIP", "address": ip}]});
            n
        })
        .collect();
    write_list(&dir.join("nodes.json"), nodes);
    write_list(&dir.join("pods.json"), Vec::<Value>::new());
    write_list(&dir.join("plan.json"), plan);
    let path = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    let out = std::process::Command::new(ipshadow_bin())
        .args([
            "audit",
            "--nodes",
            &path("nodes.json"),
            "--pods",
            &path("pods.json"),
        ])
        .args(["--address-plan", &path("plan.json"), "-o", "json"])
        .output()
        .unwrap();
    (out.status.code(), ipshadow_tests::json_stdout(&out))
}

/// (object to change, other object, shared) of each overlap, and its message.
fn overlaps(v: &Value) -> BTreeSet<([String; 3], String)> {
    let s = |v: &Value| v.as_str().unwrap().to_owned();
    v["address_plan"]["overlaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let side = |x: &Value| format!("{} {}", s(&x["kind"]), s(&x["object"]));
            (
                [side(&o["change"]), side(&o["other"]), s(&o["shared"])],
                s(&o["message"]),
            )
        })
        .collect()
}

#[test]
fn antreas_pools_beside_each_other_and_the_nodes_give_nothing() {
    let mut plan = real("ippool-antrea-docs-v1beta1-range-cidr-ipv6-vlan.json");
    plan.extend(real("externalippool-antrea-docs.json").into_iter().take(2));
    let (code, v) = audit(["192.168.1.10", "192.168.1.11"], &plan);
    assert_eq!(overlaps(&v), BTreeSet::new(), "{v:#}");
    // 3 IPPools, 3 ranges of 2 ExternalIPPools, 2 podCIDRs, 2 addresses.
    assert_eq!(v["address_plan"]["ranges_checked"], 10, "{v:#}");
    assert_eq!(code, Some(0));
}

#[test]
fn two_ippools_a_pool_over_metallbs_and_a_pool_over_a_node_are_found_with_antreas_fixes() {
    let pools = real("ippool-antrea-docs-v1beta1-range-cidr-ipv6-vlan.json");
    let external = real("externalippool-antrea-docs.json");
    // A second pool on the first's addresses, as in antrea#7306; pool1's
    // range on VLAN 2 is its own network, and overlapping it is no finding.
    let mut second = named(&pools, "ipv4-pool-1").clone();
    second["metadata"]["name"] = json!("ipv4-pool-2");
    second["spec"]["ipRanges"] =
        json!([{"cidr": "10.10.1.32/27"}, {"start": "10.2.0.14", "end": "10.2.0.16"}]);
    // The MetalLB pool of Antrea's own page, on service-external-ip-pool's range.
    let metallb = json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": "first-pool", "namespace": "metallb-system"},
        "spec": {"addresses": ["10.10.0.2-10.10.0.10"]}});
    let plan = vec![
        named(&pools, "ipv4-pool-1").clone(),
        named(&pools, "pool1").clone(),
        second,
        named(&external, "service-external-ip-pool").clone(),
        named(&external, "external-ip-pool").clone(),
        metallb,
    ];
    // worker-b's InternalIP inside external-ip-pool.
    let (code, v) = audit(["192.168.1.10", "10.10.0.15"], &plan);
    let found = overlaps(&v);
    let sides: BTreeSet<[String; 3]> = found.iter().map(|(s, _)| s.clone()).collect();
    let want: BTreeSet<[String; 3]> = [
        [
            "IPPool ipv4-pool-1",
            "IPPool ipv4-pool-2",
            "10.10.1.32..10.10.1.63",
        ],
        [
            "ExternalIPPool external-ip-pool",
            "Node worker-b",
            "10.10.0.15",
        ],
        [
            "ExternalIPPool service-external-ip-pool",
            "IPAddressPool metallb-system/first-pool",
            "10.10.0.2..10.10.0.10",
        ],
    ]
    .into_iter()
    .map(|r| r.map(str::to_owned))
    .collect();
    assert_eq!(sides, want, "{v:#}");
    for (side, message) in &found {
        assert!(!message.contains("Calico"), "{message}");
        if side[0].starts_with("IPPool ") {
            assert!(
                message.contains("Antrea IPPool's existing ipRanges"),
                "{message}"
            );
        }
        if side[0] == "ExternalIPPool external-ip-pool" {
            assert!(message.contains("node worker-b's own address"), "{message}");
        }
    }
    assert_eq!(code, Some(1));
}
