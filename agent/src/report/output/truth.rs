//! The node's truth table for people: per address, the namespaces holding it
//! (host interface, nsid, peer), the host's per-pod route, the pods the API
//! places there.

use std::fmt::Write as _;

use super::table::{line, widths};
use crate::inventory::{TruthRow, TruthTable};

const HEADER: [&str; 4] = [
    "ADDRESS",
    "HELD BY (iface nsid peer)",
    "HOST ROUTE",
    "API PODS",
];

/// The section `check` prints after the findings.
pub(super) fn section(t: &TruthTable) -> String {
    let mut out = String::from("\n");
    if let Some(why) = &t.skipped {
        let _ = writeln!(out, "kernel truth: not read: {why}");
        return out;
    }
    let _ = writeln!(
        out,
        "kernel truth: {} pod namespace(s) behind {} host interface(s), {} unread",
        t.namespaces,
        t.interfaces,
        t.unread.len()
    );
    for u in &t.unread {
        let _ = writeln!(out, "  nsid {} ({}): {}", u.nsid, u.iface, u.reason);
    }
    if t.rows.is_empty() {
        return out;
    }
    let rows: Vec<[String; 4]> = t.rows.iter().map(cells).collect();
    let widths = widths(&HEADER, &rows);
    let _ = writeln!(out, "{}", line(&HEADER, &widths));
    for r in &rows {
        let _ = writeln!(out, "{}", line(r, &widths));
    }
    out
}

fn cells(r: &TruthRow) -> [String; 4] {
    let or_dash = |v: Vec<String>| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.join(", ")
        }
    };
    let held = r
        .holders
        .iter()
        .map(|h| {
            let peer = h.peer.as_deref().unwrap_or("?");
            format!("{} {} {peer}", h.iface, h.nsid)
        })
        .collect();
    let pods = r
        .pods
        .iter()
        .map(|p| format!("{} ({})", p.pod, p.phase.as_deref().unwrap_or("?")))
        .collect();
    let route = r.route.as_ref().map_or_else(
        || "-".to_owned(),
        |x| match x.state {
            Some(s) if !s.carries() => format!("{} ({s})", x.route),
            _ => x.route.clone(),
        },
    );
    [r.ip.to_string(), or_dash(held), route, or_dash(pods)]
}
