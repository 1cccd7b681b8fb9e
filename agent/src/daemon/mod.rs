//! `ipshadow agent`: the DaemonSet process. An event-driven loop around the same
//! reconcile `check` runs once: netlink notifications and input-file changes
//! trigger it (debounced), a long period resyncs everything, and the eBPF ring
//! buffer and counters feed the traffic metrics. An idle node costs nothing:
//! every wake-up is a notification or a long timer.

pub mod http;
pub mod notify;
pub mod traffic;

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    net::{IpAddr, SocketAddr},
    os::fd::OwnedFd,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
    sync::{mpsc, oneshot},
};

use self::{
    notify::Trigger,
    traffic::{SeriesKey, TrafficBook},
};
use crate::{
    cli::AgentArgs,
    detect::Finding,
    ebpf::{self, Observer, watch_set},
    kube::{
        cluster::Cluster,
        events::{self, EventWriter},
    },
    metrics::{Metrics, labels},
    reconcile::{self, Reconciler},
    sources::FileSources,
    watch::{self, Outcome, Started},
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Reconcile(#[from] reconcile::Error),
    #[error(
        "listening on {addr} failed: {source}; pick another address with --listen or IPSHADOW_LISTEN"
    )]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("subscribing to {what} failed: {source}")]
    Subscribe {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the eBPF observer is required (--ebpf=required) but failed: {0}")]
    Ebpf(#[from] ebpf::Error),
    #[error(
        "connecting to the Kubernetes API failed: {0}; set KUBECONFIG (or run in a pod with a \
         service account), or pass --pods/--ciliumnodes/--subnets files"
    )]
    Client(#[source] ::kube::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where Kubernetes state comes from.
enum Source {
    Files(FileSources),
    Cluster(Cluster),
}

/// The loop's mutable state between two wake-ups.
struct Agent {
    reconciler: Reconciler,
    source: Source,
    files_dirty: bool,
    events: Option<tokio::sync::watch::Sender<EventsInput>>,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    observer: Option<Box<Observer>>,
    book: TrafficBook,
    findings: Vec<Finding>,
    node_uid: Option<String>,
    seen_invalid: HashSet<String>,
}

/// What the Event writer works from: the latest reconcile.
#[derive(Clone, Debug, Default)]
struct EventsInput {
    findings: Vec<Finding>,
    traffic: Vec<(SeriesKey, traffic::Totals)>,
    node_uid: Option<String>,
    ready: bool,
}

const RETRY_RECONCILE_FIRST: Duration = Duration::from_millis(100);
const RETRY_RECONCILE_MAX: Duration = Duration::from_secs(10);

/// Writes Events from the latest reconcile, apart from the loop: a slow or absent
/// API server delays Events, never detection. Re-runs every 30 s so repeats are counted.
async fn write_events(mut writer: EventWriter, mut rx: tokio::sync::watch::Receiver<EventsInput>) {
    // After failed writes: the watches' backoff (0.8 s doubling to 30 s, jittered),
    // and changes wait for it too, so an API outage is not hammered.
    let mut backoff = crate::kube::cluster::Backoff::default();
    loop {
        let input = rx.borrow_and_update().clone();
        let mut failed = 0;
        if input.ready {
            let want = events::desired(
                &input.findings,
                &input.traffic,
                writer.node(),
                input.node_uid.as_deref(),
            );
            tracing::debug!(series = want.len(), "syncing Events");
            failed = writer.sync(&want).await;
        }
        if failed > 0 {
            tokio::time::sleep(backoff.next(false)).await;
            continue;
        }
        backoff.reset();
        tokio::select! {
            r = rx.changed() => if r.is_err() { return },
            _ = tokio::time::sleep(events::REPEAT_EVERY) => {}
        }
    }
}

pub async fn run(args: AgentArgs) -> Result<()> {
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let reconciler = Reconciler::new(&args.node)?;

    let (trigger_tx, mut triggers) = mpsc::channel(64);
    let netlink_task = notify::netlink(trigger_tx.clone()).map_err(|source| Error::Subscribe {
        what: "netlink notifications",
        source,
    })?;
    let mut side_tasks = Vec::new();
    let mut events = None;
    let source = match args.sources.pods.clone() {
        Some(pods) => {
            let files = FileSources::new(
                pods,
                args.sources.ciliumnodes.clone(),
                args.sources.subnets.clone(),
                &args.node,
            );
            let watcher = notify::files(&files.paths(), trigger_tx.clone()).map_err(|source| {
                Error::Subscribe {
                    what: "changes of the input files (inotify)",
                    source,
                }
            })?;
            side_tasks.push(watcher);
            tracing::info!("reading Kubernetes state from files; no Events are written");
            Source::Files(files)
        }
        None => {
            let client = ::kube::Client::try_default().await.map_err(Error::Client)?;
            let tx = trigger_tx.clone();
            let on_change = Arc::new(move || {
                let _ = tx.try_send(Trigger::Kube);
            });
            let cluster = Cluster::start(
                client.clone(),
                &reconciler.node,
                &args.node.pod_ip_annotations,
                on_change,
            );
            let (events_tx, events_rx) = tokio::sync::watch::channel(EventsInput::default());
            side_tasks.push(tokio::spawn(write_events(
                EventWriter::new(client, &reconciler.node),
                events_rx,
            )));
            events = Some(events_tx);
            tracing::info!("watching the cluster");
            Source::Cluster(cluster)
        }
    };

    let mut observer = match watch::start(&args.ebpf)? {
        Started::Attached { observer, stale } => {
            if stale > 0 {
                tracing::warn!(
                    removed = stale,
                    "removed tc filters an earlier ipshadow left on lo"
                );
            }
            tracing::info!(interface = watch::LOOPBACK, "eBPF observer attached");
            Some(observer)
        }
        Started::Not(Outcome::Unavailable(e)) => {
            tracing::warn!(reason = %e, "eBPF unavailable, running netlink-only");
            None
        }
        Started::Not(_) => {
            tracing::info!("eBPF is off (--ebpf=off), running netlink-only");
            None
        }
    };
    metrics.ebpf_attached.set(i64::from(observer.is_some()));
    // A second descriptor of the ring buffer, for epoll: readable when samples wait.
    let samples: Option<AsyncFd<OwnedFd>> = match &observer {
        Some(o) => o
            .samples_fd()
            .try_clone_to_owned()
            .and_then(|fd| {
                // SAFETY: `fd` is an open descriptor owned by the AsyncFd for its whole life.
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
                    .map_err(std::io::Error::from)
            })
            .inspect_err(|e| tracing::warn!(error = %e, "cannot poll the eBPF ring buffer; counters refresh on a timer only"))
            .ok(),
        None => None,
    };

    let listener = http::bind(args.listen)
        .await
        .map_err(|source| Error::Listen {
            addr: args.listen,
            source,
        })?;
    tracing::info!(listen = %args.listen, node = %reconciler.node, "serving /metrics, /healthz, /readyz");
    // Everything that needed privilege (loading, attaching, binding) is done.
    match crate::privileges::drop_unneeded(observer.as_deref_mut()) {
        Ok(d) => {
            tracing::info!(kept = ?d.kept, dropped = d.dropped.len(), "dropped the capabilities not needed any more")
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not drop capabilities; running with those it was given")
        }
    }
    let (ping_tx, mut pings) = mpsc::channel::<oneshot::Sender<()>>(8);
    let (stop_http, http_stopped) = oneshot::channel::<()>();
    let http_state = http::AppState {
        metrics: metrics.clone(),
        ready: ready.clone(),
        ping: ping_tx,
    };
    let http_task = tokio::spawn(async move {
        let shutdown = async {
            let _ = http_stopped.await;
        };
        if let Err(e) = http::serve(listener, http_state, shutdown).await {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });

    let mut term = signal(SignalKind::terminate()).map_err(|source| Error::Subscribe {
        what: "SIGTERM",
        source,
    })?;
    let mut int = signal(SignalKind::interrupt()).map_err(|source| Error::Subscribe {
        what: "SIGINT",
        source,
    })?;

    let resync_every = Duration::from_secs(args.resync_seconds.max(1));
    let counters_every = Duration::from_secs(args.counters_seconds.max(1));
    let debounce = Duration::from_millis(args.debounce_ms);
    let mut agent = Agent {
        reconciler,
        source,
        files_dirty: true,
        events,
        metrics,
        ready,
        observer,
        book: TrafficBook::default(),
        findings: Vec::new(),
        node_uid: None,
        seen_invalid: HashSet::new(),
    };

    let mut due = Some(tokio::time::Instant::now());
    // A failed read of the node (e.g. a dump interrupted by changes) is retried
    // soon, then less often: the kernel's notifications may already be spent.
    let mut retry = RETRY_RECONCILE_FIRST;
    let mut next_resync = tokio::time::Instant::now() + resync_every;
    let mut next_counters = tokio::time::Instant::now() + counters_every;
    loop {
        let watching = agent
            .observer
            .as_ref()
            .is_some_and(|o| !o.watched().is_empty());
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
            _ = int.recv() => { tracing::info!("SIGINT: shutting down"); break; }
            Some(reply) = pings.recv() => { let _ = reply.send(()); }
            Some(t) = triggers.recv() => {
                match t {
                    Trigger::Files => agent.files_dirty = true,
                    Trigger::NetlinkOverrun => {
                        tracing::warn!("netlink notifications overran (ENOBUFS): full resync");
                        agent.files_dirty = true;
                    }
                    Trigger::Netlink | Trigger::Kube => {}
                }
                // Debounce: the first change schedules a reconcile at most `debounce` later.
                due.get_or_insert_with(|| tokio::time::Instant::now() + debounce);
            }
            _ = sleep_until_opt(due) => {
                due = None;
                if agent.reconcile().await {
                    retry = RETRY_RECONCILE_FIRST;
                } else {
                    due = Some(tokio::time::Instant::now() + retry);
                    retry = (retry * 2).min(RETRY_RECONCILE_MAX);
                }
            }
            _ = tokio::time::sleep_until(next_resync) => {
                next_resync = tokio::time::Instant::now() + resync_every;
                agent.files_dirty = true;
                if !agent.reconcile().await {
                    due.get_or_insert_with(|| tokio::time::Instant::now() + retry);
                }
            }
            r = readable(&samples) => {
                if let Ok(mut guard) = r {
                    agent.drain_samples();
                    guard.clear_ready();
                    agent.refresh_counters(&BTreeMap::new());
                }
            }
            _ = tokio::time::sleep_until(next_counters), if watching => {
                next_counters = tokio::time::Instant::now() + counters_every;
                agent.refresh_counters(&BTreeMap::new());
            }
        }
    }

    // Detach before anything else: the program must not outlive the agent.
    agent.observer.take();
    agent.metrics.ebpf_attached.set(0);
    netlink_task.abort();
    for t in side_tasks {
        t.abort();
    }
    let _ = stop_http.send(());
    let _ = tokio::time::timeout(Duration::from_secs(2), http_task).await;
    tracing::info!("stopped");
    Ok(())
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn readable(
    fd: &Option<AsyncFd<OwnedFd>>,
) -> std::io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, OwnedFd>> {
    match fd {
        Some(fd) => fd.readable().await,
        None => std::future::pending().await,
    }
}

impl Agent {
    /// One reconcile; `false` when reading the node failed (and it should be retried).
    async fn reconcile(&mut self) -> bool {
        let (state, node_uid) = match &mut self.source {
            Source::Files(files) => {
                if self.files_dirty {
                    for e in files.refresh() {
                        tracing::warn!(error = %e, "reading an input file failed; keeping its last good content");
                    }
                }
                let ready = files.has_pods();
                (ready.then(|| files.state().clone()), None)
            }
            Source::Cluster(cluster) => {
                let (state, node) = cluster.snapshot();
                (cluster.pods_listed().then_some(state), node.map(|n| n.uid))
            }
        };
        self.files_dirty = false;
        let status = match &self.source {
            Source::Files(f) => f.status().to_vec(),
            Source::Cluster(c) => c.status(),
        };
        for s in status {
            self.metrics
                .source_up
                .get_or_create(&labels(&[("source", s.source)]))
                .set(i64::from(s.up));
        }
        // Nothing to check pods against yet: not ready.
        let Some(state) = state else { return true };
        self.count_invalid(&state.invalid);
        let started = Instant::now();
        let result = self.reconciler.reconcile(&state).await;
        let elapsed = started.elapsed();
        let netlink_up = |m: &Metrics, up: bool| {
            m.source_up
                .get_or_create(&labels(&[("source", "netlink")]))
                .set(i64::from(up));
        };
        match result {
            Ok(done) => {
                netlink_up(&self.metrics, true);
                self.metrics
                    .reconcile_duration
                    .observe(elapsed.as_secs_f64());
                self.metrics
                    .reconciles
                    .get_or_create(&labels(&[("result", "ok")]))
                    .inc();
                let now = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                self.metrics.last_reconcile.set(now);
                log_changes(&self.findings, &done.findings);
                self.findings = done.findings;
                if let Source::Cluster(c) = &mut self.source {
                    c.watch_ips(&done.watch_ips);
                }
                self.node_uid = node_uid;
                let removed = self.sync_observer();
                self.refresh_counters(&removed);
                self.publish_events();
                self.ready.store(true, Ordering::Relaxed);
                tracing::debug!(
                    findings = self.findings.len(),
                    micros = elapsed.as_micros() as u64,
                    "reconciled"
                );
                true
            }
            Err(e) => {
                netlink_up(&self.metrics, false);
                self.metrics
                    .reconciles
                    .get_or_create(&labels(&[("result", "error")]))
                    .inc();
                tracing::warn!(error = %e, "reconcile failed; keeping the last findings and retrying");
                false
            }
        }
    }

    /// Hands the latest findings and traffic to the Event writer (cluster mode).
    fn publish_events(&self) {
        if let Some(tx) = &self.events {
            let traffic = self.book.exposed();
            tx.send_replace(EventsInput {
                findings: self.findings.clone(),
                traffic,
                node_uid: self.node_uid.clone(),
                ready: true,
            });
        }
    }

    /// Counts each distinct malformed object or field once, and warns about it once.
    fn count_invalid(&mut self, invalid: &[crate::kube::Invalid]) {
        for bad in invalid {
            let id = bad.to_string();
            if self.seen_invalid.insert(id) {
                tracing::warn!(resource = bad.resource, object = %bad.object, problem = %bad.problem, "skipping malformed input");
                self.metrics
                    .invalid_objects
                    .get_or_create(&labels(&[("resource", bad.resource)]))
                    .inc();
            }
        }
    }

    /// Makes the kernel's SHADOWED map equal to the IPs of the current findings.
    fn sync_observer(&mut self) -> BTreeMap<IpAddr, ipshadow_common::IpCounters> {
        let Some(o) = self.observer.as_mut() else {
            return BTreeMap::new();
        };
        let want = watch_set(&self.findings, &self.reconciler.node);
        match o.sync(&want) {
            Ok(removed) => removed,
            Err(e) => {
                tracing::warn!(error = %e, "updating the eBPF map failed");
                BTreeMap::new()
            }
        }
    }

    fn drain_samples(&mut self) {
        if let Some(o) = self.observer.as_mut() {
            let (samples, bad) = o.drain_samples();
            if bad > 0 {
                tracing::warn!(
                    records = bad,
                    "ring buffer records of an unexpected size skipped"
                );
            }
            for s in samples {
                tracing::debug!(src = %s.src, dst = %s.dst, protocol = s.protocol, dport = s.dport, flags = %s.tcp_flags, "host traffic to a shadowed IP");
            }
        }
    }

    /// Reads the per-IP counters and publishes findings and traffic for scrapes.
    fn refresh_counters(&mut self, removed: &BTreeMap<IpAddr, ipshadow_common::IpCounters>) {
        let mut current = BTreeMap::new();
        let mut want: BTreeMap<IpAddr, SeriesKey> = BTreeMap::new();
        if let Some(o) = self.observer.as_ref() {
            let watched: BTreeSet<IpAddr> = o.watched().clone();
            for ip in &watched {
                match o.counters(*ip) {
                    Ok(Some(c)) => {
                        current.insert(*ip, c);
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "reading eBPF counters failed"),
                }
            }
            for f in self.findings.iter().filter(|f| watched.contains(&f.ip)) {
                want.entry(f.ip).or_insert_with(|| SeriesKey {
                    ip: f.ip,
                    namespace: f
                        .pod
                        .as_ref()
                        .map(|p| p.namespace.clone())
                        .unwrap_or_default(),
                    pod: f.pod.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
                });
            }
        }
        self.book.update(&want, &current, removed);
        {
            let mut view = self
                .metrics
                .view
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            view.findings.clone_from(&self.findings);
            view.traffic = self.book.exposed();
        }
        // New traffic can open a HostTrafficBlackholed series; the writer acts only on news.
        if !want.is_empty() {
            self.publish_events();
        }
    }
}

/// Logs findings that appeared and cleared since the last reconcile.
fn log_changes(before: &[Finding], after: &[Finding]) {
    let id = |f: &Finding| (f.kind, f.ip, f.pod.clone());
    let old: HashSet<_> = before.iter().map(id).collect();
    let new: HashSet<_> = after.iter().map(id).collect();
    for f in after.iter().filter(|f| !old.contains(&id(f))) {
        tracing::warn!(kind = f.kind.as_str(), scope = f.scope.as_str(), ip = %f.ip, pod = ?f.pod.as_ref().map(ToString::to_string), owner = %f.owner.node, role = f.owner.role.as_str(), "finding: {}", f.message);
    }
    for f in before.iter().filter(|f| !new.contains(&id(f))) {
        tracing::info!(kind = f.kind.as_str(), ip = %f.ip, pod = ?f.pod.as_ref().map(ToString::to_string), "finding cleared");
    }
}
