//! Printing a [`Report`]: JSON as DESIGN.md fixes it, or a table for people.

use std::fmt::Write as _;

use serde::Serialize;

use crate::{check::Report, detect::Finding};

#[derive(Serialize)]
struct JsonReport<'a> {
    node: &'a str,
    findings: &'a [Finding],
}

pub fn json(report: &Report) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&JsonReport {
        node: &report.node,
        findings: &report.findings,
    })
}

pub fn table(report: &Report) -> String {
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
    let header = [
        "KIND",
        "SCOPE",
        "IP",
        "POD",
        "POD NODE",
        "OWNER (node/role/device)",
    ];
    let rows: Vec<[String; 6]> = report
        .findings
        .iter()
        .map(|f| {
            [
                f.kind.to_string(),
                f.scope.to_string(),
                f.ip.to_string(),
                f.pod
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), ToString::to_string),
                f.pod_node.clone().unwrap_or_else(|| "-".to_owned()),
                format!(
                    "{}/{}/{}",
                    f.owner.node,
                    f.owner.role,
                    f.owner.device.as_deref().unwrap_or("-")
                ),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<w$}  ");
            }
        }
        l
    };
    let _ = writeln!(out, "{}", line(&header));
    for (r, f) in rows.iter().zip(&report.findings) {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&cells));
        for l in wrap(&f.message, 96) {
            let _ = writeln!(out, "    {l}");
        }
    }
    out
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

    #[test]
    fn an_empty_report_says_so() {
        let r = Report {
            node: "n".into(),
            findings: vec![],
            invalid: vec![],
        };
        assert_eq!(table(&r), "node n: no shadowed pod IPs\n");
        let v: serde_json::Value = serde_json::from_str(&json(&r).expect("json")).expect("parses");
        assert_eq!(v, serde_json::json!({"node": "n", "findings": []}));
    }
}
