//! Traffic evidence for a finding: what the eBPF classifier on `lo` saw of host
//! traffic to a shadowed IP. Pure data and text; the `ebpf` adapter decodes the
//! kernel's records into these types.

use std::{collections::BTreeMap, fmt::Write as _, net::IpAddr, time::Duration};

use serde::Serialize;

use super::traffic::Counters;

/// How many samples a finding keeps (the first ones seen) for its JSON.
const KEEP_SAMPLES: usize = 5;
/// How many distinct destination ports a finding names.
const KEEP_PORTS: usize = 8;

/// One sampled packet: the first packet of a new flow towards a shadowed IP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// Source address.
    pub src: IpAddr,
    /// Destination address (the shadowed IP).
    pub dst: IpAddr,
    /// `tcp`, `udp`, `icmp`, `icmpv6` or `other`.
    pub protocol: &'static str,
    /// TCP/UDP source port; for ICMP the type.
    pub sport: u16,
    /// TCP/UDP destination port; for ICMP the code.
    pub dport: u16,
    /// TCP flags as `SYN|ACK`; empty for other protocols.
    pub tcp_flags: String,
}

/// What was seen of host traffic to one shadowed IP over a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// How long was watched.
    pub window_seconds: f64,
    /// Packets to the IP.
    pub packets: u64,
    /// Bytes to the IP.
    pub bytes: u64,
    /// Connection attempts (TCP SYN without ACK) towards the IP.
    pub tcp_syns: u64,
    /// TCP RSTs the local stack sent in the IP's name: refused connections.
    pub refused_connections: u64,
    /// UDP packets to the IP.
    pub udp_packets: u64,
    /// ICMP packets to the IP.
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
    pub fn new(c: &Counters, samples: &[Sample], window: Duration) -> Self {
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
            packets: c.packets,
            bytes: c.bytes,
            tcp_syns: c.tcp_syns,
            refused_connections: c.refused,
            udp_packets: c.udp,
            icmp_packets: c.icmp,
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
            ps => format!(" (ports {})", super::message::list(ps)),
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

    fn sample(dport: u16) -> Sample {
        Sample {
            src: "10.244.4.251".parse().expect("ip"),
            dst: "10.244.4.251".parse().expect("ip"),
            protocol: "tcp",
            sport: 40000,
            dport,
            tcp_flags: "SYN".to_owned(),
        }
    }

    #[test]
    fn evidence_names_counts_ports_and_refusals() {
        let c = Counters {
            packets: 84,
            tcp_syns: 42,
            refused: 42,
            ..Default::default()
        };
        let samples = [sample(5432), sample(5432), sample(5432), sample(8080)];
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
        let e = Evidence::new(&Counters::default(), &[], Duration::from_millis(500));
        assert_eq!(
            e.sentence("10.0.0.1".parse().expect("ip"), "n"),
            "No host traffic to 10.0.0.1 was delivered locally on n in 500 ms."
        );
    }
}
