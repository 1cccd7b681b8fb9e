//! The Event writer subsystem: writes the Event series of the latest findings
//! and traffic, apart from the reconcile loop — a slow or absent API server
//! delays Events, never detection. Re-runs every refresh period (30 minutes
//! by default) so live series are written back.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Published;
use crate::{
    kube::{
        cluster::{Failure, backoff},
        recorder::{EventWriter, SyncStats},
    },
    report::{
        events::{self, REFRESH_EVERY},
        metrics::{Metrics, WriteLabels, WriteResult},
        traffic::Traffic,
    },
};

/// The Event writer's flags.
#[derive(Debug, clap::Args)]
#[group(id = "events")]
pub struct Args {
    /// How often a live Event series is written back, in seconds (client-go's
    /// events library: 30 minutes; it also keeps series past the 1 h Event TTL).
    #[arg(long, env = "IPSHADOW_EVENT_REFRESH_SECONDS", default_value_t = REFRESH_EVERY.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub event_refresh_seconds: u64,
}

/// The writer and what it follows.
pub(crate) struct EventTask {
    writer: EventWriter,
    refresh: std::time::Duration,
    metrics: Arc<Metrics>,
    findings: watch::Receiver<Published>,
    traffic: watch::Receiver<Arc<Traffic>>,
}

impl EventTask {
    pub(crate) fn new(
        writer: EventWriter,
        args: &Args,
        metrics: Arc<Metrics>,
        findings: watch::Receiver<Published>,
        traffic: watch::Receiver<Arc<Traffic>>,
    ) -> Self {
        Self {
            writer,
            refresh: std::time::Duration::from_secs(args.event_refresh_seconds),
            metrics,
            findings,
            traffic,
        }
    }

    fn count(&self, stats: SyncStats) {
        for (result, n) in [
            (WriteResult::created, stats.created),
            (WriteResult::patched, stats.patched),
            (WriteResult::failed, stats.failed),
            (WriteResult::dropped, stats.dropped),
        ] {
            self.metrics
                .event_writes
                .get_or_create(&WriteLabels { result })
                .inc_by(n);
        }
        self.metrics
            .events_pending
            .set(i64::try_from(stats.pending).unwrap_or(i64::MAX));
    }

    /// Writes until `token` is cancelled.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        // After failed writes: the watches' backoff, and changes wait for it too,
        // so an API outage is not hammered.
        let mut backoff = backoff(Failure::Error);
        // Without an eBPF observer no traffic is ever published.
        let mut traffic_open = true;
        loop {
            let input = self.findings.borrow_and_update().clone();
            let traffic = self.traffic.borrow_and_update().clone();
            let mut failed = 0;
            if input.ready {
                let want = events::desired(
                    &input.findings,
                    &traffic,
                    self.writer.node(),
                    input.node_uid.as_deref(),
                );
                tracing::debug!(series = want.len(), "syncing Events");
                let stats = tokio::select! {
                    () = token.cancelled() => return,
                    stats = self.writer.sync(&want) => stats,
                };
                self.count(stats);
                failed = stats.failed;
            }
            if failed > 0 {
                let delay = backoff.next().unwrap_or(self.refresh);
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(delay) => continue,
                }
            }
            kube::runtime::utils::Backoff::reset(&mut backoff);
            tokio::select! {
                () = token.cancelled() => return,
                r = self.findings.changed() => if r.is_err() { return },
                r = self.traffic.changed(), if traffic_open => traffic_open = r.is_ok(),
                () = tokio::time::sleep(self.refresh) => {}
            }
        }
    }
}
