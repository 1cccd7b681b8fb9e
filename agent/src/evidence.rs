//! Traffic evidence for a finding: what the eBPF classifier on `lo` saw of host
//! traffic to a shadowed IP. Pure data and text; the loader in `ebpf/` fills it.

use std::{collections::BTreeMap, fmt::Write as _, net::IpAddr, time::Duration};

use ipshadow_common::{FlowSample, IpCounters};
use serde::Serialize;

/// How many samples a finding keeps (the first ones seen) for its JSON.
const KEEP_SAMPLES: usize = 5;
/// How many distinct destination ports a finding names.
const KEEP_PORTS: usize = 8;

/// One sampled packet: the first packet of a new flow towards a shadowed IP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sample {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: &'static str,
    /// TCP/UDP ports; for ICMP the type and code.
    pub sport: u16,
    pub dport: u16,
    pub tcp_flags: String,
    #[serde(skip)]
    pub ts_ns: u64,
}

fn protocol_name(proto: u8) -> &'static str {
    match proto {
        1 => "icmp",
        6 => "tcp",
        17 => "udp",
        58 => "icmpv6",
        _ => "other",
    }
}

fn flag_names(flags: u8) -> String {
    const NAMES: [(u8, &str); 6] = [
        (0x02, "SYN"),
        (0x10, "ACK"),
        (0x01, "FIN"),
        (0x04, "RST"),
        (0x08, "PSH"),
        (0x20, "URG"),
    ];
    NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join("|")
}

impl Sample {
    /// Decodes one ring-buffer record. `None` unless it is exactly one
    /// [`FlowSample`]: a record of another size comes from another program version.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != std::mem::size_of::<FlowSample>() {
            return None;
        }
        // SAFETY: the length matches, FlowSample is repr(C) plain data valid
        // for any bit pattern, and read_unaligned needs no alignment.
        let raw: FlowSample = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
        Some(Self {
            src: crate::ebpf::ip_of(raw.src),
            dst: crate::ebpf::ip_of(raw.dst),
            protocol: protocol_name(raw.proto),
            sport: raw.sport,
            dport: raw.dport,
            tcp_flags: if raw.proto == 6 {
                flag_names(raw.tcp_flags)
            } else {
                String::new()
            },
            ts_ns: raw.ts_ns,
        })
    }
}

/// What was seen of host traffic to one shadowed IP over a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    pub window_seconds: f64,
    pub packets: u64,
    pub bytes: u64,
    /// Connection attempts (TCP SYN without ACK) towards the IP.
    pub tcp_syns: u64,
    /// TCP RSTs the local stack sent in the IP's name: refused connections.
    pub refused_connections: u64,
    pub udp_packets: u64,
    pub icmp_packets: u64,
    /// Destination ports of sampled TCP/UDP flows, most frequent first.
    pub destination_ports: Vec<u16>,
    /// The first sampled flows.
    pub samples: Vec<Sample>,
    /// Samples the in-kernel rate limit (or a full ring buffer) held back.
    pub samples_dropped: u64,
}

impl Evidence {
    /// Evidence from the counters of one IP over `window` and the samples whose destination is it.
    pub fn new(c: &IpCounters, samples: &[Sample], window: Duration) -> Self {
        let mut ports: BTreeMap<u16, usize> = BTreeMap::new();
        for s in samples
            .iter()
            .filter(|s| matches!(s.protocol, "tcp" | "udp"))
        {
            *ports.entry(s.dport).or_default() += 1;
        }
        let mut ports: Vec<(u16, usize)> = ports.into_iter().collect();
        ports.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Self {
            window_seconds: window.as_secs_f64(),
            packets: c.packets_to,
            bytes: c.bytes_to,
            tcp_syns: c.tcp_syns_to,
            refused_connections: c.tcp_rsts_from,
            udp_packets: c.udp_to,
            icmp_packets: c.icmp_to,
            destination_ports: ports.into_iter().take(KEEP_PORTS).map(|(p, _)| p).collect(),
            samples: samples.iter().take(KEEP_SAMPLES).cloned().collect(),
            samples_dropped: c.samples_dropped,
        }
    }

    /// One sentence for the finding's message, e.g. "Seen on node-a's lo in the
    /// last 10 s: 42 TCP SYNs from the host to 10.244.4.251 (port 5432), 42 refused by the local stack."
    pub fn sentence(&self, ip: IpAddr, node: &str) -> String {
        let secs = self.window_seconds;
        let span = if secs >= 1.0 {
            format!("{secs:.0} s")
        } else {
            format!("{:.0} ms", secs * 1000.0)
        };
        if self.packets == 0 && self.refused_connections == 0 {
            return format!("No host traffic to {ip} was delivered locally on {node} in {span}.");
        }
        let ports = match self.destination_ports.as_slice() {
            [] => String::new(),
            [p] => format!(" (port {p})"),
            ps => format!(
                " (ports {})",
                ps.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
            ),
        };
        let mut s = format!(
            "Seen on {node}'s lo in {span}: {} packets from the host to {ip}{ports} delivered locally",
            self.packets
        );
        if self.tcp_syns > 0 {
            let _ = write!(
                s,
                ", {} TCP connection attempts, {} refused by the local stack",
                self.tcp_syns, self.refused_connections
            );
        }
        if self.udp_packets > 0 {
            let _ = write!(s, ", {} UDP packets", self.udp_packets);
        }
        if self.icmp_packets > 0 {
            let _ = write!(s, ", {} ICMP packets", self.icmp_packets);
        }
        s.push('.');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(proto: u8, dport: u16, flags: u8) -> Vec<u8> {
        let s = FlowSample {
            src: ipshadow_common::IpKey::from_v4_octets([10, 244, 4, 251]).addr,
            dst: ipshadow_common::IpKey::from_v4_octets([10, 244, 4, 251]).addr,
            ts_ns: 7,
            sport: 40000,
            dport,
            proto,
            tcp_flags: flags,
            _pad: [0; 2],
        };
        // SAFETY: FlowSample is repr(C) plain data without padding.
        let bytes: [u8; std::mem::size_of::<FlowSample>()] = unsafe { std::mem::transmute(s) };
        bytes.to_vec()
    }

    #[test]
    fn a_ring_buffer_record_decodes_to_a_sample() {
        let s = Sample::decode(&raw(6, 5432, 0x02)).expect("decodes");
        assert_eq!(s.dst, "10.244.4.251".parse::<IpAddr>().expect("ip"));
        assert_eq!(
            (s.protocol, s.sport, s.dport, s.tcp_flags.as_str()),
            ("tcp", 40000, 5432, "SYN")
        );
    }

    #[test]
    fn records_of_another_size_are_rejected() {
        let mut r = raw(6, 1, 2);
        r.push(0);
        assert!(Sample::decode(&r).is_none());
        assert!(Sample::decode(&[]).is_none());
    }

    #[test]
    fn evidence_names_counts_ports_and_refusals() {
        let c = IpCounters {
            packets_to: 84,
            tcp_syns_to: 42,
            tcp_rsts_from: 42,
            ..Default::default()
        };
        let samples: Vec<Sample> = (0..3)
            .map(|_| Sample::decode(&raw(6, 5432, 0x02)).expect("decodes"))
            .chain(std::iter::once(
                Sample::decode(&raw(6, 8080, 0x02)).expect("decodes"),
            ))
            .collect();
        let e = Evidence::new(&c, &samples, Duration::from_secs(10));
        assert_eq!(e.destination_ports, [5432, 8080]);
        assert_eq!(e.samples.len(), 4);
        let s = e.sentence("10.244.4.251".parse().expect("ip"), "node-a");
        assert_eq!(
            s,
            "Seen on node-a's lo in 10 s: 84 packets from the host to 10.244.4.251 (ports 5432, 8080) \
             delivered locally, 42 TCP connection attempts, 42 refused by the local stack."
        );
    }

    #[test]
    fn quiet_ips_say_so() {
        let e = Evidence::new(&IpCounters::default(), &[], Duration::from_millis(500));
        assert_eq!(
            e.sentence("10.0.0.1".parse().expect("ip"), "n"),
            "No host traffic to 10.0.0.1 was delivered locally on n in 500 ms."
        );
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn ring_buffer_records_decode_only_at_their_exact_size(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
            let decoded = Sample::decode(&bytes);
            prop_assert_eq!(decoded.is_some(), bytes.len() == std::mem::size_of::<FlowSample>());
        }
    }
}
