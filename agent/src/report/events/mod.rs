//! Kubernetes Events (events.k8s.io/v1) for findings, so `kubectl describe pod`
//! says what is wrong and how to fix it.
//!
//! One Event object per series (regarding object, reason, IP). Its name is a
//! hash of those, so an agent that restarts finds its series again (create
//! answers 409, and the series continues with a count PATCH) instead of
//! starting a new one; kube-runtime's Recorder keeps its series in memory only.
//! Repeats bump `series.count` at most every 30 s. A series whose finding
//! clears gets a Normal `IPCollisionResolved`.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;

use super::{
    message::{self, Reader},
    traffic::Traffic,
};
use crate::{
    detect::{Finding, audit::rank},
    inventory::{IpSource, text::clean},
};

/// `reportingController` of every Event ipshadow writes.
pub const REPORTING_CONTROLLER: &str = "ipshadow.io/agent";
/// `action` of every Event.
pub const ACTION: &str = "Detect";
/// The reason of the Normal Event written when a finding clears.
pub const REASON_RESOLVED: &str = "IPCollisionResolved";
/// The reason of the Event about host traffic the eBPF observer saw.
pub const REASON_TRAFFIC: &str = "HostTrafficBlackholed";
/// The reason of the one Node Event standing for the pod series beyond the cap.
pub const REASON_MANY: &str = "ManyShadowedPods";
/// events.k8s.io/v1 rejects notes longer than 1 kB.
const NOTE_MAX: usize = 1024;
/// How often a live series is written back by default: client-go's events
/// library's `refreshTime`, which also keeps series past the API server's 1 h
/// Event TTL.
pub const REFRESH_EVERY: Duration = Duration::from_mins(30);

/// One Event series this node should have.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The Pod or Node the Event is about.
    pub regarding: ObjectReference,
    /// Where the Event object lives: the pod's namespace, `default` for a Node.
    pub namespace: String,
    /// The Event's reason (a finding kind, or one of the `REASON_*`).
    pub reason: String,
    /// The IP the series is about.
    pub ip: String,
    /// Warning (or Normal).
    pub warning: bool,
    /// The note, at most 1 kB.
    pub note: String,
    /// Which series the cap and the write budget keep first (lowest first):
    /// what speaks for the node before hints, then by how much breaks.
    pub priority: u8,
    /// Whether it rests on what a tenant can write (a hint): such series are
    /// capped apart and never counted in the Node's aggregate.
    pub hint: bool,
}

/// What identifies a series: (regarding uid or name, reason, IP).
pub type SeriesId = (String, String, String);

impl Desired {
    /// The series this Event belongs to.
    pub fn id(&self) -> SeriesId {
        let who = self
            .regarding
            .uid
            .clone()
            .or_else(|| self.regarding.name.clone())
            .unwrap_or_default();
        (who, self.reason.clone(), self.ip.clone())
    }

    /// A Warning series about `f`'s address, in `namespace`.
    fn warning(f: &Finding, (regarding, namespace): (ObjectReference, String), note: &str) -> Self {
        Self {
            regarding,
            namespace,
            reason: f.kind.as_str().to_owned(),
            ip: f.ip_text(),
            warning: true,
            note: truncate_note(note),
            priority: priority(f),
            hint: !f.trust.speaks_for_node(),
        }
    }

    /// A stable, valid object name: `<regarding name>.ipshadow.<fnv64 of the series id>`.
    pub fn event_name(&self) -> String {
        let (who, reason, ip) = self.id();
        let name = self.regarding.name.as_deref().unwrap_or_default();
        series_name(name, (&who, &reason, &ip))
    }
}

/// The object name of the series (regarding uid or name, reason, IP) about
/// the object named `regarding`: `<regarding>.ipshadow.<fnv64 of the id>`.
/// Predictable on purpose (a restarted agent finds its series); the writer
/// moves a series whose name someone else took (`kube::recorder`).
pub fn series_name(regarding: &str, (who, reason, ip): (&str, &str, &str)) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in who
        .bytes()
        .chain([0])
        .chain(reason.bytes())
        .chain([0])
        .chain(ip.bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut base = regarding.to_owned();
    base.truncate(200);
    format!("{base}.ipshadow.{h:016x}")
}

/// `note` made safe (no control or bidi character) and cut to what
/// events.k8s.io/v1 accepts.
pub fn truncate_note(note: &str) -> String {
    let note = clean(note);
    if note.len() <= NOTE_MAX {
        return note.into_owned();
    }
    let end = note.floor_char_boundary(NOTE_MAX - 3);
    format!("{}…", &note[..end])
}

/// `f`'s pod as an Event's `regarding` object, and its namespace.
fn pod_ref(f: &Finding) -> Option<(ObjectReference, String)> {
    let p = f.pod()?;
    let uid = Some(p.uid.as_str()).filter(|u| !u.is_empty());
    let pod = object_ref("Pod", &p.name, Some(&p.namespace), uid);
    Some((pod, p.namespace.clone()))
}

/// The Event series this node reports for `findings` and `traffic` (pure).
///
/// Who writes what: the pod's node reports collisions of its own pods; the
/// owner node reports non-Cilium local-address collisions of pods elsewhere and
/// the host traffic it delivers locally (`HostTrafficBlackholed`); a node
/// reports its own allocator overlaps on its Node.
#[tracing::instrument(skip_all, fields(findings = findings.len(), traffic = traffic.len()))]
pub fn desired(
    findings: &[Finding],
    (traffic, impacts): (&Traffic, &super::Impacts),
    node: &str,
    node_uid: Option<&str>,
) -> Vec<Desired> {
    let mut out = Vec::new();
    for f in findings.iter().filter(|f| reported_here(f, node)) {
        if f.is_node_level() {
            // A hint (kubelet's Events alone, which a tenant can forge) never
            // speaks for the node.
            if f.trust.speaks_for_node() {
                let text = message::note(f, Reader::Node, None);
                let node_ref = object_ref("Node", node, None, node_uid);
                out.push(Desired::warning(f, (node_ref, "default".to_owned()), &text));
            }
        } else if let Some((regarding, namespace)) = pod_ref(f) {
            // The pod's namespace reads it: nothing another namespace holds.
            // What breaks behind the pod leads the note, when already looked up.
            let impact = f.pod().and_then(|p| impacts.get(p));
            let text = message::note(f, Reader::Namespace(&namespace), impact);
            out.push(Desired::warning(f, (regarding, namespace), &text));
        }
    }
    out.extend(traffic_series(findings, traffic, node));
    out
}

/// The `HostTrafficBlackholed` series: host traffic the eBPF observer saw
/// delivered to the node instead of a pod with a finding.
fn traffic_series(findings: &[Finding], traffic: &Traffic, node: &str) -> Vec<Desired> {
    traffic
        .iter()
        .filter(|(_, t)| t.packets > 0)
        .filter_map(|(key, totals)| {
            let f = findings.iter().find(|f| {
                f.ip == Some(key.ip)
                    && f.pod()
                        .is_some_and(|p| p.name == key.pod && p.namespace == key.namespace)
            })?;
            let (regarding, namespace) = pod_ref(f)?;
            let text = format!(
                "{} {}",
                message::traffic(
                    node,
                    key.ip,
                    (totals.packets, totals.tcp_syns, totals.refused)
                ),
                message::fix(&f.remedy, Reader::Namespace(&namespace))
            );
            Some(Desired {
                reason: REASON_TRAFFIC.to_owned(),
                // Traffic seen delivered to the node: harm happening now.
                priority: priority(f).saturating_sub(1),
                ..Desired::warning(f, (regarding, namespace), &text)
            })
        })
        .collect()
}

/// The order series are kept in under the cap and the budget: whatever
/// speaks for the node before hints (a tenant's forged Events must not crowd
/// out real findings), then by how much breaks ([`rank`]).
fn priority(f: &Finding) -> u8 {
    let hint = if f.trust.speaks_for_node() { 0 } else { 50 };
    rank(f)
        .saturating_mul(2)
        .saturating_add(1)
        .saturating_add(hint)
}

/// Whether `node` reports `f` (a Warning, the Node condition): its node
/// findings, its own pods' confirmed findings, and its non-Cilium local
/// addresses held by pods elsewhere. An address that rests on an annotation
/// alone is not: anyone who may edit a pod can write one (it stays a finding,
/// marked unconfirmed).
pub fn reported_here(f: &Finding, node: &str) -> bool {
    if f.is_node_level() {
        return true;
    }
    if f.site()
        .is_some_and(|s| s.ip_source == IpSource::Annotation)
    {
        return false;
    }
    f.pod_node() == Some(node) || (f.owner.node == node && f.kind.spec().owner_reports)
}

/// A Pod or Node as an Event's `regarding` object.
fn object_ref(kind: &str, name: &str, ns: Option<&str>, uid: Option<&str>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some(kind.to_owned()),
        name: Some(name.to_owned()),
        namespace: ns.map(str::to_owned),
        uid: uid.map(str::to_owned),
        ..Default::default()
    }
}

fn is_pod_warning(d: &Desired) -> bool {
    d.warning && d.regarding.kind.as_deref() == Some("Pod")
}

/// Pod Warnings first, by priority, then (reason, namespace, name, IP): a stable order.
fn series_order(d: &Desired) -> (bool, u8, &str, &str, Option<&str>, &str) {
    (
        !is_pod_warning(d),
        d.priority,
        &d.reason,
        &d.namespace,
        d.regarding.name.as_deref(),
        &d.ip,
    )
}

/// At most `max` Warning series about pods, the most important first; the
/// rest become one Warning Event on the Node that counts them by reason and
/// names a few, so a node with thousands of findings writes a bounded number
/// of objects (the metrics still carry every finding). Hints are capped apart,
/// at `max` too, and the rest dropped: a tenant that floods them crowds out no
/// real finding and gets no pod counted or named on the Node. The result is in
/// the order the write budget should go: by priority.
pub fn cap(want: Vec<Desired>, max: usize, node: &str, node_uid: Option<&str>) -> Vec<Desired> {
    let by_order = |a: &Desired, b: &Desired| series_order(a).cmp(&series_order(b));
    let (mut hints, mut want): (Vec<Desired>, Vec<Desired>) =
        want.into_iter().partition(|d| is_pod_warning(d) && d.hint);
    hints.sort_by(by_order);
    hints.truncate(max);
    want.sort_by(by_order);
    let pod_warnings = want.iter().filter(|d| is_pod_warning(d)).count();
    if pod_warnings > max {
        let rest: Vec<Desired> = want.drain(max..pod_warnings).collect();
        // First: it speaks for the most pods, and the write budget goes in order.
        want.insert(0, many(&rest, max, node, node_uid));
    }
    want.append(&mut hints);
    // Stable: the aggregate (priority 0) stays first.
    want.sort_by_key(|d| d.priority);
    want
}

/// The Node Event standing for the pod series `rest` beyond the cap of `max`.
fn many(rest: &[Desired], max: usize, node: &str, node_uid: Option<&str>) -> Desired {
    let mut by_reason: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for d in rest {
        *by_reason.entry(d.reason.as_str()).or_default() += 1;
    }
    let counts = message::list(by_reason.iter().map(|(r, n)| format!("{r} x{n}")));
    let examples = message::list(rest.iter().take(5).map(|d| {
        format!(
            "{}/{}",
            d.namespace,
            d.regarding.name.as_deref().unwrap_or("")
        )
    }));
    Desired {
        regarding: object_ref("Node", node, None, node_uid),
        namespace: "default".to_owned(),
        reason: REASON_MANY.to_owned(),
        ip: String::new(),
        warning: true,
        note: truncate_note(&format!(
            "{} more pods on or holding addresses of node {node} have findings than ipshadow writes \
             one Event each for (at most {max} per node): {counts}; e.g. {examples}. Every finding \
             is in ipshadow_collision_info on this node's agent, and `ipshadow check` on the node \
             lists them.",
            rest.len()
        )),
        priority: 0,
        hint: false,
    }
}

#[cfg(test)]
mod tests;
