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
    inventory::{
        ClusterState, CniNode, HostNetwork, Invalid, Inventory, IpSource, Pod, PodIp, Subnet,
    },
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
fn overlaps(node: &str, cns: Vec<CniNode>, subnets: Vec<Subnet>) -> Vec<ipshadow::detect::Finding> {
    let inv = Inventory {
        node: node.into(),
        router_device: "cilium_host".into(),
        host: Arc::new(HostNetwork::default()),
        cluster: ClusterState {
            cilium_nodes: Arc::new(cns),
            subnets: Arc::new(subnets),
            ..Default::default()
        },
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
            &serde_json::from_value(json!({"metadata": {"name": "pods"}, "spec": spec})).unwrap(),
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
        &serde_json::from_value(
            json!({"metadata": {"name": "pods"}, "spec": {"cidrBlock": "100.96.0.0/16"}}),
        )
        .unwrap(),
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
        cluster: ClusterState {
            cilium_nodes: Arc::new(cns.clone()),
            pods: Arc::new(pods),
            ..Default::default()
        },
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

/// kubelet's real message in `event-messages-sandbox-failures.json` that contains `needle`.
fn real_message(needle: &str) -> String {
    let v: Value = serde_json::from_slice(
        &std::fs::read(file("event-messages-sandbox-failures.json")).unwrap(),
    )
    .unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"].as_str().unwrap().to_owned())
        .find(|m| m.contains(needle))
        .unwrap()
}

/// The Event note and the long message of `f`, for the Node.
fn texts(f: &ipshadow::detect::Finding) -> [String; 2] {
    use ipshadow::report::message::{Reader, note, render};
    [note(f, Reader::Node, None), render(f)]
}

#[test]
fn a_kops_eni_node_out_of_addresses_is_told_to_check_the_operator_not_its_range() {
    // ddiiwoong's kops ENI CiliumNode, and kubelet's refusal from the same post.
    let mut problems = Vec::new();
    let cns = files::cilium_nodes(
        &file("ciliumnode-ddiiwoong-blog-kops-eni-partial.json"),
        &mut problems,
    )
    .unwrap();
    let node = cns[0].name.clone();
    let event = json!({
        "reason": "FailedCreatePodSandBox", "count": 85,
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-0"},
        "message": real_message("No more IPs availabl"),
    });
    let failure =
        ipshadow::kube::objects::sandbox_failure(&serde_json::from_value(event).unwrap()).unwrap();
    let pod = Pod {
        namespace: "default".into(),
        name: "web-0".into(),
        node: Some(node.clone()),
        phase: Some("Pending".into()),
        ..Pod::default()
    };
    let inv = Inventory {
        node: node.clone(),
        router_device: "cilium_host".into(),
        host: Arc::new(HostNetwork::default()),
        cluster: ClusterState {
            cilium_nodes: Arc::new(cns),
            pods: Arc::new(vec![pod]),
            sandbox: Arc::new(vec![failure]),
            ..Default::default()
        },
        ..Inventory::default()
    };
    let f = detect(&inv);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].kind, FindingKind::PodIpExhaustion);
    for text in texts(&f[0]) {
        assert!(text.contains("cilium-operator"), "{text}");
        for knob in [
            "--max-pods",
            "clusterPoolIPv4MaskSize",
            "node-cidr-mask-size",
        ] {
            assert!(!text.contains(knob), "{knob} in {text}");
        }
    }
}

#[test]
fn a_slash_23_cluster_pool_with_mask_24_on_three_nodes_is_full_and_said_so() {
    // Three nodes shaped like danny5487401's cluster-pool CiliumNode: two hold
    // the pool's two /24s, the third has none and the operator's error.
    let mut problems = Vec::new();
    let real = files::cilium_nodes(
        &file("ciliumnode-danny5487401-blog-clusterpool.json"),
        &mut problems,
    )
    .unwrap()
    .remove(0);
    assert_eq!(real.pod_cidrs, ["10.233.66.0/24".parse().unwrap()]);
    let mut cns: Vec<CniNode> = Vec::new();
    for (name, cidr) in [
        ("node1", Some("10.233.66.0/24")),
        ("node2", Some("10.233.67.0/24")),
        ("node3", None),
    ] {
        let mut cn = real.clone();
        cn.name = name.into();
        cn.pod_cidrs = cidr.iter().map(|c| c.parse().unwrap()).collect();
        if cidr.is_none() {
            cn.addresses.clear();
            cn.operator_error = Some("allocator full".into());
        }
        cns.push(cn);
    }
    let data = [
        ("ipam", "cluster-pool"),
        ("cluster-pool-ipv4-cidr", "10.233.66.0/23"),
        ("cluster-pool-ipv4-mask-size", "24"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let config = ipshadow::kube::objects::cilium_config(&data, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    let seen_from = |node: &str| {
        detect(&Inventory {
            node: node.into(),
            router_device: "cilium_host".into(),
            host: Arc::new(HostNetwork::default()),
            cluster: ClusterState {
                cilium_nodes: Arc::new(cns.clone()),
                cilium_config: Some(Arc::new(config.clone())),
                ..Default::default()
            },
            ..Inventory::default()
        })
    };
    let first = seen_from("node1");
    let kinds: Vec<FindingKind> = first.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::ClusterPoolNearlyFull]);
    let [note, long] = texts(&first[0]);
    assert!(
        note.contains("10.233.66.0/23 holds 2 node range(s) of /24 for 3 node(s)"),
        "{note}"
    );
    assert!(long.contains("cluster-pool-ipv4-cidr"), "{long}");
    assert!(seen_from("node2").is_empty());
    let third = seen_from("node3");
    let kinds: Vec<FindingKind> = third.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [FindingKind::CiliumIpamError]);
    let [note, long] = texts(&third[0]);
    assert!(note.contains("\"allocator full\""), "{note}");
    assert!(long.contains("holds 2 node range(s) of /24"), "{long}");
}
