#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use serde_json::{Value, json};

use super::super::tests::{nad, read_one, v, views, whereabouts};

#[test]
fn whereabouts_readme_configs_give_their_ranges_in_order() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/realworld/multus/cni-configs-whereabouts-readme.json"
    ))
    .unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    let configs = file["configs"].as_array().unwrap();
    let s = Some("whereabouts ");
    let (v4a, v4b) = (
        ["192.168.10.0", "192.168.10.255"],
        ["176.168.0.0", "176.168.255.255"],
    );
    let v6 = ["abcd::", "abcd::ffff:ffff:ffff:ffff"];
    let table = [
        vec![v(
            "192.168.2.224..192.168.2.239",
            "eth0",
            &[
                "192.168.2.228..192.168.2.231",
                "192.168.2.236",
                "192.168.2.224",
                "192.168.2.239",
            ],
            s,
        )],
        vec![v("2001::..2001::fff", "eth0", &["2001::", "2001::fff"], s)],
        vec![
            v("192.168.10.0..192.168.10.255", "eth0", &v4a, s),
            v("176.168.0.0..176.168.255.255", "eth0", &v4b, s),
        ],
        vec![
            v("abcd::..abcd::ffff:ffff:ffff:ffff", "eth0", &v6, s),
            v("192.168.10.0..192.168.10.255", "eth0", &v4a, s),
            v("176.168.0.0..176.168.255.255", "eth0", &v4b, s),
        ],
        vec![
            v("192.168.10.0..192.168.10.255", "eth0", &v4a, s),
            v("abcd::..abcd::ffff:ffff:ffff:ffff", "eth0", &v6, s),
        ],
    ];
    assert_eq!(configs.len(), table.len());
    for (c, want) in configs.iter().zip(table) {
        let (out, invalid) = read_one(&nad(&c["config"]));
        assert!(invalid.is_empty(), "{}: {invalid:?}", c["what"]);
        assert_eq!(views(&out), want, "{}", c["what"]);
    }
}

#[test]
fn whereabouts_first_ip_dash_cidr_runs_from_the_first_to_the_end_ip() {
    let (out, _) = read_one(&nad(&whereabouts(
        &json!({"type": "whereabouts", "range": "192.168.2.225-192.168.2.230/28"}),
    )));
    assert_eq!(
        views(&out),
        [v(
            "192.168.2.225..192.168.2.230",
            "eth0",
            &[],
            Some("whereabouts ")
        )]
    );
    assert_eq!(out[0].text, "192.168.2.225-192.168.2.230/28");
}

#[test]
fn whereabouts_range_start_and_end_narrow_the_range_and_outside_ones_are_ignored() {
    let ipam = json!({"type": "whereabouts", "range": "10.0.0.0/24", "range_start": "10.0.0.10", "range_end": "10.0.0.20"});
    let (out, _) = read_one(&nad(&whereabouts(&ipam)));
    assert_eq!(
        views(&out),
        [v("10.0.0.10..10.0.0.20", "eth0", &[], Some("whereabouts "))]
    );
    assert_eq!(out[0].text, "10.0.0.0/24 from 10.0.0.10 to 10.0.0.20");
    let ipam = json!({"type": "whereabouts", "range": "10.0.0.0/24", "range_start": "10.1.0.10"});
    let (out, _) = read_one(&nad(&whereabouts(&ipam)));
    assert_eq!(out[0].range.to_string(), "10.0.0.0..10.0.0.255");
}

#[test]
fn whereabouts_shares_by_network_name_or_by_pool_without_overlapping_ranges() {
    let on = json!({"type": "whereabouts", "range": "10.0.0.0/24", "network_name": "blue"});
    let off = json!({"type": "whereabouts", "range": "10.0.0.7/24", "network_name": "blue", "enable_overlapping_ranges": false});
    let (on, _) = read_one(&nad(&whereabouts(&on)));
    let (off, _) = read_one(&nad(&whereabouts(&off)));
    assert_eq!(on[0].shared.as_deref(), Some("whereabouts blue"));
    assert_eq!(
        off[0].shared.as_deref(),
        Some("whereabouts blue 10.0.0.0/24")
    );
}

#[test]
fn a_bad_cidr_among_good_ones_is_named_and_the_rest_read() {
    let ipam = json!({"type": "whereabouts", "ipRanges": [{"range": "10.1.0.0/24"}, {"range": "10.2.300.0/24"}, {"range": "10.3.0.0/24"}]});
    let (out, invalid) = read_one(&nad(&whereabouts(&ipam)));
    let ranges: Vec<_> = out.iter().map(|p| p.range.to_string()).collect();
    assert_eq!(ranges, ["10.1.0.0..10.1.0.255", "10.3.0.0..10.3.0.255"]);
    assert_eq!(invalid.len(), 1, "{invalid:?}");
    assert_eq!(
        (invalid[0].resource, invalid[0].object.as_str()),
        ("network-attachment-definitions", "ns/net")
    );
    let problem = &invalid[0].problem;
    assert!(
        problem.contains("ipam.ipRanges")
            && problem.contains("10.2.300.0/24")
            && problem.contains("not checked"),
        "{problem}"
    );
}

#[test]
fn host_local_refuses_a_subnet_with_host_bits() {
    let (out, invalid) = read_one(&nad(
        &json!({"type": "bridge", "ipam": {"type": "host-local", "subnet": "10.0.0.1/24"}}),
    ));
    assert!(out.is_empty());
    assert_eq!(invalid.len(), 1, "{invalid:?}");
    assert!(invalid[0].problem.contains("host bits"), "{invalid:?}");
}

#[test]
fn host_local_bounds_outside_the_subnet_or_reversed_are_named() {
    let ranges = json!([
        [{"subnet": "10.0.0.0/24", "rangeStart": "10.0.1.5"}],
        [{"subnet": "10.0.2.0/24", "rangeStart": "10.0.2.9", "rangeEnd": "10.0.2.8"}],
        [{"subnet": "10.0.3.0/24", "rangeEnd": "10.0.3.9"}],
    ]);
    let config = json!({"type": "bridge", "ipam": {"type": "host-local", "ranges": ranges}});
    let (out, invalid) = read_one(&nad(&config));
    let ranges: Vec<_> = out.iter().map(|p| p.range.to_string()).collect();
    assert_eq!(ranges, ["10.0.3.0..10.0.3.9"]);
    let problems: Vec<_> = invalid.iter().map(|i| i.problem.as_str()).collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("rangeStart \"10.0.1.5\""),
        "{problems:?}"
    );
    assert!(problems[1].contains("after its rangeEnd"), "{problems:?}");
}
