//! Per-series traffic totals that survive findings flapping.
//!
//! The kernel map counts per IP from the moment the IP is added; an IP leaves
//! the map when its finding clears and starts at zero when it comes back. The
//! metrics need counters per (ip, namespace, pod) that never go down while the
//! process lives: this book keeps what earlier segments counted and adds the
//! current segment on top. Series of cleared findings are not exposed, and
//! continue where they stopped if the finding returns.

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
};

use ipshadow_common::IpCounters;

/// The labels of a traffic series.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    pub ip: IpAddr,
    pub namespace: String,
    pub pod: String,
}

/// The counters exported per series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub packets: u64,
    pub bytes: u64,
    pub tcp_syns: u64,
    pub refused: u64,
}

impl Totals {
    fn of(c: &IpCounters) -> Self {
        Self {
            packets: c.packets_to,
            bytes: c.bytes_to,
            tcp_syns: c.tcp_syns_to,
            refused: c.tcp_rsts_from,
        }
    }

    fn plus(self, o: Self) -> Self {
        Self {
            packets: self.packets + o.packets,
            bytes: self.bytes + o.bytes,
            tcp_syns: self.tcp_syns + o.tcp_syns,
            refused: self.refused + o.refused,
        }
    }

    /// `self - base`, never below zero (a map entry re-created behind our back restarts at 0).
    fn since(self, base: Self) -> Self {
        Self {
            packets: self.packets.saturating_sub(base.packets),
            bytes: self.bytes.saturating_sub(base.bytes),
            tcp_syns: self.tcp_syns.saturating_sub(base.tcp_syns),
            refused: self.refused.saturating_sub(base.refused),
        }
    }
}

struct Segment {
    key: SeriesKey,
    baseline: Totals,
    last: Totals,
}

#[derive(Default)]
pub struct TrafficBook {
    retired: HashMap<SeriesKey, Totals>,
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
        current: &BTreeMap<IpAddr, IpCounters>,
        removed: &BTreeMap<IpAddr, IpCounters>,
    ) {
        let ips: Vec<IpAddr> = self.active.keys().copied().collect();
        for ip in ips {
            let Some(seg) = self.active.get_mut(&ip) else {
                continue;
            };
            let still_mapped = current.get(&ip);
            if let Some(c) = still_mapped.or_else(|| removed.get(&ip)) {
                seg.last = Totals::of(c);
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
            let baseline = current.get(ip).map(Totals::of).unwrap_or_default();
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
    pub fn exposed(&self) -> Vec<(SeriesKey, Totals)> {
        self.active
            .values()
            .map(|s| {
                let before = self.retired.get(&s.key).copied().unwrap_or_default();
                (s.key.clone(), before.plus(s.last.since(s.baseline)))
            })
            .collect()
    }

    /// Series currently exposed (for leak checks).
    pub fn len(&self) -> usize {
        self.active.len()
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
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

    fn counters(packets: u64) -> IpCounters {
        IpCounters {
            packets_to: packets,
            tcp_syns_to: packets / 2,
            tcp_rsts_from: packets / 2,
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
