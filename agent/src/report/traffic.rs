//! Per-series traffic totals that survive findings flapping.
//!
//! The kernel map counts per IP from the moment the IP is added; an IP leaves
//! the map when its finding clears and starts at zero when it comes back. The
//! metrics need counters per (ip, namespace, pod) that never go down while the
//! process lives: this book keeps what earlier segments counted and adds the
//! current segment on top. Series of cleared findings are not exposed, and
//! continue where they stopped if the finding returns.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
};

use crate::detect::{Finding, FindingKind, Role};

/// The labels of a traffic series.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    /// The shadowed IP.
    pub ip: IpAddr,
    /// The namespace of the pod holding it.
    pub namespace: String,
    /// The pod holding it.
    pub pod: String,
}

/// What the eBPF classifier counted for one IP, decoded from the kernel's
/// per-CPU values (summed) by the `ebpf` adapter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets to the IP.
    pub packets: u64,
    /// Bytes to the IP.
    pub bytes: u64,
    /// TCP connection attempts (SYN without ACK) to the IP.
    pub tcp_syns: u64,
    /// TCP RSTs the local stack sent in the IP's name: refused connections.
    pub refused: u64,
    /// UDP packets to the IP.
    pub udp: u64,
    /// ICMP packets to the IP.
    pub icmp: u64,
    /// Flow samples sent to the ring buffer.
    pub samples_sent: u64,
    /// Flow samples the rate limit (or a full ring buffer) held back.
    pub samples_dropped: u64,
}

impl Counters {
    fn plus(self, o: Self) -> Self {
        Self {
            packets: self.packets + o.packets,
            bytes: self.bytes + o.bytes,
            tcp_syns: self.tcp_syns + o.tcp_syns,
            refused: self.refused + o.refused,
            udp: self.udp + o.udp,
            icmp: self.icmp + o.icmp,
            samples_sent: self.samples_sent + o.samples_sent,
            samples_dropped: self.samples_dropped + o.samples_dropped,
        }
    }

    /// `self - base`, never below zero (a map entry re-created behind our back restarts at 0).
    fn since(self, base: Self) -> Self {
        Self {
            packets: self.packets.saturating_sub(base.packets),
            bytes: self.bytes.saturating_sub(base.bytes),
            tcp_syns: self.tcp_syns.saturating_sub(base.tcp_syns),
            refused: self.refused.saturating_sub(base.refused),
            udp: self.udp.saturating_sub(base.udp),
            icmp: self.icmp.saturating_sub(base.icmp),
            samples_sent: self.samples_sent.saturating_sub(base.samples_sent),
            samples_dropped: self.samples_dropped.saturating_sub(base.samples_dropped),
        }
    }
}

/// The traffic series exposed now, with their running totals.
pub type Traffic = Vec<(SeriesKey, Counters)>;

/// The IPs whose locally delivered traffic is evidence: addresses `node` holds
/// in its kernel (router, health, other local addresses) that a pod has. The
/// Ingress IP is not a kernel address, so host traffic to it never crosses `lo`.
pub fn watch_set(findings: &[Finding], node: &str) -> BTreeSet<IpAddr> {
    findings
        .iter()
        .filter(|f| f.owner.node == node && f.owner.role != Role::Ingress)
        .filter(|f| f.kind != FindingKind::HostRouteBlackhole)
        .map(|f| f.ip)
        .collect()
}

/// Which series each watched IP's traffic belongs to: the first finding's pod.
pub fn series_of(findings: &[Finding], watched: &BTreeSet<IpAddr>) -> BTreeMap<IpAddr, SeriesKey> {
    let mut want = BTreeMap::new();
    for f in findings.iter().filter(|f| watched.contains(&f.ip)) {
        want.entry(f.ip).or_insert_with(|| SeriesKey {
            ip: f.ip,
            namespace: f.pod().map(|p| p.namespace.clone()).unwrap_or_default(),
            pod: f.pod().map(|p| p.name.clone()).unwrap_or_default(),
        });
    }
    want
}

struct Segment {
    key: SeriesKey,
    baseline: Counters,
    last: Counters,
}

/// Running totals per series (see the module docs).
#[derive(Default)]
pub struct TrafficBook {
    retired: HashMap<SeriesKey, Counters>,
    active: BTreeMap<IpAddr, Segment>,
}

impl TrafficBook {
    /// Brings the book up to date.
    /// - `want`: which series each watched IP's traffic belongs to now;
    /// - `current`: the map's counters of the IPs still in it;
    /// - `removed`: the last counters of IPs just removed from the map.
    pub fn update(
        &mut self,
        want: &BTreeMap<IpAddr, SeriesKey>,
        current: &BTreeMap<IpAddr, Counters>,
        removed: &BTreeMap<IpAddr, Counters>,
    ) {
        let ips: Vec<IpAddr> = self.active.keys().copied().collect();
        for ip in ips {
            let Some(seg) = self.active.get_mut(&ip) else {
                continue;
            };
            let still_mapped = current.get(&ip);
            if let Some(c) = still_mapped.or_else(|| removed.get(&ip)) {
                seg.last = *c;
            }
            if (still_mapped.is_none() || want.get(&ip) != Some(&seg.key))
                && let Some(seg) = self.active.remove(&ip)
            {
                let done = seg.last.since(seg.baseline);
                let r = self.retired.entry(seg.key).or_default();
                *r = r.plus(done);
            }
        }
        for (ip, key) in want {
            if self.active.contains_key(ip) {
                continue;
            }
            let baseline = current.get(ip).copied().unwrap_or_default();
            self.active.insert(
                *ip,
                Segment {
                    key: key.clone(),
                    baseline,
                    last: baseline,
                },
            );
        }
    }

    /// The series to expose now, with their running totals.
    pub fn exposed(&self) -> Traffic {
        self.active
            .values()
            .map(|s| {
                let before = self.retired.get(&s.key).copied().unwrap_or_default();
                (s.key.clone(), before.plus(s.last.since(s.baseline)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pod: &str) -> SeriesKey {
        SeriesKey {
            ip: "10.244.4.251".parse().expect("ip"),
            namespace: "ns".into(),
            pod: pod.into(),
        }
    }

    fn counters(packets: u64) -> Counters {
        Counters {
            packets,
            tcp_syns: packets / 2,
            refused: packets / 2,
            ..Default::default()
        }
    }

    #[test]
    fn counters_survive_a_finding_flapping_and_cleared_series_disappear() {
        let ip: IpAddr = "10.244.4.251".parse().expect("ip");
        let mut book = TrafficBook::default();
        let want = BTreeMap::from([(ip, key("pg"))]);
        book.update(
            &want,
            &BTreeMap::from([(ip, counters(0))]),
            &BTreeMap::new(),
        );
        book.update(
            &want,
            &BTreeMap::from([(ip, counters(10))]),
            &BTreeMap::new(),
        );
        assert_eq!(book.exposed()[0].1.packets, 10);

        // The finding clears: the IP leaves the map with 14 packets counted.
        book.update(
            &BTreeMap::new(),
            &BTreeMap::new(),
            &BTreeMap::from([(ip, counters(14))]),
        );
        assert!(book.exposed().is_empty());

        // It comes back: the map restarts at zero, the series continues at 14.
        book.update(
            &want,
            &BTreeMap::from([(ip, counters(0))]),
            &BTreeMap::new(),
        );
        assert_eq!(book.exposed()[0].1.packets, 14);
        book.update(
            &want,
            &BTreeMap::from([(ip, counters(6))]),
            &BTreeMap::new(),
        );
        let (k, t) = &book.exposed()[0];
        assert_eq!(
            (k.pod.as_str(), t.packets, t.tcp_syns, t.refused),
            ("pg", 20, 10, 10)
        );
    }

    #[test]
    fn a_new_pod_on_the_same_ip_starts_its_own_series() {
        let ip: IpAddr = "10.244.4.251".parse().expect("ip");
        let mut book = TrafficBook::default();
        book.update(
            &BTreeMap::from([(ip, key("a"))]),
            &BTreeMap::from([(ip, counters(0))]),
            &BTreeMap::new(),
        );
        book.update(
            &BTreeMap::from([(ip, key("a"))]),
            &BTreeMap::from([(ip, counters(8))]),
            &BTreeMap::new(),
        );
        // Pod a is replaced by pod b holding the same IP; the map entry stays.
        book.update(
            &BTreeMap::from([(ip, key("b"))]),
            &BTreeMap::from([(ip, counters(8))]),
            &BTreeMap::new(),
        );
        book.update(
            &BTreeMap::from([(ip, key("b"))]),
            &BTreeMap::from([(ip, counters(11))]),
            &BTreeMap::new(),
        );
        let exposed = book.exposed();
        assert_eq!(exposed.len(), 1);
        assert_eq!((exposed[0].0.pod.as_str(), exposed[0].1.packets), ("b", 3));
    }
}
