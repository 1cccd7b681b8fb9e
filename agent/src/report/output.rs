//! Printing a [`Report`]: JSON as DESIGN.md fixes it, or a table for people.

use std::{fmt::Write as _, net::IpAddr};

use serde::Serialize;

use super::{Report, evidence::Evidence, message};
use crate::{
    detect::{
        Cause, Finding, FindingKind, KubeletReport, NodeProblem, Owner, PodRef, Scope, Trust,
        impact::{Impact, Severity},
    },
    inventory::IpSource,
};

#[derive(Serialize)]
struct JsonReport<'a> {
    node: &'a str,
    findings: Vec<JsonFinding<'a>>,
}

/// The JSON contract of one finding (DESIGN.md): fields may be added, never renamed.
#[derive(Serialize)]
pub(super) struct JsonFinding<'a> {
    kind: FindingKind,
    scope: Scope,
    ip: Option<IpAddr>,
    pod: Option<&'a PodRef>,
    owner: &'a Owner,
    message: String,
    /// The node the pod runs on (`owner.node` is the address's owner).
    pod_node: Option<&'a str>,
    /// `status` or `annotation` (pod not started yet).
    ip_source: Option<&'a IpSource>,
    /// The host's FIB answer for the IP, `ip route get`-like.
    fib: Option<String>,
    /// A pod route that the local address shadows.
    shadowed_route: Option<&'a str>,
    /// AllocatorOverlap: the kube-ovn Subnet that may hand the address out.
    subnet: Option<&'a str>,
    /// AllocatorOverlap: Cilium's allocation range involved.
    cilium_range: Option<String>,
    /// Host traffic to the IP that the eBPF classifier saw delivered locally.
    evidence: Option<&'a Evidence>,
    /// kubelet's FailedCreatePodSandBox report the finding rests on.
    kubelet: Option<&'a KubeletReport>,
    /// DuplicatePodIP: the other pod holding the address.
    holder: Option<&'a PodRef>,
    /// `critical` (the kube-apiserver calls through the pod), `high` (a Service
    /// backend) or `warning`.
    severity: &'static str,
    /// The Services holding the pod and who calls through them, when known.
    impact: Option<JsonImpact>,
    /// Who could have written what it rests on: `kernel`, `cluster`,
    /// `unchecked`, `tenant-address` or `hint`.
    trust: Trust,
    /// The Service whose address shadows the pod (external IPs, a
    /// load-balancer IP), when one does.
    service: Option<JsonService<'a>>,
}

/// A finding's `service` in JSON.
#[derive(Serialize)]
pub(super) struct JsonService<'a> {
    namespace: &'a str,
    name: &'a str,
    field: &'static str,
}

/// A finding's `impact` in JSON.
#[derive(Serialize)]
pub(super) struct JsonImpact {
    services: Vec<String>,
    callers: Vec<JsonCaller>,
}

#[derive(Serialize)]
struct JsonCaller {
    kind: &'static str,
    name: String,
    webhook: Option<String>,
}

fn json_impact(i: &Impact) -> JsonImpact {
    JsonImpact {
        services: i
            .services
            .iter()
            .map(|s| format!("{}/{}", s.namespace, s.name))
            .collect(),
        callers: i
            .callers
            .iter()
            .map(|c| {
                let (kind, name, webhook) = message::caller(c);
                JsonCaller {
                    kind,
                    name: name.to_owned(),
                    webhook: webhook.map(str::to_owned),
                }
            })
            .collect(),
    }
}

/// The message of a finding, with the evidence's sentence when there is one.
pub fn message_with_evidence(f: &Finding, evidence: Option<&Evidence>, node: &str) -> String {
    let mut m = message::render(f);
    if let (Some(e), Some(ip)) = (evidence, f.ip) {
        m.push(' ');
        m.push_str(&e.sentence(ip, node));
    }
    m
}

/// The message with what breaks behind it first, when that is known.
fn message_with_impact(
    f: &Finding,
    evidence: Option<&Evidence>,
    node: &str,
    impact: Option<&Impact>,
) -> String {
    let m = message_with_evidence(f, evidence, node);
    match impact.and_then(message::impact_sentence) {
        Some(i) => format!("{i} {m}"),
        None => m,
    }
}

/// One finding as JSON; `node` is the node that saw `evidence`.
pub(super) fn json_finding<'a>(
    f: &'a Finding,
    evidence: Option<&'a Evidence>,
    node: &str,
    impact: Option<&Impact>,
) -> JsonFinding<'a> {
    let (fib, shadowed_route, subnet, cilium_range) = match &f.cause {
        Cause::Collision {
            fib,
            shadowed_route,
            ..
        } => (fib.clone(), shadowed_route.as_deref(), None, None),
        Cause::Blackhole { dead_end, .. } => (Some(dead_end.to_string()), None, None, None),
        Cause::Refused { .. } | Cause::Duplicate { .. } | Cause::Node(_) => {
            (None, None, None, None)
        }
        Cause::Overlap {
            subnet,
            cilium_range,
            ..
        } => (
            None,
            None,
            Some(subnet.as_str()),
            cilium_range.map(|(r, _)| r.to_string()),
        ),
    };
    JsonFinding {
        kind: f.kind,
        scope: f.scope,
        ip: f.ip,
        pod: f.pod(),
        owner: &f.owner,
        message: message_with_impact(f, evidence, node, impact),
        pod_node: f.pod_node(),
        ip_source: f.site().map(|s| &s.ip_source),
        fib,
        shadowed_route,
        subnet,
        cilium_range,
        evidence,
        kubelet: match &f.cause {
            Cause::Collision {
                kubelet: Some(k), ..
            }
            | Cause::Refused { kubelet: k, .. }
            | Cause::Node(NodeProblem::Exhausted { kubelet: k, .. }) => Some(k),
            _ => None,
        },
        holder: match &f.cause {
            Cause::Refused { holder, .. } => holder.as_ref(),
            Cause::Duplicate { holder, .. } => Some(holder),
            _ => None,
        },
        severity: impact.map_or(Severity::Warning, Impact::severity).as_str(),
        impact: impact.map(json_impact),
        trust: f.trust,
        service: match &f.cause {
            Cause::Collision {
                service: Some(a), ..
            } => Some(JsonService {
                namespace: &a.service.namespace,
                name: &a.service.name,
                field: a.field.as_str(),
            }),
            _ => None,
        },
    }
}

/// The report as the JSON DESIGN.md fixes, pretty-printed.
pub fn json(report: &Report) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&JsonReport {
        node: &report.node,
        findings: report
            .findings
            .iter()
            .map(|f| {
                let impact = f.pod().and_then(|p| report.impacts.get(p));
                json_finding(f, report.evidence_of(f), &report.node, impact)
            })
            .collect(),
    })
}

/// The report as a table for people, each row's message wrapped under it;
/// nothing from outside reaches the terminal as a control sequence.
pub fn table(report: &Report) -> String {
    crate::inventory::text::clean_lines(&table_text(report)).into_owned()
}

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
    let header = [
        "KIND",
        "SCOPE",
        "IP",
        "POD",
        "POD NODE",
        "OWNER (node/role/device)",
        "TRUST",
    ];
    let rows: Vec<[String; 7]> = report
        .findings
        .iter()
        .map(|f| {
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
        let impact = f.pod().and_then(|p| report.impacts.get(p));
        let m = message_with_impact(f, report.evidence_of(f), &report.node, impact);
        for l in wrap(&m, 96) {
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
    fn findings_serialize_to_the_json_contract() {
        use crate::{
            detect::detect,
            inventory::fixtures::{ME, inventory, pod},
        };
        let inv = inventory(vec![pod("postgres-0", ME, &["10.244.4.251"])]);
        let report = Report {
            node: ME.into(),
            findings: detect(&inv),
            ..Report::default()
        };
        let v: serde_json::Value =
            serde_json::from_str(&json(&report).expect("json")).expect("parses");
        let f = &v["findings"][0];
        assert_eq!(f["kind"], "RouterIPCollision");
        assert_eq!(f["scope"], "same-node");
        assert_eq!(f["ip"], "10.244.4.251");
        assert_eq!(f["pod"]["namespace"], "tenant");
        assert_eq!(f["pod"]["name"], "postgres-0");
        assert_eq!(f["pod"]["uid"], "uid-postgres-0");
        assert_eq!(f["owner"]["node"], ME);
        assert_eq!(f["owner"]["role"], "router");
        assert_eq!(f["owner"]["device"], "cilium_host");
        assert_eq!(f["pod_node"], ME);
        assert_eq!(f["ip_source"], "status");
        assert_eq!(f["fib"], "local dev lo");
        assert!(f["evidence"].is_null() && f["subnet"].is_null());
        assert!(
            f["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Pod tenant/postgres-0"))
        );
    }

    #[test]
    fn an_empty_report_says_so() {
        let r = Report {
            node: "n".into(),
            ..Report::default()
        };
        assert_eq!(table(&r), "node n: no shadowed pod IPs\n");
        let v: serde_json::Value = serde_json::from_str(&json(&r).expect("json")).expect("parses");
        assert_eq!(v, serde_json::json!({"node": "n", "findings": []}));
    }
}
