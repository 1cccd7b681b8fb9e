//! The traffic counter families: one series per traffic series, or, without
//! the pods' names, per address.

use std::{collections::BTreeMap, net::IpAddr};

use prometheus_client::{
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{MetricType, counter::ConstCounter},
};

use super::{FindingsView, Names};
use crate::report::traffic::Counters;

/// A traffic counter family: name, help, and which counter it exposes.
type TrafficMetric = (&'static str, &'static str, fn(&Counters) -> u64);

const FAMILIES: [TrafficMetric; 4] = [
    (
        "ipshadow_blackholed_packets",
        "Packets from this node's host to a shadowed pod IP, delivered locally instead of to the pod",
        |t| t.packets,
    ),
    (
        "ipshadow_blackholed_bytes",
        "Bytes from this node's host to a shadowed pod IP, delivered locally instead of to the pod",
        |t| t.bytes,
    ),
    (
        "ipshadow_blackholed_tcp_syns",
        "TCP connection attempts (SYN) from this node's host to a shadowed pod IP",
        |t| t.tcp_syns,
    ),
    (
        "ipshadow_refused_connections",
        "TCP connections to a shadowed pod IP refused (RST) by this node's own stack",
        |t| t.refused,
    ),
];

/// One exposed series: the address, the pod's namespace and name (empty
/// without the names; see `info_labels` in the collector for why they stay).
type Series = (IpAddr, String, String);

/// The series a scrape exposes, each family's value summed over the traffic
/// series that became one without the names. (The book exposes one series
/// per address; summing keeps the exposition valid whatever it exposes.)
fn merged(view: &FindingsView, names: Names) -> BTreeMap<Series, [u64; 4]> {
    let mut out: BTreeMap<Series, [u64; 4]> = BTreeMap::new();
    for (key, totals) in view.traffic.iter() {
        let series = match names {
            Names::Shown => (key.ip, key.namespace.clone(), key.pod.clone()),
            Names::Omitted => (key.ip, String::new(), String::new()),
        };
        let sums = out.entry(series).or_default();
        for (sum, (_, _, pick)) in sums.iter_mut().zip(FAMILIES) {
            *sum = sum.saturating_add(pick(totals));
        }
    }
    out
}

/// The four counter families.
pub(super) fn encode(
    view: &FindingsView,
    names: Names,
    encoder: &mut DescriptorEncoder<'_>,
) -> Result<(), std::fmt::Error> {
    let series = merged(view, names);
    for (i, (name, help, _)) in FAMILIES.iter().enumerate() {
        let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for ((ip, namespace, pod), sums) in &series {
            let l = [
                ("ip", ip.to_string()),
                ("namespace", namespace.clone()),
                ("pod", pod.clone()),
            ];
            ConstCounter::new(sums[i]).encode(m.encode_family(&l)?)?;
        }
    }
    Ok(())
}
