//! The Node condition subsystem: keeps `PodIPsShadowed` on this node's Node
//! true to the latest findings — written when what the Node shows differs from
//! what the findings call for (so once per change, and again if someone
//! removes it while the agent runs), never on a timer: 5,000 nodes write
//! nothing while nothing changes; and at most once per
//! `--node-condition-interval-seconds`, so a node whose findings flap writes
//! its Node a few times a minute at most.

use std::time::Duration;

use prometheus_client::metrics::{counter::Counter, family::Family};
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use super::Published;
use crate::{
    inventory::ConditionSeen,
    kube::{
        cluster::{Failure, backoff},
        condition::{shows, write},
    },
    report::{
        condition::{Condition, desired},
        metrics::{Registry, WriteLabels, WriteResult},
    },
};

/// The Node condition's flag.
#[derive(Debug, clap::Args)]
#[group(id = "node-condition")]
pub struct Args {
    /// Keep the `PodIPsShadowed` condition on this node's Node (True while it has
    /// findings, False when clear). Needs `patch` on `nodes/status`.
    #[arg(long, env = "IPSHADOW_NODE_CONDITION", default_value_t = true,
          action = clap::ArgAction::Set, value_parser = clap::value_parser!(bool))]
    pub node_condition: bool,
    /// At least this many seconds (1-600) between two writes of the condition: the
    /// first change is written at once, later ones within the interval
    /// together at its end (each write is a Node update every all-Node
    /// watcher receives: the scheduler, controllers, other agents).
    #[arg(long, env = "IPSHADOW_NODE_CONDITION_INTERVAL_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub node_condition_interval_seconds: u64,
}

/// The writer and what it follows.
pub(crate) struct ConditionTask {
    client: kube::Client,
    node: String,
    interval: Duration,
    /// `ipshadow_node_condition_writes_total`.
    writes: Family<WriteLabels, Counter>,
    published: watch::Receiver<Published>,
}

impl ConditionTask {
    pub(crate) fn new(
        client: kube::Client,
        node: &str,
        args: &Args,
        registry: &mut Registry,
        published: watch::Receiver<Published>,
    ) -> Self {
        let writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "ipshadow_node_condition_writes",
            "Writes of the Node condition PodIPsShadowed, by result (patched, failed)",
            writes.clone(),
        );
        // Both results present from the start: a restarted agent exports the same series.
        for result in [WriteResult::patched, WriteResult::failed] {
            let _ = writes.get_or_create(&WriteLabels { result });
        }
        Self {
            client,
            node: node.to_owned(),
            interval: Duration::from_secs(args.node_condition_interval_seconds),
            writes,
            published,
        }
    }

    /// Writes `want` over what the Node shows, and counts the write.
    async fn write_counted(
        &self,
        want: &Condition,
        seen: Option<&ConditionSeen>,
    ) -> Result<(), kube::Error> {
        let written = write(&self.client, &self.node, want, seen).await;
        let result = match &written {
            Ok(()) => WriteResult::patched,
            Err(_) => WriteResult::failed,
        };
        self.writes.get_or_create(&WriteLabels { result }).inc();
        written
    }

    /// Writes until `token` is cancelled.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        let mut backoff = backoff(Failure::Error);
        // What was written, and what the Node showed then: until the watch brings
        // the Node back changed, the write is not repeated.
        let mut last = None;
        let mut written_at: Option<Instant> = None;
        loop {
            let input = self.published.borrow_and_update().clone();
            // Only once this node's Node is seen: its condition as shown decides.
            if let (true, Some(node)) = (input.ready, input.node.as_ref()) {
                let want = desired(&input.findings, &self.node);
                let pending = (want.clone(), node.shadowed.clone());
                if shows(node.shadowed.as_ref(), &want) {
                    // The write landed: a later difference (someone removed
                    // the condition) is news, even if it looks as before it.
                    last = None;
                } else if last.as_ref() != Some(&pending) {
                    if let Some(at) = written_at
                        && at.elapsed() < self.interval
                    {
                        // Changes within the interval go together: at its end,
                        // whatever the findings then say is written.
                        tokio::select! {
                            () = token.cancelled() => return,
                            () = tokio::time::sleep_until(at + self.interval) => continue,
                        }
                    }
                    let written = tokio::select! {
                        () = token.cancelled() => return,
                        r = self.write_counted(&want, node.shadowed.as_ref()) => r,
                    };
                    match written {
                        Ok(()) => {
                            last = Some(pending);
                            written_at = Some(Instant::now());
                            tracing::info!(status = want.status, reason = %want.reason, "Node condition PodIPsShadowed written");
                            kube::runtime::utils::Backoff::reset(&mut backoff);
                        }
                        Err(e) => {
                            let delay = backoff.next().unwrap_or(std::time::Duration::from_mins(5));
                            tracing::warn!(error = %e, retry_in = ?delay, "writing the Node condition PodIPsShadowed failed; check that the agent may patch nodes/status");
                            tokio::select! {
                                () = token.cancelled() => return,
                                () = tokio::time::sleep(delay) => continue,
                            }
                        }
                    }
                }
            }
            // The write comes back through the Node watch as a new `Published`.
            tokio::select! {
                () = token.cancelled() => return,
                r = self.published.changed() => if r.is_err() { return },
            }
        }
    }
}

#[cfg(test)]
mod tests;
