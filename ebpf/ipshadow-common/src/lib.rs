//! Types shared between the ipshadow eBPF program and the agent.
//!
//! Everything here is `#[repr(C)]`, `Copy` and free of implicit padding, because
//! the kernel copies these bytes between the program and userspace verbatim.
#![no_std]
// The program inlines everything it calls: the verifier follows no calls cheaply,
// and these sit on the path of every packet on lo.
#![allow(
    clippy::inline_always,
    reason = "inlined into the eBPF program's packet path"
)]

/// Name of the per-CPU hash map of shadowed IPs (key [`IpKey`], value [`IpCounters`]).
pub const SHADOWED_MAP: &str = "SHADOWED";
/// Name of the TC classifier program attached to `lo`.
pub const PROGRAM_NAME: &str = "ipshadow_lo";
/// Name of the ring buffer of [`FlowSample`]s.
pub const SAMPLES_MAP: &str = "SAMPLES";
/// Ring buffer size: 64 KiB holds ~1,300 samples between two reads.
pub const SAMPLES_BYTES: u32 = 64 * 1024;
/// At most this many samples per shadowed IP, per CPU, per second: a flood
/// towards one IP cannot swamp userspace or crowd out the other IPs.
pub const SAMPLES_PER_SECOND: u64 = 16;
/// Name of the prefilter bitmap (an array of u64 words, see [`filter_bit`]).
pub const FILTER_MAP: &str = "FILTER";
/// Bits in the prefilter: 2^20 (128 KiB). With 10,000 shadowed IPs about 1 % of
/// other addresses pass it and pay for the hash lookup; with none, nothing does.
pub const FILTER_BITS_LOG2: u32 = 20;
pub const FILTER_WORDS: u32 = (1 << FILTER_BITS_LOG2) / 64;

/// The prefilter bit of an IP. The program tests it before the SHADOWED lookup
/// (an array lookup the verifier inlines, against a hash lookup), and the
/// agent sets it for every IP it adds: both must compute it the same way, so it
/// lives here. Multiplicative hashing of the address folded to 32 bits.
#[inline(always)]
pub fn filter_bit(key: &IpKey) -> u32 {
    let a = &key.addr;
    let w = |i: usize| u32::from_le_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
    filter_bit_folded(w(0) ^ w(4) ^ w(8) ^ w(12))
}

/// [`filter_bit`] of an IPv4 address's key, from the address's four bytes read
/// as one little-endian word: the program's path for every IPv4 packet, with
/// no key built (`::ffff:` folds to `0xffff_0000`).
#[inline(always)]
pub fn filter_bit_v4(le_word: u32) -> u32 {
    filter_bit_folded(0xffff_0000 ^ le_word)
}

/// The bit of an address folded to one word.
#[inline(always)]
pub fn filter_bit_folded(folded: u32) -> u32 {
    folded.wrapping_mul(0x9E37_79B1) >> (32 - FILTER_BITS_LOG2)
}

/// An empty classifier in the same object, built with the eBPF crate's `floor`
/// feature for benchmarks only: the floor.
pub const FLOOR_PROGRAM_NAME: &str = "ipshadow_floor";
/// Upper bound on shadowed IPs the map can hold. A node has a handful of
/// infrastructure addresses; this leaves room for pathological clusters.
pub const SHADOWED_MAX_ENTRIES: u32 = 131_072;

/// An IP address as the map key: IPv6 as is, IPv4 as an IPv4-mapped IPv6
/// address (`::ffff:a.b.c.d`), so one map serves both families.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IpKey {
    pub addr: [u8; 16],
}

impl IpKey {
    /// The key of an IPv4 address given in network byte order.
    #[inline(always)]
    pub const fn from_v4_octets(o: [u8; 4]) -> Self {
        Self {
            addr: [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, o[0], o[1], o[2], o[3],
            ],
        }
    }

    /// The key of an IPv6 address.
    #[inline(always)]
    pub const fn from_v6_octets(addr: [u8; 16]) -> Self {
        Self { addr }
    }
}

/// Per-IP, per-CPU counters of locally delivered traffic to and from a shadowed IP.
///
/// "to" means the packet's destination is the shadowed IP (the host sending to
/// what it believes is a pod); "from" means its source is (the local stack
/// answering in the pod's name, e.g. the RST that refuses a probe).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpCounters {
    pub packets_to: u64,
    pub bytes_to: u64,
    /// TCP segments with SYN set and ACK clear: connection attempts.
    pub tcp_syns_to: u64,
    pub udp_to: u64,
    pub icmp_to: u64,
    /// TCP segments with RST set whose source is the shadowed IP: refused connections.
    pub tcp_rsts_from: u64,
    /// Samples sent to the ring buffer, and those the rate limit or a full buffer held back.
    pub samples_sent: u64,
    pub samples_dropped: u64,
    /// Rate-limit state of this CPU (start of the current one-second window and
    /// samples in it); not counters, so [`IpCounters::accumulate`] skips them.
    pub rl_window_ns: u64,
    pub rl_count: u64,
}

impl IpCounters {
    /// Adds `other` into `self`, as userspace does over the per-CPU values.
    pub fn accumulate(&mut self, other: &Self) {
        self.packets_to += other.packets_to;
        self.bytes_to += other.bytes_to;
        self.tcp_syns_to += other.tcp_syns_to;
        self.udp_to += other.udp_to;
        self.icmp_to += other.icmp_to;
        self.tcp_rsts_from += other.tcp_rsts_from;
        self.samples_sent += other.samples_sent;
        self.samples_dropped += other.samples_dropped;
    }
}

/// The first packet of a new flow towards a shadowed IP (a TCP SYN, or a UDP or
/// ICMP packet), as the program saw it on `lo`. Addresses as in [`IpKey`];
/// ports in host byte order (0 for ICMP, whose type and code go in the ports).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowSample {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub ts_ns: u64,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub tcp_flags: u8,
    /// Explicit padding to 48 bytes, always zero.
    #[allow(
        clippy::pub_underscore_fields,
        reason = "padding, set by the program, never read"
    )]
    pub _pad: [u8; 2],
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: all are #[repr(C)], Copy, made only of integers and byte arrays,
    // with no implicit padding (checked by the size tests), so any bit pattern is valid.
    unsafe impl aya::Pod for super::IpKey {}
    unsafe impl aya::Pod for super::IpCounters {}
    unsafe impl aya::Pod for super::FlowSample {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_types_have_no_padding() {
        assert_eq!(core::mem::size_of::<IpKey>(), 16);
        assert_eq!(core::mem::size_of::<IpCounters>(), 10 * 8);
        assert_eq!(
            core::mem::size_of::<FlowSample>(),
            16 + 16 + 8 + 2 + 2 + 1 + 1 + 2
        );
    }

    #[test]
    fn ipv4_keys_are_ipv4_mapped_ipv6() {
        let k = IpKey::from_v4_octets([10, 244, 4, 251]);
        assert_eq!(&k.addr[10..], &[0xff, 0xff, 10, 244, 4, 251]);
        assert!(k.addr[..10].iter().all(|b| *b == 0));
    }

    #[test]
    fn the_ipv4_shortcut_gives_the_keys_own_bit() {
        for o in [
            [10, 244, 4, 251],
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [127, 0, 0, 1],
        ] {
            let k = IpKey::from_v4_octets(o);
            assert_eq!(
                filter_bit_v4(u32::from_le_bytes(o)),
                filter_bit(&k),
                "{o:?}"
            );
        }
        let k6 =
            IpKey::from_v6_octets([0xfd, 0, 0, 0x10, 2, 0x44, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0x1f]);
        let a = &k6.addr;
        let w = |i: usize| u32::from_le_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
        assert_eq!(
            filter_bit_folded(w(0) ^ w(4) ^ w(8) ^ w(12)),
            filter_bit(&k6)
        );
    }

    #[test]
    fn filter_bits_stay_in_range_and_spread() {
        let mut seen = [false; 1 << 12];
        for i in 0..4096u32 {
            let [_, _, hi, lo] = i.to_be_bytes();
            let k = IpKey::from_v4_octets([10, 250, hi, lo]);
            let bit = filter_bit(&k);
            assert!(bit < 1 << FILTER_BITS_LOG2);
            seen[(bit >> 8) as usize] = true;
        }
        // 4,096 consecutive addresses land in most of the 4,096 coarse buckets.
        assert!(seen.iter().filter(|b| **b).count() > 2_000);
    }

    #[test]
    fn accumulate_sums_counters_but_not_the_rate_limit_state() {
        let mut a = IpCounters {
            packets_to: 1,
            tcp_syns_to: 1,
            rl_count: 4,
            ..Default::default()
        };
        let b = IpCounters {
            packets_to: 2,
            tcp_rsts_from: 3,
            rl_count: 5,
            ..Default::default()
        };
        a.accumulate(&b);
        assert_eq!(
            (a.packets_to, a.tcp_syns_to, a.tcp_rsts_from, a.rl_count),
            (3, 1, 3, 4)
        );
    }
}
