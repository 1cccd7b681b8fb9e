//! Writes the Event series of one node to the API server, the way client-go's
//! events library does: one object per series, repeats counted in place.
//!
//! One Event object per series (regarding object, reason, IP). Its name is a
//! hash of those, so an agent that restarts finds its series again (create
//! answers 409, and the series continues with a count PATCH) instead of
//! starting a new one; kube-runtime's Recorder keeps its series in memory only.
//! A live series' `series.count` is written back every refresh period (30
//! minutes by default, client-go's `refreshTime`). A series whose finding
//! clears gets a Normal `IPCollisionResolved`.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Instant,
};

use k8s_openapi::{
    api::events::v1::{Event, EventSeries},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};

use super::pace::Budget;

mod object;
use crate::report::events::{Desired, REASON_RESOLVED, REASON_TRAFFIC, SeriesId, truncate_note};

struct Series {
    desired: Desired,
    /// The Event object it is written to: the predictable name, or a fresh
    /// one where someone else's object holds that.
    name: String,
    count: i32,
    last: Instant,
}

/// The write a series is due for.
enum Write {
    /// Create its Event (or continue it after a restart).
    Open,
    /// Write back this count to the named object.
    Bump(String, i32),
}

/// Writes and updates the Events of one node.
pub struct EventWriter {
    client: Client,
    node: String,
    /// How often a live series is written back.
    refresh: std::time::Duration,
    /// A per-node write budget, so that a burst of findings (or an API
    /// server back after an outage) is written at a bounded rate.
    budget: Budget,
    series: BTreeMap<SeriesId, Series>,
    /// IPCollisionResolved Events that could not be written yet (API down).
    unresolved: BTreeMap<SeriesId, Desired>,
    /// Series a permanent error ended, until their finding goes.
    ended: BTreeSet<SeriesId>,
}

/// What one [`EventWriter::sync`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Event objects created (new series, re-created ones, resolutions).
    pub created: u64,
    /// Series counts written back (continued after a restart, or refreshed).
    pub patched: u64,
    /// Writes that failed and will be retried.
    pub failed: u64,
    /// Series ended for good by a permanent error (namespace gone or
    /// terminating, an object the API server rejects).
    pub dropped: u64,
    /// Writes put off because the budget was spent (not failures).
    pub deferred: u64,
}

impl SyncStats {
    /// Series (and resolutions) not written yet: the failed and the put off.
    pub fn pending(&self) -> u64 {
        self.failed + self.deferred
    }
}

/// Whether an API error will not go away by retrying: the namespace is gone
/// (404 on create) or terminating (403), or the server rejects the object (422).
fn permanent(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if matches!(s.code, 403 | 404 | 422))
}

impl EventWriter {
    /// A writer for `node`'s Events; live series are written back every `refresh`.
    pub fn new(client: Client, node: &str, refresh: std::time::Duration, budget: Budget) -> Self {
        Self {
            client,
            node: node.to_owned(),
            refresh,
            budget,
            series: BTreeMap::new(),
            unresolved: BTreeMap::new(),
            ended: BTreeSet::new(),
        }
    }

    /// Makes the cluster's Events match `want`, the way client-go's events
    /// library does: new series are created (or continued after a restart),
    /// live ones written back every `refresh` (which also keeps them past the
    /// API server's Event TTL; one deleted meanwhile is created again), cleared
    /// collisions resolved. Transient errors are logged per Event and retried
    /// next time; a permanent one ends the series with one log line.
    #[tracing::instrument(skip_all, fields(node = %self.node, series = want.len()))]
    pub async fn sync(&mut self, want: &[Desired], leaving: &BTreeSet<String>) -> SyncStats {
        let mut stats = SyncStats::default();
        let ids: BTreeSet<_> = want.iter().map(Desired::id).collect();
        // A collision that came back needs no resolution any more; an ended
        // series whose finding went may start again when it returns.
        self.unresolved.retain(|id, _| !ids.contains(id));
        self.ended.retain(|id| ids.contains(id));
        for d in want {
            let id = d.id();
            let Some(write) = self.due(&id) else {
                continue;
            };
            if !self.budget.take() {
                stats.deferred += 1;
                continue;
            }
            let written = self.write(d, write).await;
            self.record(id, d, written, &mut stats);
        }
        self.end_cleared(&ids, leaving);
        self.resolve_cleared(&mut stats).await;
        stats
    }

    /// The write series `id` is due for now, if any.
    fn due(&self, id: &SeriesId) -> Option<Write> {
        if self.ended.contains(id) {
            return None;
        }
        match self.series.get(id) {
            None => Some(Write::Open),
            Some(s) if s.last.elapsed() >= self.refresh => {
                Some(Write::Bump(s.name.clone(), s.count.saturating_add(1)))
            }
            Some(_) => None,
        }
    }

    /// Writes `d`'s Event as `write` says: the object and the series' count then.
    async fn write(&self, d: &Desired, write: Write) -> Result<(String, i32), kube::Error> {
        match write {
            Write::Open => self.open(d).await,
            Write::Bump(name, count) => match self.bump(d, &name, count).await {
                Ok(()) => Ok((name, count)),
                // Deleted under a live series (the TTL, or by hand), or replaced
                // by an object the agent may not update (the admission policy's
                // 403): open it again, under a fresh name if need be.
                Err(kube::Error::Api(e)) if matches!(e.code, 403 | 404) => {
                    tracing::info!(event = %name, code = e.code, "the Event of a live series is gone or no longer the agent's; writing it again");
                    self.open(d).await
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Counts and keeps series `id` at the count written, ends it after a
    /// permanent error, or leaves it to be retried.
    fn record(
        &mut self,
        id: SeriesId,
        d: &Desired,
        written: Result<(String, i32), kube::Error>,
        stats: &mut SyncStats,
    ) {
        match written {
            Ok((name, count)) => {
                // A series starts at 1: any other count was written back.
                if count == 1 {
                    stats.created += 1;
                } else {
                    stats.patched += 1;
                }
                self.series.insert(
                    id,
                    Series {
                        desired: d.clone(),
                        name,
                        count,
                        last: Instant::now(),
                    },
                );
            }
            Err(e) if permanent(&e) => {
                stats.dropped += 1;
                tracing::warn!(reason = %d.reason, event = %d.event_name(), namespace = %d.namespace, error = %e, "the API server refuses this Event for good (namespace gone or terminating, or an invalid object); its series ends here");
                self.series.remove(&id);
                self.ended.insert(id);
            }
            Err(e) => {
                stats.failed += 1;
                tracing::warn!(reason = %d.reason, event = %d.event_name(), error = %e, "writing an Event failed; retrying later");
            }
        }
    }

    /// Ends every series whose finding is gone: a resolution to write for
    /// each, except for the series of a pod being deleted (uid in `leaving`),
    /// which end quietly — nothing was fixed, the pod is going.
    fn end_cleared(&mut self, ids: &BTreeSet<SeriesId>, leaving: &BTreeSet<String>) {
        for (id, s) in self.series.extract_if(.., |id, _| !ids.contains(id)) {
            if s.desired.reason == REASON_TRAFFIC || s.desired.reason == REASON_RESOLVED {
                continue;
            }
            let regarding = &s.desired.regarding;
            if regarding.kind.as_deref() == Some("Pod")
                && regarding.uid.as_ref().is_some_and(|u| leaving.contains(u))
            {
                tracing::debug!(event = %s.desired.event_name(), "the pod is being deleted; its series ends without a resolution");
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
    }

    /// Writes IPCollisionResolved for every series [`Self::end_cleared`] ended
    /// (and again for those that failed before).
    async fn resolve_cleared(&mut self, stats: &mut SyncStats) {
        for (id, resolved) in std::mem::take(&mut self.unresolved) {
            if !self.budget.take() {
                stats.deferred += 1;
                self.unresolved.insert(id, resolved);
                continue;
            }
            match self.open(&resolved).await {
                Ok(_) => stats.created += 1,
                Err(e) if permanent(&e) => {
                    stats.dropped += 1;
                    tracing::warn!(event = %resolved.event_name(), error = %e, "the API server refuses IPCollisionResolved for good; dropped");
                }
                Err(e) => {
                    stats.failed += 1;
                    tracing::warn!(event = %resolved.event_name(), error = %e, "writing IPCollisionResolved failed; retrying later");
                    self.unresolved.insert(id, resolved);
                }
            }
        }
    }

    /// Creates the series' Event, or continues it if it exists (a restart).
    /// The name is predictable, so an agent that restarts finds its series; a
    /// tenant can predict it too and create an Event of its own there first:
    /// the series then goes to a fresh name nobody can guess, never onto that
    /// object (the admission policy refuses the update, which ended the series).
    /// The object's name and the series' count there: 1 when created, more
    /// when continued.
    #[tracing::instrument(skip_all, fields(event = %d.event_name(), reason = %d.reason))]
    async fn open(&self, d: &Desired) -> Result<(String, i32), kube::Error> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &d.namespace);
        let name = d.event_name();
        let event = object::event(d, &name, &self.node);
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => {
                tracing::info!(event = %name, reason = %d.reason, regarding = ?d.regarding.name, "Event created");
                return Ok((name, 1));
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e),
        }
        let existing = api.get(&name).await?;
        if object::is_series_of(&existing, d, &self.node) {
            let series = existing.series.as_ref();
            let count = series.map_or(1, |s| s.count.max(1)).saturating_add(1);
            self.bump(d, &name, count).await?;
            tracing::info!(event = %name, count, "continuing an existing Event series");
            return Ok((name, count));
        }
        let fresh = format!("{name}.{}", object::unguessable_suffix());
        tracing::warn!(event = %name, namespace = %d.namespace, reporting_controller = ?existing.reporting_controller, fresh = %fresh, "an Event the agent did not write holds this series' name; writing the series under a fresh name");
        let event = object::event(d, &fresh, &self.node);
        api.create(&PostParams::default(), &event).await?;
        Ok((fresh, 1))
    }

    #[tracing::instrument(skip_all, fields(event = %name, count))]
    async fn bump(&self, d: &Desired, name: &str, count: i32) -> Result<(), kube::Error> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &d.namespace);
        // The series alone: events.k8s.io/v1 refuses a changed note (422), as it
        // does every other field; a note is set when its series starts.
        let patch = serde_json::json!({
            "series": EventSeries { count, last_observed_time: MicroTime(Timestamp::now()) },
        });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The write budget.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }
}
