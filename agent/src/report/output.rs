//! Printing a [`Report`]: the JSON of docs/reference.md#json-output, or a table for people.

mod cause;
mod format;
mod table;
mod truth;

use std::net::IpAddr;

use serde::Serialize;

use self::cause::CauseFields;
pub use self::{
    format::{EncodeError, OutputFormat, encode_json, encode_yaml},
    table::table,
};
use super::{Report, evidence::Evidence, message};
use crate::{
    detect::{
        Finding, FindingKind, InfraAddress, KubeletReport, Owner, PodRef, Scope, Trust,
        impact::Impact,
    },
    inventory::IpSource,
};

/// The report in `format`.
pub fn render(report: &Report, format: OutputFormat) -> Result<String, EncodeError> {
    match format {
        OutputFormat::Table => Ok(table(report, false)),
        OutputFormat::Wide => Ok(table(report, true)),
        OutputFormat::Json => encode_json(&document(report), "report"),
        OutputFormat::Yaml => encode_yaml(&document(report), "report"),
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    node: &'a str,
    findings: Vec<JsonFinding<'a>>,
    /// `check`: the node's truth table (what the pods' namespaces hold).
    #[serde(skip_serializing_if = "Option::is_none")]
    truth_table: Option<&'a crate::inventory::TruthTable>,
}

/// The JSON contract of one finding (docs/reference.md#json-output): fields may be added, never renamed.
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
    /// An allocator overlap: the kube-ovn Subnet that may hand the address out.
    subnet: Option<&'a str>,
    /// An allocator overlap: Cilium's allocation range involved.
    cilium_range: Option<String>,
    /// An allocator overlap: every address of Cilium's the Subnet may hand out
    /// (`ip` is the first), with its role; one finding per range and Subnet.
    addresses: Option<&'a [InfraAddress]>,
    /// Host traffic to the IP that the eBPF classifier saw delivered locally.
    evidence: Option<&'a Evidence>,
    /// kubelet's FailedCreatePodSandBox report the finding rests on.
    kubelet: Option<&'a KubeletReport>,
    /// A duplicate: the other pod holding the address.
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
    /// Kernel-truth findings: the truth-table row (the namespaces holding the
    /// address, the host's per-pod route, the pods the API places there), where
    /// the route leads instead, and the other pod concerned.
    kernel: Option<JsonKernel<'a>>,
}

/// A kernel-truth finding's evidence in JSON.
#[derive(Serialize)]
pub(super) struct JsonKernel<'a> {
    #[serde(flatten)]
    row: &'a crate::inventory::TruthRow,
    reached: Option<&'a crate::inventory::Holder>,
    other_pod: Option<&'a PodRef>,
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

/// The message of a finding: what breaks behind it first, when that is
/// known, and the evidence's sentence last, when there is one.
fn message_with_impact(
    f: &Finding,
    evidence: Option<&Evidence>,
    node: &str,
    impact: Option<&Impact>,
) -> String {
    let mut m = impact
        .and_then(message::impact_sentence)
        .map_or_else(String::new, |i| format!("{i} "));
    m.push_str(&message::render(f));
    if let (Some(e), Some(ip)) = (evidence, f.ip) {
        m.push(' ');
        m.push_str(&e.sentence(ip, node));
    }
    m
}

/// One finding as JSON; `node` is the node that saw `evidence`.
pub(super) fn json_finding<'a>(
    f: &'a Finding,
    evidence: Option<&'a Evidence>,
    node: &str,
    impact: Option<&Impact>,
) -> JsonFinding<'a> {
    let c = CauseFields::of(&f.cause);
    JsonFinding {
        kind: f.kind,
        scope: f.scope,
        ip: f.ip,
        pod: f.pod(),
        owner: &f.owner,
        message: message_with_impact(f, evidence, node, impact),
        pod_node: f.pod_node(),
        ip_source: f.site().map(|s| &s.ip_source),
        fib: c.fib,
        shadowed_route: c.shadowed_route,
        subnet: c.subnet,
        cilium_range: c.cilium_range,
        addresses: c.addresses,
        evidence,
        kubelet: c.kubelet,
        holder: c.holder,
        severity: super::severity(impact),
        impact: impact.map(json_impact),
        trust: f.trust,
        service: c.service,
        kernel: c.kernel,
    }
}

/// The truth-table row of `f`'s address, when `check` read one.
fn truth_row<'a>(report: &'a Report, f: &Finding) -> Option<&'a crate::inventory::TruthRow> {
    let ip = f.ip?;
    report.truth.as_ref()?.rows.iter().find(|r| r.ip == ip)
}

/// The document `json` and `yaml` print.
fn document(report: &Report) -> JsonReport<'_> {
    JsonReport {
        node: &report.node,
        findings: report
            .findings
            .iter()
            .map(|f| {
                let impact = f.pod().and_then(|p| report.impacts.get(p));
                let mut j = json_finding(f, report.evidence_of(f), &report.node, impact);
                // Any finding gains what the pods' namespaces hold of its address.
                if j.kernel.is_none()
                    && let Some(row) = truth_row(report, f)
                {
                    j.kernel = Some(JsonKernel {
                        row,
                        reached: None,
                        other_pod: None,
                    });
                }
                j
            })
            .collect(),
        truth_table: report.truth.as_ref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report as docs/reference.md#json-output fixes it, pretty-printed.
    fn json(report: &Report) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(&document(report))
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
    fn kubelets_whole_message_is_in_json_and_an_excerpt_in_the_text() {
        use std::sync::Arc;

        use crate::{
            detect::detect,
            inventory::{
                SandboxFailure, SandboxRefusal,
                fixtures::{ME, inventory, pod},
            },
        };
        // cilium#9793's refusal: 419 bytes, "range is full" at its end.
        let whole = "(combined from similar events): Failed create pod sandbox: rpc error: code = \
            Unknown desc = failed to set up sandbox container \"49a1e22aa6f14f5da53b6ab0fe253a20303246c3e31299bbd489b09a814cab12\" \
            network for pod \"coredns-5c98db65d4-h5vwr\": NetworkPlugin cni failed to set up pod \
            \"coredns-5c98db65d4-h5vwr_kube-system\" network: unable to allocate IP via local cilium \
            agent: [POST /ipam][502] postIpamFailure range is full";
        let mut p = pod("web", ME, &[]);
        p.phase = Some("Pending".into());
        let mut inv = inventory(vec![p]);
        inv.cluster.sandbox = Arc::new(vec![SandboxFailure {
            namespace: "tenant".into(),
            pod: "web".into(),
            uid: "uid-web".into(),
            refusal: SandboxRefusal::NoAddressLeft,
            count: 2412,
            message: whole.into(),
        }]);
        let report = Report {
            node: ME.into(),
            findings: detect(&inv),
            ..Report::default()
        };
        let v: serde_json::Value =
            serde_json::from_str(&json(&report).expect("json")).expect("parses");
        let f = &v["findings"][0];
        assert!(whole.len() > 400);
        assert_eq!(f["kubelet"]["message"], whole);
        let text = f["message"].as_str().expect("message");
        // The excerpt: its head cut between words, the reason at its end.
        assert!(
            text.contains("times: \"…NetworkPlugin cni")
                && text.contains("postIpamFailure range is full\"."),
            "{text}"
        );
        assert!(!text.contains(whole), "{text}");
    }

    #[test]
    fn yaml_is_the_json_document() {
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
        let json = render(&report, OutputFormat::Json).expect("json");
        let json: serde_json::Value = serde_json::from_str(&json).expect("JSON parses");
        let yaml = render(&report, OutputFormat::Yaml).expect("yaml");
        let yaml: serde_json::Value = serde_norway::from_str(&yaml).expect("YAML parses");
        assert_eq!(json["findings"][0]["kind"], "RouterIPCollision");
        assert_eq!(yaml, json);
    }

    #[test]
    fn an_empty_report_says_so() {
        let r = Report {
            node: "n".into(),
            ..Report::default()
        };
        assert_eq!(table(&r, false), "node n: no shadowed pod IPs\n");
        let v: serde_json::Value = serde_json::from_str(&json(&r).expect("json")).expect("parses");
        assert_eq!(v, serde_json::json!({"node": "n", "findings": []}));
    }
}
