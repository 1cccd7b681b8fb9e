//! The reconcile loop: the same reconcile `check` runs once, on every change
//! (debounced), on a long resync timer, and again soon after a failure. It
//! publishes each reconcile's findings to the observer, the Event writer and
//! the metrics, and answers `/healthz`'s pings between two steps.

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

mod leaks;
mod metrics;

pub(crate) use self::metrics::LoopMetrics;
use super::{Published, host::Trigger};
use crate::{
    detect::Finding,
    inventory::{ClusterState, HostNetwork, Invalid, NodeFacts, SourceStatus},
    kube::{cluster::ClusterView, sources::FileSources},
    reconcile::Reconciler,
};

/// A failed read of the node (e.g. a dump interrupted by changes) is retried
/// soon, then less often: the kernel's notifications may already be spent.
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(10);

/// The loop's timing.
#[derive(Debug, clap::Args)]
#[group(id = "reconcile")]
pub struct Args {
    /// Full resync period, in seconds, on top of change notifications.
    #[arg(long, env = "IPSHADOW_RESYNC_SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub resync_seconds: u64,
    /// How long to wait for more changes before reconciling, in milliseconds.
    #[arg(long, env = "IPSHADOW_DEBOUNCE_MS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub debounce_ms: u64,
    /// How long, in seconds, a pod namespace must hold an address no pod has
    /// before it is told as a leaked sandbox: a pod deleted with --force leaves
    /// the API at once while kubelet still stops it (its grace period) and
    /// tears its sandbox down.
    #[arg(long, env = "IPSHADOW_LEAK_GRACE_SECONDS", default_value_t = 90,
          value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub leak_grace_seconds: u64,
}

/// Where the cluster's state comes from.
pub(crate) enum Input {
    /// Files, re-read when they change (on a blocking thread: a large file
    /// takes its time, and the runtime also answers `/healthz`).
    Files(Arc<std::sync::Mutex<FileSources>>),
    /// The cluster's watches.
    Cluster(ClusterView),
}

/// What the loop owns between two wake-ups.
pub(crate) struct ReconcileLoop {
    args: Args,
    reconciler: Reconciler,
    input: Input,
    files_dirty: bool,
    wiring: Wiring,
    findings: Arc<Vec<Finding>>,
    seen_invalid: HashSet<Invalid>,
    /// The host snapshot of the last reconcile; `None` once the node's network
    /// may have changed since (a netlink notification, a resync, a failure).
    host: Option<Arc<HostNetwork>>,
    /// A resync's namespaces are left to read: the next reconcile reads a
    /// slice of them on the snapshot in `host` (the host once per pass).
    next_slice: bool,
    /// The reconciler's host reads already counted in the metrics.
    host_reads: u64,
    /// Leaked sandboxes not yet told, by when first seen (see `leaks`).
    leaks: leaks::Young,
}

/// `/healthz`'s pings, each answered between two steps.
type Pings = mpsc::Receiver<oneshot::Sender<()>>;

/// The loop's inputs and outputs.
pub(crate) struct Wiring {
    pub(crate) triggers: mpsc::Receiver<Trigger>,
    pub(crate) pings: Pings,
    pub(crate) published: watch::Sender<Published>,
    pub(crate) metrics: LoopMetrics,
    pub(crate) ready: Arc<AtomicBool>,
}

impl ReconcileLoop {
    pub(crate) fn new(args: Args, reconciler: Reconciler, input: Input, wiring: Wiring) -> Self {
        Self {
            args,
            reconciler,
            input,
            files_dirty: true,
            wiring,
            findings: Arc::default(),
            seen_invalid: HashSet::new(),
            host: None,
            next_slice: false,
            host_reads: 0,
            leaks: leaks::Young::default(),
        }
    }

    /// Reconciles on every trigger until `token` is cancelled.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        let resync_every = Duration::from_secs(self.args.resync_seconds);
        let debounce = Duration::from_millis(self.args.debounce_ms);
        let mut due = Some(tokio::time::Instant::now());
        let mut retry = RETRY_FIRST;
        let mut next_resync = tokio::time::Instant::now() + resync_every;
        let mut recheck: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                Some(reply) = self.wiring.pings.recv() => { let _ = reply.send(()); }
                Some(t) = self.wiring.triggers.recv() => {
                    match t {
                        Trigger::Files => self.files_dirty = true,
                        Trigger::NetlinkOverrun => {
                            tracing::warn!("netlink notifications overran (ENOBUFS): full resync");
                            self.files_dirty = true;
                            self.host = None;
                            self.reconciler.expire_pod_namespaces();
                        }
                        Trigger::Netlink => self.host = None,
                        Trigger::Kube => {}
                    }
                    // Debounce: the first change schedules a reconcile at most `debounce` later.
                    due.get_or_insert_with(|| tokio::time::Instant::now() + debounce);
                }
                () = sleep_until_opt(due) => {
                    if self.reconcile().await {
                        retry = RETRY_FIRST;
                        recheck = self.leaks.recheck_at();
                        due = self.more_namespaces();
                    } else {
                        due = Some(tokio::time::Instant::now() + retry);
                        retry = (retry * 2).min(RETRY_MAX);
                    }
                }
                // A leak held back is looked at again when it comes of age, as a
                // change would be: debounced with any other, backed off on failure.
                () = sleep_until_opt(recheck) => {
                    recheck = None;
                    due.get_or_insert_with(tokio::time::Instant::now);
                }
                () = tokio::time::sleep_until(next_resync) => {
                    next_resync = tokio::time::Instant::now() + resync_every;
                    self.files_dirty = true;
                    self.host = None;
                    self.reconciler.expire_pod_namespaces();
                    if self.reconcile().await {
                        recheck = self.leaks.recheck_at();
                        due = due.or_else(|| self.more_namespaces());
                    } else {
                        due.get_or_insert_with(|| tokio::time::Instant::now() + retry);
                    }
                }
            }
        }
    }

    /// A reconcile due at once while a resync's namespaces are left to read
    /// again (a slice per reconcile): the next reads a slice on the host
    /// snapshot of this one (a netlink change meanwhile drops it).
    fn more_namespaces(&mut self) -> Option<tokio::time::Instant> {
        let left = self
            .host
            .as_ref()
            .is_some_and(|h| h.namespaces.stale_left > 0);
        self.next_slice = left;
        left.then(tokio::time::Instant::now)
    }

    /// The cluster's state now (`None` until pods were read once), this node's
    /// Node, and each source's status.
    async fn cluster_state(
        &mut self,
    ) -> (Option<ClusterState>, Option<NodeFacts>, Vec<SourceStatus>) {
        match &mut self.input {
            Input::Files(files) => {
                if std::mem::take(&mut self.files_dirty) {
                    let reading = Arc::clone(files);
                    let refresh = tokio::task::spawn_blocking(move || {
                        crate::inventory::lock(&reading).refresh()
                    });
                    // The loop still answers /healthz while a large file is read.
                    let errors = answering(&mut self.wiring.pings, refresh).await;
                    for e in errors.unwrap_or_default() {
                        tracing::warn!(error = %e, "reading an input file failed; keeping its last good content");
                    }
                }
                let files = crate::inventory::lock(files);
                let state = files.has_pods().then(|| files.state().clone());
                (state, None, files.status().to_vec())
            }
            Input::Cluster(cluster) => {
                let (state, node) = cluster.snapshot();
                let state = cluster.pods_listed().then_some(state);
                (state, node, cluster.status())
            }
        }
    }

    /// One reconcile; `false` when reading the node failed (and it should be retried).
    #[tracing::instrument(skip_all)]
    async fn reconcile(&mut self) -> bool {
        let (state, node, status) = self.cluster_state().await;
        self.wiring.metrics.sources(&status);
        // Nothing to check pods against yet: not ready.
        let Some(state) = state else { return true };
        self.count_invalid(&state.invalid);
        let started = Instant::now();
        // A change of the cluster alone reuses the host snapshot (netlink would
        // have said if the node's network changed): no dumps, only new lookups.
        let (reconciler, host) = (&self.reconciler, self.host.clone());
        let slice = std::mem::take(&mut self.next_slice);
        let read_namespaces = host.is_none() || slice;
        let work = async {
            match &host {
                Some(host) if slice => {
                    tracing::debug!("a resync's next namespaces, on the pass's host snapshot");
                    Ok(reconciler.reconcile_namespaces(&state, host).await)
                }
                Some(host) => {
                    tracing::debug!("a change of the cluster only: reusing the host snapshot");
                    Ok(reconciler.reconcile_cluster_change(&state, host).await)
                }
                None => reconciler.reconcile(&state).await,
            }
        };
        // Detection runs on a blocking thread: the loop answers /healthz meanwhile.
        let result = answering(&mut self.wiring.pings, work).await;
        let elapsed = started.elapsed();
        self.wiring
            .metrics
            .reconciled(result.is_ok().then_some(elapsed));
        let reads = self.reconciler.host_reads();
        self.wiring.metrics.host_read(reads - self.host_reads);
        self.host_reads = reads;
        let done = match result {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!(error = %e, "reconcile failed; keeping the last findings and retrying");
                return false;
            }
        };
        self.publish(done, node, read_namespaces);
        tracing::debug!(
            findings = self.findings.len(),
            micros = elapsed.as_micros(),
            "reconciled"
        );
        true
    }

    /// Keeps what a reconcile found and hands it to the writers;
    /// `read_namespaces`: it read namespaces rather than reusing a snapshot's.
    fn publish(
        &mut self,
        done: crate::reconcile::Reconciled,
        node: Option<crate::inventory::NodeFacts>,
        read_namespaces: bool,
    ) {
        if read_namespaces {
            self.wiring
                .metrics
                .namespaces_read(done.host.namespaces.reread);
        }
        self.host = Some(Arc::clone(&done.host));
        self.wiring.metrics.namespaces(&done.truth);
        let grace = Duration::from_secs(self.args.leak_grace_seconds);
        let findings = self.leaks.hold_back(done.findings, grace, Instant::now());
        log_changes(&self.findings, &findings);
        self.findings = Arc::new(findings);
        self.wiring.published.send_replace(Published {
            findings: self.findings.clone(),
            claimable: Arc::new(done.claimable),
            leaving: Arc::new(done.leaving),
            foreign_ranges: Arc::new(done.foreign_ranges),
            calico: done.calico,
            node,
            ready: true,
        });
        self.wiring.ready.store(true, Ordering::Relaxed);
    }

    /// Counts each distinct malformed object or field once while it lasts, and
    /// warns about it once. Only the problems of the current input are kept: a
    /// problem fixed and made again is news; the set never outgrows the input.
    fn count_invalid(&mut self, invalid: &[Invalid]) {
        let current: HashSet<Invalid> = invalid.iter().cloned().collect();
        let before = std::mem::take(&mut self.seen_invalid);
        for bad in &current {
            if !before.contains(bad) {
                tracing::warn!(resource = bad.resource, object = %bad.object, problem = %bad.problem, "skipping malformed input");
                self.wiring.metrics.invalid(bad.resource);
            }
        }
        self.seen_invalid = current;
    }
}

/// What `work` returns, `/healthz`'s `pings` answered meanwhile.
async fn answering<T>(pings: &mut Pings, work: impl Future<Output = T>) -> T {
    tokio::pin!(work);
    loop {
        tokio::select! {
            r = &mut work => break r,
            Some(reply) = pings.recv() => { let _ = reply.send(()); }
        }
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Logs findings that appeared and cleared since the last reconcile.
fn log_changes(before: &[Finding], after: &[Finding]) {
    let id = |f: &Finding| (f.kind, f.ip, f.pod().cloned());
    let old: HashSet<_> = before.iter().map(id).collect();
    let new: HashSet<_> = after.iter().map(id).collect();
    for f in after.iter().filter(|f| !old.contains(&id(f))) {
        tracing::warn!(kind = f.kind.as_str(), scope = f.scope.as_str(), ip = f.ip_text(), pod = ?f.pod().map(ToString::to_string), owner = %f.owner.node, role = f.owner.role.as_str(), "finding: {}", crate::report::message::render(f));
    }
    for f in before.iter().filter(|f| !new.contains(&id(f))) {
        tracing::info!(kind = f.kind.as_str(), ip = f.ip_text(), pod = ?f.pod().map(ToString::to_string), "finding cleared");
    }
}
