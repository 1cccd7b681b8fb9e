//! The Event writer subsystem: writes the Event series of the latest findings
//! and traffic, apart from the reconcile loop — a slow or absent API server
//! delays Events, never detection. Re-runs every 30 s so repeats are counted.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Published;
use crate::{
    kube::{
        cluster::{Failure, backoff},
        recorder::EventWriter,
    },
    report::{
        events::{self, REPEAT_EVERY},
        traffic::Traffic,
    },
};

/// The writer and what it follows.
pub(crate) struct EventTask {
    writer: EventWriter,
    findings: watch::Receiver<Published>,
    traffic: watch::Receiver<Arc<Traffic>>,
}

impl EventTask {
    pub(crate) fn new(
        writer: EventWriter,
        findings: watch::Receiver<Published>,
        traffic: watch::Receiver<Arc<Traffic>>,
    ) -> Self {
        Self {
            writer,
            findings,
            traffic,
        }
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
                failed = tokio::select! {
                    () = token.cancelled() => return,
                    failed = self.writer.sync(&want) => failed,
                };
            }
            if failed > 0 {
                let delay = backoff.next().unwrap_or(REPEAT_EVERY);
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
                () = tokio::time::sleep(REPEAT_EVERY) => {}
            }
        }
    }
}
