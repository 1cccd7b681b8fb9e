#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use serde_json::Value;

use super::*;
use crate::cni::plan::records_of;
use crate::cni::read::corpus;

/// A range as read: object, text, purpose, domain, what it leaves out.
type Row = (String, String, Purpose, Option<String>, Vec<String>);

/// Every item of a List the plan reads (by apiVersion and kind, as `audit`
/// dispatches files), as (object, text, purpose, domain, excluded).
fn read(text: &str) -> (Vec<Row>, usize) {
    let list: Value = serde_json::from_str(text).unwrap();
    let (mut out, mut bad) = (Vec::new(), Vec::new());
    for item in list["items"].as_array().unwrap() {
        let (api, kind) = (
            item["apiVersion"].as_str().unwrap(),
            item["kind"].as_str().unwrap(),
        );
        if let Some(Some(records)) = records_of(api, kind, None, item["metadata"]["name"].as_str())
        {
            out.extend((records.read)(&item.to_string(), &mut bad));
        }
    }
    let rows = out
        .into_iter()
        .map(|p| {
            let excluded = p.exclude.iter().map(ToString::to_string).collect();
            (p.owner.object, p.text, p.purpose, p.domain, excluded)
        })
        .collect();
    (rows, bad.len())
}

fn row(object: &str, text: &str, purpose: Purpose, domain: Option<&str>, excluded: &[&str]) -> Row {
    (
        object.to_owned(),
        text.to_owned(),
        purpose,
        domain.map(str::to_owned),
        excluded.iter().map(|s| (*s).to_owned()).collect(),
    )
}

#[test]
fn the_docs_ippools_are_secondary_ranges_on_their_vlan_without_their_gateway() {
    let (rows, bad) = read(&corpus!(
        "antrea/ippool-antrea-docs-v1beta1-range-cidr-ipv6-vlan.json"
    ));
    assert_eq!(bad, 0);
    assert_eq!(
        rows,
        [
            row(
                "pool1",
                "10.2.0.12-10.2.0.20",
                Purpose::Secondary,
                Some("VLAN 2"),
                &["10.2.0.1"]
            ),
            row(
                "ipv4-pool-1",
                "10.10.1.0/26",
                Purpose::Secondary,
                None,
                &["10.10.1.1"]
            ),
            row(
                "ipv6-pool-1",
                "3ffe:ffff:1:01ff::0100-3ffe:ffff:1:01ff::0200",
                Purpose::Secondary,
                None,
                &["3ffe:ffff:1:1ff::1"]
            ),
        ]
    );
}

#[test]
fn both_api_versions_of_the_cookbooks_pool_read_alike() {
    // v1alpha2 wrote the gateway into each range, v1beta1 into subnetInfo.
    for text in [
        corpus!("antrea/ippool-nad-antrea-cookbook-v1beta1-invalid-json-config.json"),
        corpus!("antrea/ippool-nad-antrea-cookbook-v1alpha2-invalid-json-config.json"),
    ] {
        let (rows, _) = read(&text);
        let pools: Vec<_> = rows
            .into_iter()
            .filter(|r| r.0 == "macvlan-ippool")
            .collect();
        assert_eq!(
            pools,
            [row(
                "macvlan-ippool",
                "192.168.78.200-192.168.78.250",
                Purpose::Secondary,
                None,
                &["192.168.78.1"]
            )]
        );
    }
}

#[test]
fn external_ip_pools_are_load_balancer_ranges_of_antrea() {
    let (rows, bad) = read(&corpus!("antrea/externalippool-antrea-docs.json"));
    assert_eq!(bad, 0);
    let texts: Vec<(&str, &str)> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(
        texts,
        [
            ("prod-external-ip-pool", "10.10.0.2-10.10.0.10"),
            ("prod-external-ip-pool", "10.10.1.0/28"),
            ("external-ip-pool", "10.10.0.11-10.10.0.20"),
            ("service-external-ip-pool", "10.10.0.2-10.10.0.10"),
        ]
    );
    assert!(
        rows.iter()
            .all(|r| r.2 == Purpose::LoadBalancer && r.3.is_none())
    );
}

#[test]
fn a_range_neither_cidr_nor_start_and_end_is_named_and_skipped() {
    let json = r#"{"apiVersion": "crd.antrea.io/v1beta1", "kind": "IPPool",
        "metadata": {"name": "odd"}, "spec": {"ipRanges": [{"end": "10.0.0.9"},
        {"cidr": "10.0.1.0/24"}], "subnetInfo": {"gateway": "10.0.1.1", "prefixLength": 24}}}"#;
    let mut bad = Vec::new();
    let read = (IP_POOLS.read)(json, &mut bad);
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].text, "10.0.1.0/24");
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].object, "odd");
}
