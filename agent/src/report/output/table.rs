//! The table of a [`Report`] for people: a row per finding, its message
//! wrapped under it.

use std::fmt::Write as _;

use super::{Report, cause::CauseFields, message_with_impact};
use crate::{
    detect::{Finding, impact::Impact},
    report::{plural, severity},
};

/// The report as a table for people, each row's message wrapped under it;
/// nothing from outside reaches the terminal as a control sequence. `wide`:
/// with the columns kubectl's `-o wide` would add: the severity, where the
/// pod's address was read, the kernel's route for it, and who else holds or
/// claims it (a pod, a Service, a kube-ovn Subnet).
pub fn table(report: &Report, wide: bool) -> String {
    let mut text = table_text(report, wide);
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

/// The columns `-o wide` adds after them.
const WIDE: [&str; 4] = ["SEVERITY", "IP SOURCE", "FIB", "HELD OR CLAIMED BY"];

fn table_text(report: &Report, wide: bool) -> String {
    let mut out = String::new();
    if report.findings.is_empty() {
        let _ = writeln!(out, "node {}: no shadowed pod IPs", report.node);
        return out;
    }
    let n = report.findings.len();
    let _ = writeln!(out, "node {}: {n} finding{}", report.node, plural(n));
    let impact = |f: &Finding| f.pod().and_then(|p| report.impacts.get(p));
    let header: Vec<&str> = HEADER
        .iter()
        .chain(wide.then_some(&WIDE).into_iter().flatten())
        .copied()
        .collect();
    let rows: Vec<Vec<String>> = report
        .findings
        .iter()
        .map(|f| {
            let mut r = row(f);
            if wide {
                r.extend(wide_cells(f, impact(f)));
            }
            r
        })
        .collect();
    let widths = widths(&header, &rows);
    let _ = writeln!(out, "{}", line(&header, &widths));
    for (r, f) in rows.iter().zip(&report.findings) {
        let _ = writeln!(out, "{}", line(r, &widths));
        let m = message_with_impact(f, report.evidence_of(f), &report.node, impact(f));
        for l in wrap(&m, 96) {
            let _ = writeln!(out, "    {l}");
        }
    }
    out
}

fn row(f: &Finding) -> Vec<String> {
    vec![
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

/// The cells of [`WIDE`]: what the JSON has and the narrow table leaves out.
fn wide_cells(f: &Finding, impact: Option<&Impact>) -> [String; WIDE.len()] {
    let cause = CauseFields::of(&f.cause);
    let other = match (cause.holder, &cause.service, cause.subnet) {
        (Some(pod), _, _) => format!("pod {pod}"),
        (None, Some(s), _) => format!("service {}/{} ({})", s.namespace, s.name, s.field),
        (None, None, Some(subnet)) => format!("subnet {subnet}"),
        (None, None, None) => "-".to_owned(),
    };
    [
        severity(impact).to_owned(),
        f.site()
            .map_or_else(|| "-".to_owned(), |s| s.ip_source.to_string()),
        cause.fib.unwrap_or_else(|| "-".to_owned()),
        other,
    ]
}

/// Each column's width: its widest cell, or its header.
pub(super) fn widths(header: &[&str], rows: &[impl AsRef<[String]>]) -> Vec<usize> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r.as_ref()) {
            *w = (*w).max(cell.len());
        }
    }
    widths
}

/// One line of the table: each cell padded to its column's width but the last.
pub(super) fn line(cells: &[impl AsRef<str>], widths: &[usize]) -> String {
    let mut l = String::new();
    for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
        let c = c.as_ref();
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
    use crate::{
        detect::detect,
        inventory::fixtures::{ME, inventory, pod},
    };

    #[test]
    fn wide_adds_the_columns_json_has_and_text_leaves_out() {
        let report = Report {
            node: ME.into(),
            findings: detect(&inventory(vec![pod("postgres-0", ME, &["10.244.4.251"])])),
            ..Report::default()
        };
        let header = |t: &str| t.lines().nth(1).map(str::to_owned).unwrap_or_default();
        let (narrow, wide) = (table(&report, false), table(&report, true));
        assert!(header(&narrow).ends_with("TRUST"), "{narrow}");
        assert!(
            header(&wide).ends_with("SEVERITY  IP SOURCE  FIB           HELD OR CLAIMED BY"),
            "{wide}"
        );
        let row: Vec<&str> = wide
            .lines()
            .nth(2)
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(
            row[row.len() - 6..],
            ["warning", "status", "local", "dev", "lo", "-"],
            "{wide}"
        );
    }

    #[test]
    fn wrap_keeps_every_word_and_the_width() {
        let text = "one two three four five six seven eight nine ten eleven twelve";
        let lines = wrap(text, 14);
        assert!(lines.iter().all(|l| l.len() <= 14), "{lines:?}");
        assert_eq!(lines.join(" "), text);
    }
}
