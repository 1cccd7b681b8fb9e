//! Real objects from public sources (`tests/corpus/realworld`, copied from
//! shared/realworld with its PROVENANCE.md), read by the agent's own readers:
//! every one is read, only the two published malformed Subnets warn, and the
//! overlaps of real Subnets and pod CIDRs are what they are. Here, in the agent
//! crate, so a plain `cargo test` runs them; what needs root (the binary in a
//! network namespace, on the same corpus) is tests/tests/realworld.rs.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use ipshadow::{
    detect::{FindingKind, detect},
    inventory::{CiliumNode, HostNetwork, Invalid, Inventory, IpSource, Pod, PodIp, Subnet},
    kube::files,
};
use serde_json::{Value, json};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/realworld")
}

fn file(name: &str) -> PathBuf {
    corpus().join(name)
}

#[test]
fn every_real_object_is_read_and_only_the_two_malformed_subnets_warn() {
    let mut problems: Vec<Invalid> = Vec::new();
    let mut read_objects = 0;
    let mut names: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    names.sort();
    let keys = vec!["ovn.kubernetes.io/ip_address".to_owned()];
    for path in &names {
        let name = path.file_name().unwrap().to_str().unwrap();
        read_objects += if name.starts_with("ciliumnode-") {
            files::cilium_nodes(path, &mut problems).unwrap().len()
        } else if name.starts_with("subnet-") {
            files::subnets(path, &mut problems).unwrap().len()
        } else if name.starts_with("pod-") {
            files::pods(path, &keys, &mut problems).unwrap().len()
        } else {
            assert_eq!(
                name, "event-messages-sandbox-failures.json",
                "a file nobody reads"
            );
            0
        };
    }
    let got: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with("subnets subnet-secondary: spec.cidrBlock is missing"),
        "{got:#?}"
    );
    assert!(
        got[1]
            .starts_with("subnets service-subnet-dual: spec.cidrBlock is missing or not a string"),
        "{got:#?}"
    );
    // 19 CiliumNodes + 14 usable Subnets + 18 Pods.
    assert_eq!(read_objects, 19 + 14 + 18);
}

#[test]
fn secondary_network_subnets_are_read_as_such() {
    let mut problems = Vec::new();
    for (name, primary) in [
        ("subnet-kubeovn-docs-ovn-default-kubectl-get.json", true),
        ("subnet-kubeovn-docs-kubevirt-dhcp-dual-240e.json", true),
        ("subnet-kubeovn-docs-macvlan-provider.json", false),
        ("subnet-kubeovn-docs-attachnet-ovn-provider.json", false),
        ("subnet-kubeovn-e2e-nonprimary-vpc-simple.json", false),
    ] {
        let s = files::subnets(&file(name), &mut problems).unwrap();
        assert_eq!(s[0].primary, primary, "{name}");
    }
    assert!(problems.is_empty(), "{problems:?}");
}

/// Detection from `node`'s point of view with these CiliumNodes and Subnets and no pods.
fn overlaps(
    node: &str,
    cns: Vec<CiliumNode>,
    subnets: Vec<Subnet>,
) -> Vec<ipshadow::detect::Finding> {
    let inv = Inventory {
        node: node.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(HostNetwork::default()),
        cilium_nodes: Arc::new(cns),
        subnets: Arc::new(subnets),
        ..Inventory::default()
    };
    detect(&inv)
        .into_iter()
        .filter(|f| f.kind == FindingKind::AllocatorOverlap)
        .collect()
}

#[test]
fn a_multi_pool_cidr_inside_a_primary_subnet_is_an_overlap_and_a_secondary_one_is_not() {
    let mut problems = Vec::new();
    let cns = files::cilium_nodes(
        &file("ciliumnode-cilium-operator-multipool-after-migration.json"),
        &mut problems,
    )
    .unwrap();
    assert_eq!(cns[0].pool_cidrs.len(), 2, "{cns:?}");
    let subnet = |provider: Option<&str>, exclude: &[&str]| {
        let mut spec = json!({"cidrBlock": "10.244.0.0/16,fd00::/120", "excludeIps": exclude});
        if let Some(p) = provider {
            spec["provider"] = Value::from(p);
        }
        let mut problems = Vec::new();
        let s = ipshadow::kube::objects::subnet(
            &json!({"metadata": {"name": "pods"}, "spec": spec}),
            &mut problems,
        )
        .unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        s
    };
    let found = overlaps("node-a", cns.clone(), vec![subnet(None, &[])]);
    assert!(
        found.iter().any(|f| f.ip_text().starts_with("10.244.1.")),
        "{found:#?}"
    );
    assert!(
        overlaps(
            "node-a",
            cns.clone(),
            vec![subnet(Some("macvlan.default"), &[])]
        )
        .is_empty()
    );
    assert!(
        overlaps(
            "node-a",
            cns.clone(),
            vec![subnet(Some("attach.default.ovn"), &[])]
        )
        .is_empty()
    );
    // The fixed layout: every pool CIDR excluded.
    let fixed = subnet(None, &["10.244.1.0..10.244.2.255", "fd00::..fd00::1f"]);
    assert!(overlaps("node-a", cns, vec![fixed]).is_empty());
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn crd_style_pod_cidrs_claim_no_overlap() {
    // ENI: podCIDRs 100.96.2.0/24 is filled but meaningless (cilium/cilium#9409).
    let mut problems = Vec::new();
    let cns = files::cilium_nodes(
        &file("ciliumnode-ddiiwoong-blog-kops-eni-partial.json"),
        &mut problems,
    )
    .unwrap();
    assert!(cns[0].pod_cidrs.is_empty(), "{:?}", cns[0]);
    let s = ipshadow::kube::objects::subnet(
        &json!({"metadata": {"name": "pods"}, "spec": {"cidrBlock": "100.96.0.0/16"}}),
        &mut problems,
    )
    .unwrap();
    assert!(overlaps(&cns[0].name, cns.clone(), vec![s]).is_empty());
}

#[test]
fn a_terminating_pod_on_a_router_ip_gives_no_new_finding() {
    // The Calico pod stuck Terminating (kubernetes#93925), as its node's pod on
    // a real kind node's router IP: a finding while it lives, none once deleted.
    let mut problems = Vec::new();
    let keys = vec!["ovn.kubernetes.io/ip_address".to_owned()];
    let path = file("pod-k8s-issue93925-calico-terminating-partial.json");
    let mut pods = files::pods(&path, &keys, &mut problems).unwrap();
    assert!(pods[0].terminating, "{:?}", pods[0]);
    let node = "cilium-nodes-worker";
    pods[0].node = Some(node.to_owned());
    pods[0].phase = Some("Running".to_owned());
    pods[0].ips = vec![PodIp {
        ip: "10.244.1.151".parse().unwrap(),
        source: IpSource::Status,
    }];
    let cns = files::cilium_nodes(
        &file("ciliumnode-cilium-controlplane-nodes-kind-v1.27.json"),
        &mut problems,
    )
    .unwrap();
    let inventory = |pods: Vec<Pod>| Inventory {
        node: node.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(HostNetwork::default()),
        cilium_nodes: Arc::new(cns.clone()),
        pods: Arc::new(pods),
        ..Inventory::default()
    };
    let kinds = |inv: &Inventory| detect(inv).iter().map(|f| f.kind).collect::<Vec<_>>();
    assert_eq!(kinds(&inventory(pods.clone())), Vec::<FindingKind>::new());
    pods[0].terminating = false;
    assert_eq!(
        kinds(&inventory(pods)),
        vec![FindingKind::RouterIpCollision]
    );
}
