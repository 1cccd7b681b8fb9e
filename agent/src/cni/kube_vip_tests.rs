#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use serde_json::{Value, json};

use super::*;

/// The one ConfigMap of a corpus List, as JSON.
fn corpus(file: &str) -> String {
    let path = format!(
        "{}/../tests/corpus/realworld/kube-vip/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let list: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    list["items"][0].to_string()
}

fn read_one(json: &str) -> (Vec<Planned>, Vec<Invalid>) {
    let mut invalid = Vec::new();
    let out = (CONFIG.read)(json, &mut invalid);
    (out, invalid)
}

/// (text, addresses) of each range, in the order read (keys sorted).
fn views(ps: &[Planned]) -> Vec<(String, String)> {
    ps.iter()
        .map(|p| (p.text.clone(), p.range.to_string()))
        .collect()
}

fn want(rows: &[(&str, &str)]) -> Vec<(String, String)> {
    rows.iter()
        .map(|(t, r)| ((*t).to_owned(), (*r).to_owned()))
        .collect()
}

fn kubevip(data: &Value) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "kubevip", "namespace": "kube-system"}, "data": data})
    .to_string()
}

#[test]
fn the_websites_map_gives_each_namespaces_pools_and_the_global_one_host_bits_masked() {
    let (out, invalid) = read_one(&corpus(
        "configmap-kubevip-website-cloud-provider-cidr-range-global.json",
    ));
    assert_eq!(invalid, []);
    assert_eq!(
        views(&out),
        want(&[
            (
                "cidr-default 192.168.0.200/29",
                "192.168.0.200..192.168.0.207"
            ),
            (
                "cidr-finance 192.168.0.220/29",
                "192.168.0.216..192.168.0.223"
            ),
            (
                "cidr-finance 192.168.0.230/29",
                "192.168.0.224..192.168.0.231"
            ),
            (
                "cidr-global 192.168.0.240/29",
                "192.168.0.240..192.168.0.247"
            ),
            (
                "range-development 192.168.0.210-192.168.0.219",
                "192.168.0.210..192.168.0.219"
            ),
        ])
    );
    let p = &out[0];
    assert_eq!(
        (p.owner.allocator, p.owner.kind, p.owner.object.as_str()),
        ("kube-vip", "ConfigMap", "kube-system/kubevip")
    );
    assert_eq!((p.owner.field, p.purpose), ("data", Purpose::LoadBalancer));
    // Every address handed out, the ends too, unless told otherwise.
    assert!(out.iter().all(|p| p.exclude.is_empty()));
}

#[test]
fn the_readmes_map_reads_an_ipv6_namespaces_pool_beside_the_ipv4_ones() {
    let (out, invalid) = read_one(&corpus(
        "configmap-kubevip-cloud-provider-readme-namespaces-ipv6.json",
    ));
    assert_eq!(invalid, []);
    assert_eq!(
        views(&out),
        want(&[
            (
                "cidr-default 192.168.0.200/29",
                "192.168.0.200..192.168.0.207"
            ),
            (
                "cidr-development 192.168.0.210/29",
                "192.168.0.208..192.168.0.215"
            ),
            (
                "cidr-finance 192.168.0.220/29",
                "192.168.0.216..192.168.0.223"
            ),
            ("cidr-ipv6 2001::10/127", "2001::10..2001::11"),
            (
                "cidr-testing 192.168.0.230/29",
                "192.168.0.224..192.168.0.231"
            ),
        ])
    );
}

#[test]
fn unquoted_booleans_are_one_invalid_entry_and_the_pools_beside_them_are_read() {
    let (out, invalid) = read_one(&corpus(
        "configmap-kubevip-cloud-provider-example-unquoted-bools-invalid.json",
    ));
    assert_eq!(invalid.len(), 1, "{invalid:?}");
    assert_eq!(invalid[0].object, "kube-system/kubevip");
    assert!(
        invalid[0]
            .problem
            .contains("allow-share-global, allow-share-plunder not strings"),
        "{}",
        invalid[0].problem
    );
    assert_eq!(out.len(), 3);
}

#[test]
fn a_redacted_range_and_an_entry_with_a_space_are_invalid_and_the_rest_is_read() {
    let (out, invalid) = read_one(&kubevip(&json!({
        "range-global": "321.321.321.218-321.321.321.222",
        "cidr-prod": "10.0.0.0/30, 10.0.1.0/30,10.0.2.0/30",
        "cidr-lab": "0.0.0.0/32",
        "range-dev": "10.0.3.0/30",
    })));
    let problems: Vec<&str> = invalid.iter().map(|i| i.problem.as_str()).collect();
    assert_eq!(
        problems,
        [
            "data cidr-prod \" 10.0.1.0/30\" is no CIDR: it is not checked",
            "data range-dev \"10.0.3.0/30\" is no first-last range: it is not checked",
            "data range-global \"321.321.321.218-321.321.321.222\" is no first-last range: it \
             is not checked",
        ]
    );
    // DHCP's 0.0.0.0/32 is no range, and no mistake.
    assert_eq!(
        views(&out),
        want(&[
            ("cidr-prod 10.0.0.0/30", "10.0.0.0..10.0.0.3"),
            ("cidr-prod 10.0.2.0/30", "10.0.2.0..10.0.2.3"),
        ])
    );
}

#[test]
fn skip_end_ips_in_cidr_leaves_out_an_ipv4_cidrs_ends_and_no_ranges() {
    let (out, _) = read_one(&kubevip(&json!({
        "skip-end-ips-in-cidr": "true",
        "cidr-global": "10.0.0.0/29",
        "range-global": "10.0.1.0-10.0.1.7",
    })));
    let excluded: Vec<Vec<String>> = out
        .iter()
        .map(|p| p.exclude.iter().map(ToString::to_string).collect())
        .collect();
    assert_eq!(excluded, [vec!["10.0.0.0", "10.0.0.7"], vec![]]);
}

#[test]
fn only_kube_systems_kubevip_is_selected() {
    assert!(CONFIG.selects(Some("kube-system"), Some("kubevip")));
    assert!(!CONFIG.selects(Some("kube-system"), Some("cilium-config")));
    assert!(!CONFIG.selects(Some("default"), Some("kubevip")));
    assert!(!CONFIG.selects(None, Some("kubevip")));
}
