//! Kubernetes Events (events.k8s.io/v1) for findings, so `kubectl describe pod`
//! says what is wrong and how to fix it.
//!
//! One Event object per series (regarding object, reason, IP). Its name is a
//! hash of those, so an agent that restarts finds its series again (create
//! answers 409, and the series continues with a count PATCH) instead of
//! starting a new one; kube-runtime's Recorder keeps its series in memory only.
//! Repeats bump `series.count` at most every 30 s. A series whose finding
//! clears gets a Normal `IPCollisionResolved`.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::{
        core::v1::ObjectReference,
        events::v1::{Event, EventSeries},
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};

use crate::{
    daemon::traffic::{SeriesKey, Totals},
    detect::{Finding, FindingKind},
};

/// `reportingController` of every Event ipshadow writes.
pub const REPORTING_CONTROLLER: &str = "ipshadow.io/agent";
pub const ACTION: &str = "Detect";
pub const REASON_RESOLVED: &str = "IPCollisionResolved";
pub const REASON_TRAFFIC: &str = "HostTrafficBlackholed";
/// events.k8s.io/v1 rejects notes longer than 1 kB.
const NOTE_MAX: usize = 1024;
/// Repeats of a series are counted at most this often.
pub const REPEAT_EVERY: Duration = Duration::from_secs(30);

/// One Event series this node should have.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    pub regarding: ObjectReference,
    /// Where the Event object lives: the pod's namespace, `default` for a Node.
    pub namespace: String,
    pub reason: String,
    pub ip: String,
    pub warning: bool,
    pub note: String,
}

impl Desired {
    fn id(&self) -> (String, String, String) {
        let who = self
            .regarding
            .uid
            .clone()
            .or_else(|| self.regarding.name.clone())
            .unwrap_or_default();
        (who, self.reason.clone(), self.ip.clone())
    }

    /// A stable, valid object name: `<regarding name>.ipshadow.<fnv64 of the series id>`.
    pub fn event_name(&self) -> String {
        let (who, reason, ip) = self.id();
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
        let mut base: String = self.regarding.name.clone().unwrap_or_default();
        base.truncate(200);
        format!("{base}.ipshadow.{h:016x}")
    }
}

fn truncate_note(note: &str) -> String {
    if note.len() <= NOTE_MAX {
        return note.to_owned();
    }
    let mut end = NOTE_MAX - 3;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &note[..end])
}

fn pod_ref(f: &Finding) -> Option<(ObjectReference, String)> {
    let p = f.pod.as_ref()?;
    Some((
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            name: Some(p.name.clone()),
            namespace: Some(p.namespace.clone()),
            uid: Some(p.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        },
        p.namespace.clone(),
    ))
}

/// The Event series this node reports for `findings` and `traffic` (pure).
///
/// Who writes what: the pod's node reports collisions of its own pods; the
/// owner node reports non-Cilium local-address collisions of pods elsewhere and
/// the host traffic it delivers locally (`HostTrafficBlackholed`); a node
/// reports its own allocator overlaps on its Node.
pub fn desired(
    findings: &[Finding],
    traffic: &[(SeriesKey, Totals)],
    node: &str,
    node_uid: Option<&str>,
) -> Vec<Desired> {
    let mut out = Vec::new();
    for f in findings {
        if f.kind == FindingKind::AllocatorOverlap {
            out.push(Desired {
                regarding: ObjectReference {
                    api_version: Some("v1".to_owned()),
                    kind: Some("Node".to_owned()),
                    name: Some(node.to_owned()),
                    uid: node_uid.map(str::to_owned),
                    ..Default::default()
                },
                namespace: "default".to_owned(),
                reason: f.kind.as_str().to_owned(),
                ip: f.ip.to_string(),
                warning: true,
                note: truncate_note(&f.message),
            });
            continue;
        }
        let mine = f.pod_node.as_deref() == Some(node)
            || (f.owner.node == node && f.kind == FindingKind::LocalAddressCollision);
        if let (true, Some((regarding, namespace))) = (mine, pod_ref(f)) {
            out.push(Desired {
                regarding,
                namespace,
                reason: f.kind.as_str().to_owned(),
                ip: f.ip.to_string(),
                warning: true,
                note: truncate_note(&f.message),
            });
        }
    }
    for (key, totals) in traffic.iter().filter(|(_, t)| t.packets > 0) {
        let Some(f) = findings.iter().find(|f| {
            f.ip == key.ip
                && f.pod
                    .as_ref()
                    .is_some_and(|p| p.name == key.pod && p.namespace == key.namespace)
        }) else {
            continue;
        };
        let Some((regarding, namespace)) = pod_ref(f) else {
            continue;
        };
        let note = format!(
            "Node {node}'s host sent {} packets to {} (this pod's IP), {} of them TCP connection attempts, \
             and its own stack refused {}: they were delivered to {node} itself (seen by ipshadow's eBPF \
             classifier on lo), not to this pod. Kubelet probes and webhooks from {node} cannot reach it. {}",
            totals.packets,
            key.ip,
            totals.tcp_syns,
            totals.refused,
            f.message
                .split_once("Fix:")
                .map_or(String::new(), |(_, fix)| format!("Fix:{fix}"))
        );
        out.push(Desired {
            regarding,
            namespace,
            reason: REASON_TRAFFIC.to_owned(),
            ip: key.ip.to_string(),
            warning: true,
            note: truncate_note(&note),
        });
    }
    out
}

struct Series {
    desired: Desired,
    count: i32,
    last: Instant,
}

/// Writes and updates the Events of one node.
pub struct EventWriter {
    client: Client,
    node: String,
    series: BTreeMap<(String, String, String), Series>,
    /// IPCollisionResolved Events that could not be written yet (API down).
    unresolved: BTreeMap<(String, String, String), Desired>,
}

impl EventWriter {
    pub fn new(client: Client, node: &str) -> Self {
        Self {
            client,
            node: node.to_owned(),
            series: BTreeMap::new(),
            unresolved: BTreeMap::new(),
        }
    }

    /// Makes the cluster's Events match `want`: new series are created (or
    /// continued after a restart), repeats counted at most every 30 s, cleared
    /// collisions resolved. Errors are logged per Event and retried next time.
    /// Returns how many writes failed.
    pub async fn sync(&mut self, want: &[Desired]) -> usize {
        let mut failed = 0;
        let ids: BTreeSet<_> = want.iter().map(Desired::id).collect();
        // A collision that came back needs no resolution any more.
        self.unresolved.retain(|id, _| !ids.contains(id));
        for d in want {
            let id = d.id();
            match self.series.get(&id) {
                None => match self.open(d).await {
                    Ok(count) => {
                        self.series.insert(
                            id,
                            Series {
                                desired: d.clone(),
                                count,
                                last: Instant::now(),
                            },
                        );
                    }
                    Err(e) => {
                        failed += 1;
                        tracing::warn!(reason = %d.reason, event = %d.event_name(), error = %e, "writing an Event failed; retrying later")
                    }
                },
                Some(s) if s.last.elapsed() >= REPEAT_EVERY => {
                    let count = s.count + 1;
                    match self.bump(d, count).await {
                        Ok(()) => {
                            if let Some(s) = self.series.get_mut(&id) {
                                s.count = count;
                                s.last = Instant::now();
                            }
                        }
                        Err(e) => {
                            failed += 1;
                            tracing::warn!(event = %d.event_name(), error = %e, "updating an Event failed; retrying later")
                        }
                    }
                }
                Some(_) => {}
            }
        }
        let cleared: Vec<_> = self
            .series
            .keys()
            .filter(|id| !ids.contains(*id))
            .cloned()
            .collect();
        for id in cleared {
            let Some(s) = self.series.remove(&id) else {
                continue;
            };
            if s.desired.reason == REASON_TRAFFIC || s.desired.reason == REASON_RESOLVED {
                continue;
            }
            let resolved = Desired {
                reason: REASON_RESOLVED.to_owned(),
                warning: false,
                note: truncate_note(&format!(
                    "{} for IP {} cleared: ipshadow on node {} no longer sees the collision.",
                    s.desired.reason, s.desired.ip, self.node
                )),
                ..s.desired.clone()
            };
            self.unresolved.insert(id, resolved);
        }
        let pending = std::mem::take(&mut self.unresolved);
        for (id, resolved) in pending {
            if let Err(e) = self.open(&resolved).await {
                failed += 1;
                tracing::warn!(event = %resolved.event_name(), error = %e, "writing IPCollisionResolved failed; retrying later");
                self.unresolved.insert(id, resolved);
            }
        }
        failed
    }

    /// Creates the series' Event, or continues it if it exists (a restart): the count it is at now.
    async fn open(&self, d: &Desired) -> Result<i32, kube::Error> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &d.namespace);
        let name = d.event_name();
        let now = MicroTime(Timestamp::now());
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(d.namespace.clone()),
                ..Default::default()
            },
            event_time: Some(now),
            reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
            reporting_instance: Some(self.node.clone()),
            action: Some(ACTION.to_owned()),
            reason: Some(d.reason.clone()),
            regarding: Some(d.regarding.clone()),
            note: Some(d.note.clone()),
            type_: Some(if d.warning { "Warning" } else { "Normal" }.to_owned()),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ev).await {
            Ok(_) => {
                tracing::info!(event = %name, reason = %d.reason, regarding = ?d.regarding.name, "Event created");
                Ok(1)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let existing = api.get(&name).await?;
                let count = existing.series.as_ref().map_or(1, |s| s.count) + 1;
                self.bump(d, count).await?;
                tracing::info!(event = %name, count, "continuing an existing Event series");
                Ok(count)
            }
            Err(e) => Err(e),
        }
    }

    async fn bump(&self, d: &Desired, count: i32) -> Result<(), kube::Error> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &d.namespace);
        let patch = serde_json::json!({
            "series": EventSeries { count, last_observed_time: MicroTime(Timestamp::now()) }
        });
        api.patch(
            &d.event_name(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        Ok(())
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn series_count(&self) -> usize {
        self.series.len()
    }
}
