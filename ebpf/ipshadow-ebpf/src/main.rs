//! TC classifier on `lo`: counts locally delivered packets to and from shadowed IPs.
//!
//! Every packet the host delivers to itself crosses `lo`, including packets the
//! host meant for a pod whose IP is also a local address. The program never
//! drops or alters a packet: it always returns `TCX_NEXT`.
#![no_std]
#![no_main]
#![allow(
    clippy::inline_always,
    reason = "the verifier checks one flat program best, and this is the path of every packet on lo"
)]

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, TC_ACT_UNSPEC},
    helpers::bpf_ktime_get_ns,
    macros::{classifier, map},
    maps::{Array, PerCpuHashMap, RingBuf},
    programs::TcContext,
};
use ipshadow_common::{
    FILTER_WORDS, FlowSample, IpCounters, IpKey, SAMPLES_BYTES, SAMPLES_PER_SECOND,
    SHADOWED_MAX_ENTRIES, filter_bit_folded, filter_bit_v4,
};

/// `TCX_NEXT` and legacy `TC_ACT_UNSPEC` are both -1: pass the packet on.
const PASS: i32 = TC_ACT_UNSPEC;

const ETH_HLEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_ICMPV6: u8 = 58;
const TCP_FLAG_SYN: u8 = 0x02;
const TCP_FLAG_RST: u8 = 0x04;
const TCP_FLAG_ACK: u8 = 0x10;
/// IPv6's "no next header": what the parser reports when the packet carries no
/// layer-4 header it can read (a non-first fragment, too many extension
/// headers), so it is counted as "other" and never read as TCP, UDP or ICMP.
const NO_L4: u8 = 59;
/// IPv6 extension headers walked at most.
const IPV6_EXT_MAX: usize = 4;
/// Bytes of headers the parser reads directly: Ethernet and the largest IPv4 header.
const HEADERS_LEN: u32 = 14 + 60;
/// The IPv4 fragment offset in the flags-and-offset field.
const IPV4_FRAG_OFFSET: u16 = 0x1fff;

/// Not preallocated: a preallocated per-CPU hash reserves max_entries × value ×
/// CPUs of kernel memory up front (~800 MiB on a 64-CPU node); entries are only
/// ever added by the agent, so allocating on insert costs nothing on the packet path.
#[map(name = "SHADOWED")]
static SHADOWED: PerCpuHashMap<IpKey, IpCounters> =
    PerCpuHashMap::with_max_entries(SHADOWED_MAX_ENTRIES, BPF_F_NO_PREALLOC);

#[map(name = "FILTER")]
static FILTER: Array<u64> = Array::with_max_entries(FILTER_WORDS, 0);

#[map(name = "SAMPLES")]
static SAMPLES: RingBuf = RingBuf::with_byte_size(SAMPLES_BYTES, 0);

const NS_PER_SECOND: u64 = 1_000_000_000;

#[classifier]
#[allow(
    unreachable_pub,
    clippy::needless_pass_by_value,
    reason = "the signature aya's #[classifier] expects"
)]
pub fn ipshadow_lo(ctx: TcContext) -> i32 {
    // Parse errors only mean "not a packet we can read": pass it on untouched.
    let _ = try_ipshadow_lo(&ctx);
    PASS
}

struct L3 {
    src: IpKey,
    dst: IpKey,
    proto: u8,
    l4_off: usize,
}

/// Reads a `T` at `off` bytes into the packet by direct packet access, after
/// the bounds check the verifier demands. Cheaper than `bpf_skb_load_bytes`:
/// no helper call on the path every packet on `lo` takes.
#[inline(always)]
fn at<T: Copy>(ctx: &TcContext, off: usize) -> Result<T, i64> {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + off + core::mem::size_of::<T>() > end {
        return Err(-1);
    }
    // SAFETY: bounds checked above; the packet may be unaligned, hence read_unaligned.
    Ok(unsafe { core::ptr::read_unaligned((start + off) as *const T) })
}

/// The packet's addresses and layer 4, read directly; when its headers are not
/// all in the linear part of the skb, pulled there once and read again.
#[inline(always)]
fn parse_l3(ctx: &TcContext) -> Result<L3, i64> {
    match parse_l3_linear(ctx) {
        Ok(l3) => Ok(l3),
        Err(_) if ctx.len() > HEADERS_LEN - 60 => {
            let _ = ctx.pull_data(HEADERS_LEN.min(ctx.len()));
            parse_l3_linear(ctx)
        }
        Err(e) => Err(e),
    }
}

#[inline(always)]
fn parse_l3_linear(ctx: &TcContext) -> Result<L3, i64> {
    let ethertype = u16::from_be(at::<u16>(ctx, 12)?);
    match ethertype {
        ETH_P_IP => {
            let vihl: u8 = at(ctx, ETH_HLEN)?;
            let ihl = ((vihl & 0x0f) as usize) * 4;
            if ihl < 20 {
                return Err(-1);
            }
            // A non-first fragment carries payload where the L4 header would be.
            let frag = u16::from_be(at::<u16>(ctx, ETH_HLEN + 6)?);
            let proto = if frag & IPV4_FRAG_OFFSET == 0 {
                at(ctx, ETH_HLEN + 9)?
            } else {
                NO_L4
            };
            Ok(L3 {
                proto,
                src: IpKey::from_v4_octets(at::<[u8; 4]>(ctx, ETH_HLEN + 12)?),
                dst: IpKey::from_v4_octets(at::<[u8; 4]>(ctx, ETH_HLEN + 16)?),
                l4_off: ETH_HLEN + ihl,
            })
        }
        ETH_P_IPV6 => {
            let mut l3 = L3 {
                proto: at(ctx, ETH_HLEN + 6)?,
                src: IpKey::from_v6_octets(at::<[u8; 16]>(ctx, ETH_HLEN + 8)?),
                dst: IpKey::from_v6_octets(at::<[u8; 16]>(ctx, ETH_HLEN + 24)?),
                l4_off: ETH_HLEN + 40,
            };
            if is_ipv6_ext(l3.proto) {
                walk_ipv6_ext(ctx, &mut l3);
            }
            Ok(l3)
        }
        _ => Err(-1),
    }
}

#[inline(always)]
fn is_ipv6_ext(next: u8) -> bool {
    // Hop-by-hop, routing, fragment, AH, destination options.
    matches!(next, 0 | 43 | 44 | 51 | 60)
}

/// Follows IPv6 extension headers to the layer-4 header, at most
/// [`IPV6_EXT_MAX`] of them (read with the helper: the offsets come from the
/// packet). A non-first fragment, or a chain longer than that, is "other".
#[inline(always)]
fn walk_ipv6_ext(ctx: &TcContext, l3: &mut L3) {
    for _ in 0..IPV6_EXT_MAX {
        let Ok(h) = ctx.load::<[u8; 4]>(l3.l4_off) else {
            l3.proto = NO_L4;
            return;
        };
        let next = h[0];
        match l3.proto {
            44 => {
                l3.l4_off += 8;
                if u16::from_be_bytes([h[2], h[3]]) & 0xfff8 != 0 {
                    l3.proto = NO_L4;
                    return;
                }
            }
            51 => l3.l4_off += (h[1] as usize + 2) * 4,
            _ => l3.l4_off += (h[1] as usize + 1) * 8,
        }
        l3.proto = next;
        if !is_ipv6_ext(next) {
            return;
        }
    }
    l3.proto = NO_L4;
}

#[inline(always)]
fn try_ipshadow_lo(ctx: &TcContext) -> Result<(), i64> {
    // Most packets on lo are to and from nothing shadowed: the addresses' bits
    // in a bitmap (inlined array lookups) turn them away before anything else —
    // no header parsed, no key built.
    if !maybe_either(ctx) {
        return Ok(());
    }
    let l3 = parse_l3(ctx)?;
    // Two independent lookups: the common case (neither IP shadowed) costs two
    // hash lookups and nothing else. They stay separate branches because the
    // verifier rejects code that combines the two map pointers.
    if let Some(c) = SHADOWED.get_ptr_mut(l3.dst) {
        // SAFETY: a per-CPU value is only touched by this CPU while the program runs.
        count_to(ctx, &l3, unsafe { &mut *c });
    }
    if let Some(c) = SHADOWED.get_ptr_mut(l3.src) {
        // SAFETY: as above.
        count_from(ctx, &l3, unsafe { &mut *c });
    }
    Ok(())
}

#[inline(always)]
fn bit_set(bit: u32) -> bool {
    match FILTER.get(bit >> 6) {
        Some(word) => (*word >> (bit & 63)) & 1 == 1,
        None => false,
    }
}

/// Whether the packet's destination or source may be shadowed: their prefilter
/// bits, from the address words read straight from the packet. A packet whose
/// headers are not in the linear part goes on to the full parse (which pulls them).
#[inline(always)]
fn maybe_either(ctx: &TcContext) -> bool {
    let Ok(ethertype) = at::<u16>(ctx, 12) else {
        return true;
    };
    match u16::from_be(ethertype) {
        ETH_P_IP => match (at::<u32>(ctx, ETH_HLEN + 16), at::<u32>(ctx, ETH_HLEN + 12)) {
            (Ok(dst), Ok(src)) => bit_set(filter_bit_v4(dst)) || bit_set(filter_bit_v4(src)),
            _ => true,
        },
        ETH_P_IPV6 => match (
            at::<[u32; 4]>(ctx, ETH_HLEN + 24),
            at::<[u32; 4]>(ctx, ETH_HLEN + 8),
        ) {
            (Ok(d), Ok(s)) => {
                bit_set(filter_bit_folded(d[0] ^ d[1] ^ d[2] ^ d[3]))
                    || bit_set(filter_bit_folded(s[0] ^ s[1] ^ s[2] ^ s[3]))
            }
            _ => true,
        },
        _ => false,
    }
}

#[inline(always)]
fn tcp_flags(ctx: &TcContext, l3: &L3) -> u8 {
    if l3.proto == IPPROTO_TCP {
        ctx.load(l3.l4_off + 13).unwrap_or(0)
    } else {
        0
    }
}

/// The packets an skb stands for: a GSO super-packet is `gso_segs` on the wire.
#[inline(always)]
fn segments(ctx: &TcContext) -> u64 {
    // SAFETY: the context's skb pointer is valid for the program's run.
    let segs = unsafe { (*ctx.skb.skb).gso_segs };
    u64::from(segs.max(1))
}

#[inline(always)]
fn count_to(ctx: &TcContext, l3: &L3, c: &mut IpCounters) {
    c.packets_to += segments(ctx);
    c.bytes_to += u64::from(ctx.len());
    let flags = tcp_flags(ctx, l3);
    let new_flow = match l3.proto {
        IPPROTO_TCP => {
            let syn = flags & (TCP_FLAG_SYN | TCP_FLAG_ACK) == TCP_FLAG_SYN;
            if syn {
                c.tcp_syns_to += 1;
            }
            syn
        }
        IPPROTO_UDP => {
            c.udp_to += 1;
            true
        }
        IPPROTO_ICMP | IPPROTO_ICMPV6 => {
            c.icmp_to += 1;
            true
        }
        _ => false,
    };
    if new_flow {
        // The clock is read only for the samples' rate limit: not per packet.
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        let now = unsafe { bpf_ktime_get_ns() };
        sample(ctx, l3, flags, now, c);
    }
}

/// Sends the packet's 5-tuple to userspace, at most SAMPLES_PER_SECOND per IP and CPU.
#[inline(always)]
fn sample(ctx: &TcContext, l3: &L3, flags: u8, now: u64, c: &mut IpCounters) {
    if now.wrapping_sub(c.rl_window_ns) >= NS_PER_SECOND {
        c.rl_window_ns = now;
        c.rl_count = 0;
    }
    if c.rl_count >= SAMPLES_PER_SECOND {
        c.samples_dropped += 1;
        return;
    }
    let (sport, dport) = match l3.proto {
        IPPROTO_TCP | IPPROTO_UDP => (
            u16::from_be(ctx.load::<u16>(l3.l4_off).unwrap_or(0)),
            u16::from_be(ctx.load::<u16>(l3.l4_off + 2).unwrap_or(0)),
        ),
        // ICMP type and code.
        _ => (
            u16::from(ctx.load::<u8>(l3.l4_off).unwrap_or(0)),
            u16::from(ctx.load::<u8>(l3.l4_off + 1).unwrap_or(0)),
        ),
    };
    let Some(mut entry) = SAMPLES.reserve::<FlowSample>(0) else {
        c.samples_dropped += 1;
        return;
    };
    entry.write(FlowSample {
        src: l3.src.addr,
        dst: l3.dst.addr,
        ts_ns: now,
        sport,
        dport,
        proto: l3.proto,
        tcp_flags: flags,
        _pad: [0; 2],
    });
    entry.submit(0);
    c.rl_count += 1;
    c.samples_sent += 1;
}

#[inline(always)]
fn count_from(ctx: &TcContext, l3: &L3, c: &mut IpCounters) {
    if tcp_flags(ctx, l3) & TCP_FLAG_RST != 0 {
        c.tcp_rsts_from += 1;
    }
}

/// Returns at once: the benchmarks' floor, attached the same way, so the cost of
/// the hook itself (and of the kernel's run-time statistics) can be subtracted.
/// Built only for the benchmarks; never attached by the agent.
#[cfg(feature = "floor")]
#[classifier]
#[allow(
    unreachable_pub,
    clippy::needless_pass_by_value,
    reason = "the signature aya's #[classifier] expects"
)]
pub fn ipshadow_floor(_ctx: TcContext) -> i32 {
    PASS
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
