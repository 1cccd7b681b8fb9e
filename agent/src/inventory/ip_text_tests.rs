use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test IP")
}

fn net(s: &str) -> IpNet {
    s.parse().expect("test CIDR")
}

/// k8s.io/utils net/ips_test.go `goodTestIPs` (each string parses to the
/// first's address), and the addresses the Services were written with.
#[test]
fn kubernetes_good_addresses_read_as_kubernetes_reads_them() {
    for (want, texts) in [
        ("192.168.0.5", &["192.168.0.5", "192.168.000.005"][..]),
        ("0.0.0.0", &["0.0.0.0", "000.000.000.000"]),
        ("255.255.255.255", &["255.255.255.255"]),
        (
            "2001:db8::5",
            &["2001:db8::5", "2001:0db8::0005", "2001:DB8::5"],
        ),
        (
            "::",
            &[
                "::",
                "0:0:0:0:0:0:0:0",
                "0000:0000:0000:0000:0000:0000:0000:0000",
                "0::0",
            ],
        ),
        ("::1", &["::1", "0000:0000:0000:0000:0000:0000:0000:0001"]),
        (
            "192.168.0.5",
            &["::ffff:192.168.0.5", "::ffff:0192.0168.0000.0005"],
        ),
        // The issue's: a pod's address as a Service may carry it.
        (
            "10.244.1.20",
            &[
                "::ffff:10.244.1.20",
                "010.244.001.020",
                "::ffff:af4:114",
                "0:0:0:0:0:ffff:10.244.1.20",
                "::FFFF:010.0244.01.020",
            ],
        ),
        // An IPv6 group may run past four digits on zeros; IPv4-compatible stays IPv6.
        ("1::", &["00001::"]),
        ("::102:304", &["::1.2.3.4"]),
    ] {
        for text in texts {
            assert_eq!(parse_ip(text), Some(ip(want)), "{text:?}");
        }
    }
}

/// k8s.io/utils net/ips_test.go `badTestIPs`, and what Go refuses besides.
#[test]
fn kubernetes_bad_addresses_are_no_address() {
    for text in [
        "",
        "bad ip",
        "www.example.com",
        "1.2.3.400",
        "1.2..4",
        "1.2.3",
        "1.2.3.4.5",
        "1:2::12345",
        "1::2::3",
        "1:2:::3",
        "1:2:3",
        "1:2:3:4:5:6:7:8:9",
        "1:2:3:4::6:7:8:9",
        "1.2.3.4:80",
        "[2001:db8::5]",
        "[2001:db8::5]:80",
        "www.example.com:80",
        "169.254.169.254%eth0",
        "fe80::1234%eth0",
        "1.2.3.0/24",
        "2001:db8::/64",
        " 1.2.3.4",
        "1.2.3.4 ",
        " 2001:db8::5",
        "2001:db8::5 ",
        // Go's own refusals: octal and hex are not numbers here, nor signs;
        // the embedded IPv4 only at the end; `::` for at least one group.
        "0x0a.1.2.3",
        "+1.2.3.4",
        "1.2.3.4::",
        "1:2:3:4:5:1.2.3.4",
        "::1:2:3:4:5:6:1.2.3.4",
        "1:2:3:4:5:6:7:8::",
        "::ffff:1.2.3.256",
        "1:",
        ":1::",
        "::ffff:0a.1.2.3",
        "１.2.3.4",
    ] {
        assert_eq!(parse_ip(text), None, "{text:?}");
    }
}

/// k8s.io/utils net/ips_test.go `goodTestCIDRs` and `badTestCIDRs`.
#[test]
fn kubernetes_cidrs_read_as_kubernetes_reads_them() {
    for (want, texts) in [
        (
            "1.2.3.0/24",
            &["1.2.3.0/24", "1.2.3.4/24", "1.2.3.255/24"][..],
        ),
        ("1.1.1.1/32", &["1.1.1.1/32"]),
        ("0.0.0.0/0", &["0.0.0.0/0", "000.000.000.000/000"]),
        (
            "2001:db8::/64",
            &[
                "2001:db8::/64",
                "2001:db8:0:0:0:0:0:0/64",
                "2001:DB8::/64",
                "2001:db8::1/64",
                "2001:db8::f00f:f0f0:0f0f:000f/64",
            ],
        ),
        ("::/0", &["::/0"]),
        ("::1/128", &["::1/128"]),
        (
            "1.1.1.0/24",
            &[
                "1.1.1.0/24",
                "::ffff:1.1.1.0/120",
                "::ffff:01.01.01.00/0120",
            ],
        ),
        // The whole mapped range is every IPv4 address to Go; a mask shorter
        // than 96 cuts into `ffff`: an IPv6 network.
        ("0.0.0.0/0", &["::ffff:10.0.0.0/96"]),
        ("::/64", &["::ffff:10.0.0.0/64"]),
    ] {
        for text in texts {
            assert_eq!(parse_cidr(text).map(|c| c.net), Some(net(want)), "{text:?}");
        }
    }
}

#[test]
fn an_ifaddr_keeps_its_address_and_bad_cidrs_are_none() {
    let c = parse_cidr("100.064.000.002/016").expect("an ifaddr");
    assert_eq!((c.ip, c.net), (ip("100.64.0.2"), net("100.64.0.0/16")));
    let c = parse_cidr("::ffff:100.64.0.2/64").expect("mapped under a short mask");
    assert_eq!((c.ip, c.net), (ip("100.64.0.2"), net("::/64")));
    for text in [
        "",
        "bad cidr",
        "1.2.300.0/24",
        "2001:db8000::/64",
        "1.2.3.4/64",
        "2001:db8::5/192",
        "1.2.3.0/-8",
        "1.2.3.0/+24",
        "www.example.com/24",
        "192.168.0.1/0/99",
        "1.2.3.4",
        "2001:db8::1",
        " 1.2.3.0/24",
        "1.2.3.0/24 ",
        "1.2.3.0/",
        "1.2.3.0/ 24",
        "1.2.3.0/33",
        "fe80::1%eth0/64",
    ] {
        assert_eq!(parse_cidr(text), None, "{text:?}");
    }
}

/// The reference model: the standard library's strict parser after every run
/// of hexadecimal digits lost its leading zeros, IPv4-mapped folded. Written
/// apart from Go's steps above, so that the two can disagree.
fn model_ip(s: &str) -> Option<IpAddr> {
    Some(unpadded(s).parse::<IpAddr>().ok()?.to_canonical())
}

/// The reference for CIDRs: the family the text parses to bounds the mask;
/// the mask's digits are decimal.
fn model_cidr(s: &str) -> Option<(IpAddr, IpNet)> {
    let (addr, mask) = s.split_once('/')?;
    if mask.is_empty() || !mask.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = mask.trim_start_matches('0');
    let prefix: u8 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let written = unpadded(addr).parse::<IpAddr>().ok()?;
    let network = match written {
        IpAddr::V4(a) => IpNet::V4(Ipv4Net::new(a, prefix).ok()?.trunc()),
        IpAddr::V6(a) => {
            let n = Ipv6Net::new(a, prefix).ok()?.trunc();
            match n.network().to_ipv4_mapped() {
                Some(v4) => IpNet::V4(Ipv4Net::new(v4, prefix - 96).ok()?),
                None => IpNet::V6(n),
            }
        }
    };
    Some((written.to_canonical(), network))
}

fn unpadded(s: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let kept = run.trim_start_matches('0');
        out.push_str(if kept.is_empty() && !run.is_empty() {
            "0"
        } else {
            kept
        });
        run.clear();
    };
    for c in s.chars() {
        if c.is_ascii_hexdigit() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// `n` written with up to `pad` extra leading zeros, in `radix`.
fn padded(n: u32, pad: usize, hex: bool) -> String {
    let digits = if hex { format!("{n:x}") } else { n.to_string() };
    format!("{}{digits}", "0".repeat(pad))
}

fn v4_text(a: Ipv4Addr, pads: &[usize]) -> String {
    a.octets()
        .iter()
        .zip(pads.iter().chain(std::iter::repeat(&0)))
        .map(|(o, p)| padded(u32::from(*o), *p, false))
        .collect::<Vec<_>>()
        .join(".")
}

/// Text made of the pieces addresses are made of: mostly near misses.
fn near_miss() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "::", ":", ".", "0", "00", "1", "9", "ff", "FFFF", "ffff", "255", "256", "0255", "12345",
        "1.2.3.4", "::ffff:", "%eth0", " ", "/", "24", "0128", "[", "]", "g", "-", "+",
    ]);
    prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
}

/// IPv6's shapes: up to ten groups (some past four digits), `::` anywhere
/// or nowhere, an IPv4 tail or not: the grammar's edges, valid or just not.
fn v6_shape() -> impl Strategy<Value = String> {
    let group = prop_oneof!["[0-9a-fA-F]{1,4}", "0{1,6}[0-9a-f]{0,3}", "[0-9a-f]{5}"];
    let tail = prop_oneof![
        Just(String::new()),
        "[0-9]{1,4}\\.[0-9]{1,4}\\.[0-9]{1,4}\\.[0-9]{1,4}",
    ];
    (
        prop::collection::vec(group, 0..10),
        prop::option::of(0usize..11),
        tail,
        prop::option::of(0usize..11),
    )
        .prop_map(|(groups, ellipsis, v4, second)| {
            let mut parts: Vec<String> = groups;
            if !v4.is_empty() {
                parts.push(v4);
            }
            for at in [ellipsis, second].into_iter().flatten() {
                parts.insert(at.min(parts.len()), String::new());
            }
            let text = parts.join(":");
            // A lone `:` at either end of an inserted empty group is `::`.
            text.replace(":::", "::")
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Whatever the text, Go's steps and the model agree.
    #[test]
    fn any_text_reads_as_the_model_reads_it(s in prop_oneof![
        near_miss(),
        v6_shape(),
        "[0-9a-fA-F:./% x]{0,40}",
    ]) {
        prop_assert_eq!(parse_ip(&s), model_ip(&s), "{:?}", s);
        let cidr = parse_cidr(&s).map(|c| (c.ip, c.net));
        prop_assert_eq!(cidr, model_cidr(&s), "{:?}", s);
        let slashed = format!("{s}/{}", s.len() % 140);
        let cidr = parse_cidr(&slashed).map(|c| (c.ip, c.net));
        prop_assert_eq!(cidr, model_cidr(&slashed), "{:?}", slashed);
    }

    /// Every IPv4 address, its octets with leading zeros, plain or mapped
    /// (dotted or in hex groups), is that IPv4 address.
    #[test]
    fn an_ipv4_address_however_written_is_itself(
        a in any::<Ipv4Addr>(),
        pads in prop::collection::vec(0usize..4, 4),
        form in 0usize..4,
    ) {
        let [o0, o1, o2, o3] = a.octets();
        let text = match form {
            0 => v4_text(a, &pads),
            1 => format!("::ffff:{}", v4_text(a, &pads)),
            2 => format!("0:0:0:0:0:{}:{}", padded(0xffff, pads[0], true), v4_text(a, &pads)),
            _ => format!(
                "::ffff:{}:{}",
                padded(u32::from(u16::from_be_bytes([o0, o1])), pads[1], true),
                padded(u32::from(u16::from_be_bytes([o2, o3])), pads[2], true),
            ),
        };
        prop_assert_eq!(parse_ip(&text), Some(IpAddr::V4(a)), "{}", text);
        prop_assert_eq!(model_ip(&text), Some(IpAddr::V4(a)), "{}", text);
    }

    /// Every IPv6 address, compressed or in eight padded groups, is itself
    /// (folded to IPv4 where it is mapped).
    #[test]
    fn an_ipv6_address_however_written_is_itself(
        a in any::<Ipv6Addr>(),
        pads in prop::collection::vec(0usize..3, 8),
        compressed in any::<bool>(),
    ) {
        let text = if compressed {
            a.to_string()
        } else {
            a.segments()
                .iter()
                .zip(&pads)
                .map(|(g, p)| padded(u32::from(*g), *p, true))
                .collect::<Vec<_>>()
                .join(":")
        };
        prop_assert_eq!(parse_ip(&text), Some(a.to_canonical()), "{}", text);
        prop_assert_eq!(model_ip(&text), Some(a.to_canonical()), "{}", text);
    }

    /// Every network, its mask with leading zeros, is the network the model reads.
    #[test]
    fn a_cidr_however_written_is_the_models(
        a in any::<Ipv6Addr>(),
        prefix in 0u8..=128,
        pad in 0usize..3,
        v4 in any::<bool>(),
    ) {
        let text = if v4 {
            let b = Ipv4Addr::from(a.to_bits().to_be_bytes()[..4].try_into().unwrap_or([0; 4]));
            format!("{}/{}", v4_text(b, &[pad, 0, pad, 0]), padded(u32::from(prefix % 33), pad, false))
        } else {
            format!("{a}/{}", padded(u32::from(prefix), pad, false))
        };
        let got = parse_cidr(&text).map(|c| (c.ip, c.net));
        prop_assert!(got.is_some(), "{}", text);
        prop_assert_eq!(got, model_cidr(&text), "{}", text);
    }
}
