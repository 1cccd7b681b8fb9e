//! The kernel's wire formats, decoded where they are read: map keys, per-CPU
//! counters and ring-buffer records, into the reporting layer's types.

use std::net::{IpAddr, Ipv6Addr};

use ipshadow_common::{FlowSample, IpCounters, IpKey};

use crate::report::{evidence::Sample, traffic::Counters};

/// The map key of an IP: IPv4 as IPv4-mapped IPv6.
pub fn key(ip: IpAddr) -> IpKey {
    match ip {
        IpAddr::V4(v4) => IpKey::from_v4_octets(v4.octets()),
        IpAddr::V6(v6) => IpKey::from_v6_octets(v6.octets()),
    }
}

/// The IP a map key stands for (IPv4-mapped IPv6 back to IPv4).
pub fn ip_of(addr: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(addr);
    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
}

/// One IP's counters summed over the CPUs' values.
pub(super) fn counters<'a>(per_cpu: impl Iterator<Item = &'a IpCounters>) -> Counters {
    let mut sum = IpCounters::default();
    for c in per_cpu {
        sum.accumulate(c);
    }
    Counters {
        packets: sum.packets_to,
        bytes: sum.bytes_to,
        tcp_syns: sum.tcp_syns_to,
        refused: sum.tcp_rsts_from,
        udp: sum.udp_to,
        icmp: sum.icmp_to,
        samples_sent: sum.samples_sent,
        samples_dropped: sum.samples_dropped,
    }
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

/// Decodes one ring-buffer record. `None` unless it is exactly one
/// [`FlowSample`]: a record of another size comes from another program version.
pub fn sample(bytes: &[u8]) -> Option<Sample> {
    if bytes.len() != size_of::<FlowSample>() {
        return None;
    }
    // SAFETY: the length matches, FlowSample is repr(C) plain data valid
    // for any bit pattern, and read_unaligned needs no alignment.
    let raw: FlowSample = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
    Some(Sample {
        src: ip_of(raw.src),
        dst: ip_of(raw.dst),
        protocol: protocol_name(raw.proto),
        sport: raw.sport,
        dport: raw.dport,
        tcp_flags: if raw.proto == 6 {
            flag_names(raw.tcp_flags)
        } else {
            String::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(proto: u8, dport: u16, flags: u8) -> Vec<u8> {
        let s = FlowSample {
            src: IpKey::from_v4_octets([10, 244, 4, 251]).addr,
            dst: IpKey::from_v4_octets([10, 244, 4, 251]).addr,
            ts_ns: 7,
            sport: 40000,
            dport,
            proto,
            tcp_flags: flags,
            _pad: [0; 2],
        };
        // SAFETY: FlowSample is repr(C) plain data without padding.
        let bytes: [u8; size_of::<FlowSample>()] = unsafe { std::mem::transmute(s) };
        bytes.to_vec()
    }

    #[test]
    fn a_ring_buffer_record_decodes_to_a_sample() {
        let s = sample(&raw(6, 5432, 0x02)).expect("decodes");
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
        assert!(sample(&r).is_none());
        assert!(sample(&[]).is_none());
    }

    #[test]
    fn ipv4_keys_round_trip_as_ipv4() {
        for ip in ["10.244.4.251", "fd00::1"] {
            let ip: IpAddr = ip.parse().expect("ip");
            assert_eq!(ip_of(key(ip).addr), ip);
        }
    }

    proptest::proptest! {
        #[test]
        fn ring_buffer_records_decode_only_at_their_exact_size(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128)) {
            proptest::prop_assert_eq!(sample(&bytes).is_some(), bytes.len() == size_of::<FlowSample>());
        }
    }
}
