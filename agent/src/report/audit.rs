//! Printing an [`Audit`]: a table grouped by node, the most severe first, or
//! JSON; both say what an audit cannot see.

use std::fmt::Write as _;

use serde::Serialize;

use super::{
    Report,
    output::{self, EncodeError, JsonFinding, OutputFormat},
    plural,
};
use crate::{
    detect::{Cause, FindingKind, audit::Audit},
    inventory::{PlanOwner, Planned, Purpose, Unlisted},
};

/// What only the agent on a node sees, and why (each kind's
/// `unseen_by_audit`, then traffic evidence): said instead of guessed.
pub fn not_checked() -> Vec<(&'static str, &'static str)> {
    FindingKind::all()
        .filter_map(|k| Some((k.as_str(), k.spec().unseen_by_audit?)))
        .chain([(
            "traffic evidence",
            "host traffic delivered to the node instead of the pod is seen by the eBPF \
             classifier on the node",
        )])
        .collect()
}

#[derive(Serialize)]
struct JsonAudit<'a> {
    nodes_checked: usize,
    pods_checked: usize,
    findings: usize,
    nodes: Vec<JsonNode<'a>>,
    address_plan: JsonPlan<'a>,
    not_checked: Vec<JsonNotChecked>,
}

/// The address plan's overlaps (`address_plan`).
#[derive(Serialize)]
struct JsonPlan<'a> {
    ranges_checked: usize,
    overlaps: Vec<JsonOverlap<'a>>,
    /// The kinds that could not be listed: their ranges are not checked.
    not_listed: &'a [Unlisted],
}

#[derive(Serialize)]
struct JsonOverlap<'a> {
    kind: &'static str,
    /// `first..last` of the addresses both give.
    shared: String,
    /// The range to change.
    change: JsonRange<'a>,
    other: JsonRange<'a>,
    /// Changing `other` does as well.
    either: bool,
    /// More objects of `other`'s kind overlapped, named up to a few.
    more: &'a [String],
    more_count: usize,
    message: String,
}

#[derive(Serialize)]
struct JsonRange<'a> {
    #[serde(flatten)]
    owner: &'a PlanOwner,
    range: &'a str,
    purpose: Purpose,
    #[serde(skip_serializing_if = "Option::is_none")]
    domain: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
}

impl<'a> JsonRange<'a> {
    fn of(p: &'a Planned) -> Self {
        Self {
            owner: &p.owner,
            range: &p.text,
            purpose: p.purpose,
            domain: p.domain.as_deref(),
            node: p.node.as_deref(),
        }
    }
}

fn plan_document(audit: &Audit) -> JsonPlan<'_> {
    let overlaps = audit
        .plan
        .iter()
        .filter_map(|f| match &f.cause {
            Cause::Plan(o) => Some(JsonOverlap {
                kind: f.kind.as_str(),
                shared: o.shared.to_string(),
                change: JsonRange::of(&o.change),
                other: JsonRange::of(&o.other),
                either: o.either,
                more: &o.more.0,
                more_count: o.more.1,
                message: super::message::render(f),
            }),
            _ => None,
        })
        .collect();
    JsonPlan {
        ranges_checked: audit.ranges_checked,
        overlaps,
        not_listed: &audit.plan_unlisted,
    }
}

#[derive(Serialize)]
struct JsonNode<'a> {
    node: &'a str,
    findings: Vec<JsonFinding<'a>>,
}

#[derive(Serialize)]
struct JsonNotChecked {
    kind: &'static str,
    why: &'static str,
}

/// The audit in `format`.
pub fn render(audit: &Audit, format: OutputFormat) -> Result<String, EncodeError> {
    match format {
        OutputFormat::Table => Ok(text(audit, false)),
        OutputFormat::Wide => Ok(text(audit, true)),
        OutputFormat::Json => output::encode_json(&document(audit), "audit"),
        OutputFormat::Yaml => output::encode_yaml(&document(audit), "audit"),
    }
}

/// The document `json` and `yaml` print.
fn document(audit: &Audit) -> JsonAudit<'_> {
    JsonAudit {
        nodes_checked: audit.nodes_checked,
        pods_checked: audit.pods_checked,
        findings: audit.findings().count(),
        nodes: audit
            .nodes
            .iter()
            .map(|n| JsonNode {
                node: &n.node,
                findings: n
                    .findings
                    .iter()
                    .map(|f| {
                        let impact = f.pod().and_then(|p| audit.impacts.get(p));
                        output::json_finding(f, None, &n.node, impact)
                    })
                    .collect(),
            })
            .collect(),
        address_plan: plan_document(audit),
        not_checked: not_checked()
            .into_iter()
            .map(|(kind, why)| JsonNotChecked { kind, why })
            .collect(),
    }
}

/// The audit for people: a summary, then each node's table (as `-o wide`
/// prints it, when `wide`), then what was not checked.
fn text(audit: &Audit, wide: bool) -> String {
    let mut out = String::new();
    let findings = audit.findings().count();
    let _ = writeln!(
        out,
        "audited {} node{} and {} pod{}: {}",
        audit.nodes_checked,
        plural(audit.nodes_checked),
        audit.pods_checked,
        plural(audit.pods_checked),
        if findings == 0 {
            "no shadowed pod IPs".to_owned()
        } else {
            format!(
                "{findings} finding{} on {} node{}",
                plural(findings),
                audit.nodes.len(),
                plural(audit.nodes.len())
            )
        }
    );
    for n in &audit.nodes {
        out.push('\n');
        let report = Report {
            node: n.node.clone(),
            findings: n.findings.clone(),
            impacts: audit.impacts.clone(),
            ..Report::default()
        };
        out.push_str(&output::table(&report, wide));
    }
    plan_text(&mut out, audit);
    let _ = writeln!(
        out,
        "\nNot checked without the node's kernel (run the agent, or `ipshadow check` on the node):"
    );
    let unseen = not_checked();
    let width = unseen.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (kind, why) in unseen {
        let _ = writeln!(out, "  {kind:<width$}  {why}");
    }
    crate::inventory::text::clean_lines(&out).into_owned()
}

/// The address plan's overlaps, each as its message.
fn plan_text(out: &mut String, audit: &Audit) {
    let n = audit.plan.len();
    let _ = writeln!(
        out,
        "\naddress plan: {} range{} checked, {}",
        audit.ranges_checked,
        plural(audit.ranges_checked),
        if n == 0 {
            "no overlap that will collide".to_owned()
        } else {
            format!("{n} overlap{} that will collide:", plural(n))
        }
    );
    for f in &audit.plan {
        let _ = writeln!(out, "  - {}", super::message::render(f));
    }
    for u in &audit.plan_unlisted {
        let _ = writeln!(
            out,
            "  not listed, its ranges not checked: {}: {}",
            u.resource, u.reason
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_an_audit_cannot_see_are_real_kinds_and_left_out() {
        // The kinds an audit can report: every kind but those only a kernel shows.
        let reported: Vec<_> = FindingKind::all()
            .filter(|k| k.spec().unseen_by_audit.is_none())
            .collect();
        assert!(reported.contains(&FindingKind::DuplicatePodIp));
        assert!(reported.contains(&FindingKind::AddressPlanOverlap));
        assert!(!reported.contains(&FindingKind::HostRouteBlackhole));
        assert!(!reported.contains(&FindingKind::LocalAddressCollision));
        assert!(!reported.contains(&FindingKind::PodRouteMisdirected));
    }

    #[test]
    fn wide_names_the_other_pod_on_a_shared_address() {
        use std::sync::Arc;

        use crate::inventory::{
            ClusterState,
            fixtures::{cilium_nodes, pod},
        };
        let state = ClusterState {
            pods: Arc::new(vec![
                pod("cache-0", "node-a", &["10.244.9.60"]),
                pod("cache-1", "node-b", &["10.244.9.60"]),
            ]),
            cilium_nodes: Arc::new(cilium_nodes()),
            ..ClusterState::default()
        };
        let a = crate::detect::audit::audit(&state, "cilium_host", &mut |_, _| {});
        let text = super::text(&a, true);
        let row = text
            .lines()
            .find(|l| l.starts_with("DuplicatePodIP"))
            .unwrap_or_else(|| panic!("no duplicate:\n{text}"));
        assert!(row.ends_with("pod tenant/cache-0"), "{row}");
        let narrow = super::text(&a, false);
        assert!(!narrow.contains("HELD OR CLAIMED BY"), "{narrow}");
    }

    #[test]
    fn an_empty_audit_says_so_and_what_it_did_not_check() {
        let t = text(
            &Audit {
                nodes_checked: 3,
                pods_checked: 10,
                ..Audit::default()
            },
            false,
        );
        assert!(
            t.starts_with("audited 3 nodes and 10 pods: no shadowed pod IPs"),
            "{t}"
        );
        assert!(t.contains("HostRouteBlackhole"), "{t}");
        let j: serde_json::Value =
            serde_json::from_str(&render(&Audit::default(), OutputFormat::Json).expect("json"))
                .expect("valid JSON");
        assert_eq!(
            j["not_checked"].as_array().map(Vec::len),
            Some(not_checked().len())
        );
    }
}
