//! The Event writer subsystem: writes the Event series of the latest findings
//! and traffic, apart from the reconcile loop — a slow or absent API server
//! delays Events, never detection. Re-runs every refresh period (30 minutes
//! by default) so live series are written back.

use std::sync::Arc;

use prometheus_client::metrics::{counter::Counter, family::Family, gauge::Gauge};
use strum::IntoEnumIterator as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Published, impact::Looked};
use crate::{
    detect::Finding,
    kube::{
        cluster::{Failure, backoff},
        pace::Budget,
        recorder::{EventWriter, SyncStats},
    },
    report::{
        Impacts,
        events::{self, REFRESH_EVERY},
        metrics::{Registry, WriteLabels, WriteResult},
        traffic::Traffic,
    },
};

/// The Event writer's flags.
#[derive(Debug, clap::Args)]
#[group(id = "event-writes")]
pub struct Args {
    /// How often a live Event series is written back, in seconds (client-go's
    /// events library: 30 minutes; it also keeps series past the 1 h Event TTL).
    #[arg(long, env = "IPSHADOW_EVENT_REFRESH_SECONDS", default_value_t = REFRESH_EVERY.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub event_refresh_seconds: u64,
    /// Event writes allowed at once (the per-node budget's burst).
    #[arg(long, env = "IPSHADOW_EVENT_BURST", default_value_t = 25,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub event_burst: u32,
    /// Event writes per minute once the burst is spent.
    #[arg(long, env = "IPSHADOW_EVENT_WRITES_PER_MINUTE", default_value_t = 30,
          value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub event_writes_per_minute: u32,
    /// At most this many Warning series about pods per node; beyond, one
    /// ManyShadowedPods Event on the Node counts the rest.
    #[arg(long, env = "IPSHADOW_EVENT_SERIES_MAX", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub event_series_max: u64,
}

/// What the Event writer follows.
#[derive(Clone)]
pub(crate) struct Follows {
    /// Each reconcile's findings.
    pub(crate) findings: watch::Receiver<Published>,
    /// Host traffic to shadowed pods.
    pub(crate) traffic: watch::Receiver<Arc<Traffic>>,
    /// What breaks behind them, for the notes of new series.
    pub(crate) impacts: watch::Receiver<Looked>,
}

/// The writer and what it follows.
pub(crate) struct EventTask {
    writer: EventWriter,
    refresh: std::time::Duration,
    series_max: usize,
    /// `ipshadow_event_writes_total`.
    writes: Family<WriteLabels, Counter>,
    /// `ipshadow_events_pending`.
    pending: Gauge,
    follows: Follows,
}

/// How long new series wait for the impact of their findings (the lookups
/// are a few lists; an API server that does not answer delays no Event longer).
const IMPACT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl EventTask {
    /// The writer of `node`'s Events, configured by `args`.
    pub(crate) fn new(
        client: kube::Client,
        node: &str,
        args: &Args,
        registry: &mut Registry,
        follows: Follows,
    ) -> Self {
        let refresh = std::time::Duration::from_secs(args.event_refresh_seconds);
        let writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "ipshadow_event_writes",
            "Event writes to the API server, by result (created, patched, failed, dropped)",
            writes.clone(),
        );
        // Every result at zero from the start: increase() and alerts see 0, not "no data".
        for result in WriteResult::iter() {
            let _ = writes.get_or_create(&WriteLabels { result });
        }
        let pending = Gauge::default();
        registry.register(
            "ipshadow_events_pending",
            "Event series and resolutions not written yet (the API server refused or was away)",
            pending.clone(),
        );
        let budget = Budget::new(args.event_burst, args.event_writes_per_minute);
        Self {
            writer: EventWriter::new(client, node, refresh, budget),
            refresh,
            series_max: usize::try_from(args.event_series_max).unwrap_or(usize::MAX),
            writes,
            pending,
            follows,
        }
    }

    fn count(&self, stats: SyncStats) {
        for (result, n) in [
            (WriteResult::created, stats.created),
            (WriteResult::patched, stats.patched),
            (WriteResult::failed, stats.failed),
            (WriteResult::dropped, stats.dropped),
        ] {
            self.writes.get_or_create(&WriteLabels { result }).inc_by(n);
        }
        self.pending
            .set(i64::try_from(stats.pending()).unwrap_or(i64::MAX));
    }

    /// Writes until `token` is cancelled.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        // After failed writes: the watches' backoff, and changes wait for it too,
        // so an API outage is not hammered.
        let mut backoff = backoff(Failure::Error);
        // Without an eBPF observer no traffic is ever published.
        let mut traffic_open = true;
        loop {
            let wait = match self.write_once(&token).await {
                Pass::Cancelled => return,
                // The budget is spent: go on when it allows the next write.
                Pass::Deferred => self.writer.budget().next_in(),
                Pass::Failed => backoff.next().unwrap_or(self.refresh),
                Pass::Done => {
                    kube::runtime::utils::Backoff::reset(&mut backoff);
                    tokio::select! {
                        () = token.cancelled() => return,
                        r = self.follows.findings.changed() => if r.is_err() { return },
                        r = self.follows.traffic.changed(), if traffic_open => traffic_open = r.is_ok(),
                        () = tokio::time::sleep(self.refresh) => {}
                    }
                    continue;
                }
            };
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Writes the series of the latest findings and traffic once.
    async fn write_once(&mut self, token: &CancellationToken) -> Pass {
        let input = self.follows.findings.borrow_and_update().clone();
        let traffic = self.follows.traffic.borrow_and_update().clone();
        if !input.ready {
            return Pass::Done;
        }
        let Some(impacts) = self.impacts_of(&input.findings, token).await else {
            return Pass::Cancelled;
        };
        let node_uid = input.node.as_ref().map(|n| n.uid.as_str());
        let want = events::desired(
            &input.findings,
            (&traffic, &impacts),
            self.writer.node(),
            node_uid,
        );
        let want = events::cap(want, self.series_max, self.writer.node(), node_uid);
        tracing::debug!(series = want.len(), "syncing Events");
        let stats = tokio::select! {
            () = token.cancelled() => return Pass::Cancelled,
            stats = self.writer.sync(&want, &input.leaving) => stats,
        };
        self.count(stats);
        if stats.failed > 0 {
            Pass::Failed
        } else if stats.deferred > 0 {
            Pass::Deferred
        } else {
            Pass::Done
        }
    }

    /// What breaks behind `findings`' pods: series notes are written once, so
    /// the lookups get [`IMPACT_WAIT`] to catch up. `None` once cancelled.
    async fn impacts_of(
        &mut self,
        findings: &Arc<Vec<Finding>>,
        token: &CancellationToken,
    ) -> Option<Arc<Impacts>> {
        let deadline = tokio::time::Instant::now() + IMPACT_WAIT;
        while !Arc::ptr_eq(&self.follows.impacts.borrow().for_findings, findings) {
            tokio::select! {
                () = token.cancelled() => return None,
                r = self.follows.impacts.changed() => if r.is_err() { break },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        Some(Arc::clone(&self.follows.impacts.borrow().impacts))
    }
}

/// What one pass of writes came to.
enum Pass {
    /// Everything written (or nothing to write): wait for a change.
    Done,
    /// A write failed: retry after a backoff.
    Failed,
    /// The write budget is spent: go on when it allows.
    Deferred,
    /// The agent is stopping.
    Cancelled,
}
