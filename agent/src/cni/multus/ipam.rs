//! The ranges of the three IPAMs that write them in a NAD's config:
//! whereabouts (k8snetworkplumbingwg/whereabouts `pkg/config/config.go`,
//! `pkg/iphelpers`, read at 3a262bd0), host-local and static
//! (containernetworking/plugins `plugins/ipam`, read at 3d27709f).

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::Value;

use super::{ATTACHMENTS, MAX_RANGES, Reader, str_at, text_at};
use crate::cni::plan::invalid;
use crate::inventory::{
    IpRange,
    ip_text::{parse_cidr, parse_ip},
    step,
};

/// whereabouts: `range` (with `range_start`, `range_end`, `exclude`) first,
/// then each of `ipRanges`, as whereabouts merges them. It never hands out a
/// range's network address nor its last address (`GetIPRange`), of either
/// family.
pub(super) fn whereabouts(ipam: &Value, r: &mut Reader<'_>) {
    let network = str_at(ipam, "network_name").unwrap_or("");
    let overlapping = ipam
        .get("enable_overlapping_ranges")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let share = |net: &IpNet| {
        // Overlapping ranges on: cluster-wide reservations per network_name
        // stop one IP being given twice; off: only the same pool shares.
        Some(if overlapping {
            format!("whereabouts {network}")
        } else {
            format!("whereabouts {network} {net}")
        })
    };
    if text_at(ipam, "range").is_some_and(|t| !t.is_empty()) && r.room() {
        whereabouts_entry(ipam, "spec.config ipam.range", &share, r);
    }
    let ranges = ipam.get("ipRanges").and_then(Value::as_array);
    for entry in ranges.into_iter().flatten() {
        if !r.room() {
            return;
        }
        whereabouts_entry(entry, "spec.config ipam.ipRanges", &share, r);
    }
}

fn whereabouts_entry(
    e: &Value,
    field: &'static str,
    share: &dyn Fn(&IpNet) -> Option<String>,
    r: &mut Reader<'_>,
) {
    let written = text_at(e, "range").unwrap_or_default();
    let bound = |k| text_at(e, k).map(|t| parse_ip(&t).ok_or(t));
    let (net, start, end) = if let Some((a, b)) = written.split_once('-') {
        // `<first-ip>-<cidr>`: the start, then the end with the prefix.
        match (parse_ip(a), parse_cidr(b)) {
            (Some(first), Some(c)) if c.net.contains(&first) => (c.net, Some(first), Some(c.ip)),
            _ => return r.bad(field, &written, "is neither a CIDR nor <first-ip>-<cidr>"),
        }
    } else {
        let Some(cidr) = parse_cidr(&written) else {
            return r.bad(field, &written, "is no CIDR");
        };
        match (
            bound("range_start").transpose(),
            bound("range_end").transpose(),
        ) {
            (Ok(from), Ok(to)) => (cidr.net, from, to),
            (Err(bad), _) | (_, Err(bad)) => {
                return r.bad(
                    field,
                    &written,
                    &format!("has a bound {bad:?} that is no IP"),
                );
            }
        }
    };
    let whole = IpRange::of(&net);
    // `GetIPRange`: never the first nor the last address; a bound outside
    // the usable ones is ignored.
    let usable = match (step(whole.first, 1), step(whole.last, -1)) {
        (Some(first), Some(last)) if first <= last => IpRange { first, last },
        _ => return r.bad(field, &written, "holds no address whereabouts can hand out"),
    };
    let first = start.filter(|s| usable.contains(*s)).unwrap_or(whole.first);
    let last = end
        .filter(|t| usable.contains(*t) && first <= *t)
        .unwrap_or(whole.last);
    let mut exclude = excludes(e, field, r);
    exclude.extend(singles(&[whole.first, whole.last], first, last));
    let text = with_bounds(&written, e, "range_start", "range_end");
    let p = r.push("whereabouts", field, IpRange { first, last }, text);
    p.exclude = exclude;
    p.shared = share(&net);
}

/// An entry's `exclude` CIDRs; a bad one is named and left out.
fn excludes(e: &Value, field: &str, r: &mut Reader<'_>) -> Vec<IpRange> {
    let list = e.get("exclude").and_then(Value::as_array);
    if list.is_some_and(|l| l.len() > MAX_RANGES) {
        let problem = format!(
            "{field} excludes more than {MAX_RANGES} CIDRs; the rest are not read: addresses \
             they exclude may be reported as shared"
        );
        r.invalid
            .push(invalid(&ATTACHMENTS, r.object.clone(), problem));
    }
    let mut out = Vec::new();
    for x in list.into_iter().flatten().take(MAX_RANGES) {
        let t = x.as_str().map_or_else(|| x.to_string(), str::to_owned);
        if let Some(c) = parse_cidr(&t) {
            out.push(IpRange::of(&c.net));
        } else {
            let problem =
                format!("{field} exclude {t:?} is no CIDR: the range is checked without it");
            r.invalid
                .push(invalid(&ATTACHMENTS, r.object.clone(), problem));
        }
    }
    out
}

/// host-local: the flat range (`subnet`, …) first, then each set of
/// `ranges`, as host-local merges them.
pub(super) fn host_local(ipam: &Value, r: &mut Reader<'_>) {
    if ipam.get("subnet").is_some() && r.room() {
        host_local_range(ipam, "spec.config ipam.subnet", r);
    }
    let sets = ipam.get("ranges").and_then(Value::as_array);
    for set in sets.into_iter().flatten() {
        for range in set.as_array().into_iter().flatten() {
            if !r.room() {
                return;
            }
            host_local_range(range, "spec.config ipam.ranges", r);
        }
    }
}

/// One host-local range (`Range.Canonicalize`): rangeStart..rangeEnd within
/// `subnet`; never the network address, the gateway (default: the first
/// address) nor an IPv4 broadcast.
fn host_local_range(e: &Value, field: &'static str, r: &mut Reader<'_>) {
    let written = text_at(e, "subnet").unwrap_or_default();
    let Some(c) = parse_cidr(&written) else {
        return r.bad(field, &written, "is no CIDR");
    };
    if c.ip != c.net.network() {
        return r.bad(
            field,
            &written,
            "has host bits set, which host-local refuses",
        );
    }
    if c.net.max_prefix_len() - c.net.prefix_len() < 2 {
        return r.bad(field, &written, "is too small for host-local to hand out");
    }
    let whole = IpRange::of(&c.net);
    let mut ip_of = |k: &str, default: IpAddr| match text_at(e, k) {
        None => Some(default),
        Some(t) => parse_ip(&t).filter(|ip| whole.contains(*ip)).or_else(|| {
            r.bad(
                field,
                &written,
                &format!("has a {k} {t:?} that is no address of it"),
            );
            None
        }),
    };
    let Some(first) = ip_of("rangeStart", whole.first) else {
        return;
    };
    let Some(last) = ip_of("rangeEnd", whole.last) else {
        return;
    };
    if first > last {
        return r.bad(field, &written, "has its rangeStart after its rangeEnd");
    }
    let default_gateway = step(whole.first, 1).unwrap_or(whole.first);
    let gateway = text_at(e, "gateway")
        .and_then(|t| parse_ip(&t))
        .unwrap_or(default_gateway);
    let mut never = vec![whole.first, gateway];
    if whole.last.is_ipv4() {
        never.push(whole.last);
    }
    let exclude = singles(&never, first, last);
    let text = with_bounds(&written, e, "rangeStart", "rangeEnd");
    r.push("host-local", field, IpRange { first, last }, text)
        .exclude = exclude;
}

/// static: each of `addresses` is given to every pod of the attachment.
/// Without addresses, each pod asks for its own (`ips`): nothing to read.
pub(super) fn static_addresses(ipam: &Value, r: &mut Reader<'_>) {
    let field = "spec.config ipam.addresses";
    let list = ipam.get("addresses").and_then(Value::as_array);
    for a in list.into_iter().flatten() {
        if !r.room() {
            return;
        }
        let written = text_at(a, "address").unwrap_or_default();
        let Some(c) = parse_cidr(&written) else {
            r.bad(field, &written, "is no <ip>/<prefix>");
            continue;
        };
        r.push("static", field, IpRange::of(&c.ip.into()), written);
    }
}

/// The one-address ranges of `ips` within `first..=last`, once each.
fn singles(ips: &[IpAddr], first: IpAddr, last: IpAddr) -> Vec<IpRange> {
    let range = IpRange { first, last };
    let mut out: Vec<IpRange> = Vec::new();
    for &ip in ips {
        let one = IpRange::of(&ip.into());
        if range.contains(ip) && !out.contains(&one) {
            out.push(one);
        }
    }
    out
}

/// The range as written, with its bounds when set: `10.0.0.0/16 from 10.0.1.20 to 10.0.3.50`.
fn with_bounds(written: &str, e: &Value, from: &str, to: &str) -> String {
    let mut text = written.to_owned();
    for (word, key) in [("from", from), ("to", to)] {
        if let Some(v) = text_at(e, key) {
            text = format!("{text} {word} {v}");
        }
    }
    text
}

#[cfg(test)]
#[path = "ipam_tests.rs"]
mod tests;
