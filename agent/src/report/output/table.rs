//! The table of a [`Report`] for people: a row per finding, its message
//! wrapped under it.

use std::fmt::Write as _;

use super::{Report, message_with_impact};
use crate::detect::Finding;

/// The report as a table for people, each row's message wrapped under it;
/// nothing from outside reaches the terminal as a control sequence.
pub fn table(report: &Report) -> String {
    let mut text = table_text(report);
    if let Some(t) = &report.truth {
        text.push_str(&super::truth::section(t));
    }
    crate::inventory::text::clean_lines(&text).into_owned()
}

/// The table's columns.
const HEADER: [&str; 7] = [
    "KIND",
    "SCOPE",
    "IP",
    "POD",
    "POD NODE",
    "OWNER (node/role/device)",
    "TRUST",
];

/// One finding's cells, column by column.
type Row = [String; HEADER.len()];

fn table_text(report: &Report) -> String {
    let mut out = String::new();
    if report.findings.is_empty() {
        let _ = writeln!(out, "node {}: no shadowed pod IPs", report.node);
        return out;
    }
    let n = report.findings.len();
    let _ = writeln!(
        out,
        "node {}: {n} finding{}",
        report.node,
        if n == 1 { "" } else { "s" }
    );
    let rows: Vec<Row> = report.findings.iter().map(row).collect();
    let widths = widths(&rows);
    let _ = writeln!(out, "{}", line(&HEADER, widths));
    for (r, f) in rows.iter().zip(&report.findings) {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&cells, widths));
        let impact = f.pod().and_then(|p| report.impacts.get(p));
        let m = message_with_impact(f, report.evidence_of(f), &report.node, impact);
        for l in wrap(&m, 96) {
            let _ = writeln!(out, "    {l}");
        }
    }
    out
}

fn row(f: &Finding) -> Row {
    [
        f.kind.to_string(),
        f.scope.to_string(),
        f.ip.map_or_else(|| "-".to_owned(), |ip| ip.to_string()),
        f.pod().map_or_else(|| "-".to_owned(), ToString::to_string),
        f.pod_node().unwrap_or("-").to_owned(),
        format!(
            "{}/{}/{}",
            f.owner.node,
            f.owner.role,
            f.owner.device.as_deref().unwrap_or("-")
        ),
        f.trust.to_string(),
    ]
}

/// Each column's width: its widest cell, or its header.
fn widths(rows: &[Row]) -> [usize; HEADER.len()] {
    let mut widths = HEADER.map(str::len);
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    widths
}

/// One line of the table: each cell padded to its column's width but the last.
fn line(cells: &[&str], widths: [usize; HEADER.len()]) -> String {
    let mut l = String::new();
    for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
        if i + 1 == cells.len() {
            l.push_str(c);
        } else {
            let _ = write!(l, "{c:<w$}  ");
        }
    }
    l
}

/// Greedy word wrap for the message lines under each row.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_every_word_and_the_width() {
        let text = "one two three four five six seven eight nine ten eleven twelve";
        let lines = wrap(text, 14);
        assert!(lines.iter().all(|l| l.len() <= 14), "{lines:?}");
        assert_eq!(lines.join(" "), text);
    }
}
