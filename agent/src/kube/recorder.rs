//! Writes the Event series of one node to the API server, the way client-go's
//! events library does: one object per series, repeats counted in place.
//!
//! One Event object per series (regarding object, reason, IP). Its name is a
//! hash of those, so an agent that restarts finds its series again (create
//! answers 409, and the series continues with a count PATCH) instead of
//! starting a new one; kube-runtime's Recorder keeps its series in memory only.
//! Repeats bump `series.count` at most every 30 s. A series whose finding
//! clears gets a Normal `IPCollisionResolved`.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Instant,
};

use k8s_openapi::{
    api::events::v1::{Event, EventSeries},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};

use crate::report::events::{
    ACTION, Desired, REASON_RESOLVED, REASON_TRAFFIC, REPEAT_EVERY, REPORTING_CONTROLLER, SeriesId,
    truncate_note,
};

struct Series {
    desired: Desired,
    count: i32,
    last: Instant,
}

/// Writes and updates the Events of one node.
pub struct EventWriter {
    client: Client,
    node: String,
    series: BTreeMap<SeriesId, Series>,
    /// IPCollisionResolved Events that could not be written yet (API down).
    unresolved: BTreeMap<SeriesId, Desired>,
}

impl EventWriter {
    /// A writer for `node`'s Events.
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
    #[tracing::instrument(skip_all, fields(node = %self.node, series = want.len()))]
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
                        tracing::warn!(reason = %d.reason, event = %d.event_name(), error = %e, "writing an Event failed; retrying later");
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
                            tracing::warn!(event = %d.event_name(), error = %e, "updating an Event failed; retrying later");
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
    #[tracing::instrument(skip_all, fields(event = %d.event_name(), reason = %d.reason))]
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

    #[tracing::instrument(skip_all, fields(event = %d.event_name(), count))]
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

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Series open now.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }
}
