//! `ipshadow agent`: the DaemonSet process, made of small subsystems in the
//! spirit of Cilium's hive — each with its own flags, a `new` that does what
//! can fail at start, and a `run(self, CancellationToken)`:
//!
//! - host source ([`host`]): netlink change notifications;
//! - cluster source, decided once ([`Source`]): the kube watches and what acts
//!   on the API server ([`cluster`]: Events, the Node condition, impact
//!   lookups, remediation), or inotify on the input files ([`files`]);
//! - the reconcile loop ([`reconcile_loop`]): netlink + cluster state → findings;
//! - the observer ([`observer`]): the eBPF map, counters and traffic series;
//! - HTTP ([`http`]): `/metrics` (reading what the others publish), `/healthz`, `/readyz`.
//!
//! This module only wires them: channels between them, one token to stop
//! them, and every task spawned in one place ([`spawn_all`]).

mod cluster;
mod condition;
mod endpoints;
pub mod events;
mod files;
mod host;
pub mod http;
mod impact;
pub mod observer;
mod process;
pub mod reconcile_loop;
mod remediate;
mod scrape_auth;
mod supervise;
#[cfg(test)]
mod test_api;

use std::sync::{Arc, atomic::AtomicBool};

use tokio::{
    signal::unix::{SignalKind, signal},
    sync::{mpsc, watch},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use self::supervise::Supervisor;

use self::{
    events::Follows,
    files::FileWatch,
    host::{HostSource, Trigger},
    http::{AppState, Http, HttpMetrics},
    observer::ObserverTask,
    reconcile_loop::{Input, LoopMetrics, ReconcileLoop, Wiring},
};
use crate::{
    ebpf,
    kube::{self, SourceArgs, sources::FileSources},
    privileges,
    reconcile::{self, NodeArgs, Reconciler},
    report::{
        Published,
        chain::Chain,
        metrics::{Exposition, FindingsView, Registry, ViewSource},
        traffic::{Traffic, Unexplained},
    },
};

/// `ipshadow agent`: the subsystems' flags, flattened.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// This node.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Files, or the cluster.
    #[command(flatten)]
    pub sources: SourceArgs,
    /// How the watches start.
    #[command(flatten)]
    pub watches: kube::cluster::initial::Args,
    /// The reconcile loop.
    #[command(flatten)]
    pub reconcile: reconcile_loop::Args,
    /// The eBPF observer.
    #[command(flatten)]
    pub observer: observer::Args,
    /// The HTTP endpoints.
    #[command(flatten)]
    pub http: http::Args,
    /// The Event writer.
    #[command(flatten)]
    pub events: events::Args,
    /// The Node condition.
    #[command(flatten)]
    pub condition: condition::Args,
    /// Opt-in remediation.
    #[command(flatten)]
    pub remediate: remediate::Args,
}

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This node could not be read.
    #[error(transparent)]
    Reconcile(#[from] reconcile::Error),
    /// An HTTP address is taken or not ours.
    #[error(transparent)]
    Listen(#[from] http::ListenError),
    /// A notification source could not be opened.
    #[error("subscribing to {what} failed: {}", Chain(.cause))]
    Subscribe {
        /// Which one.
        what: &'static str,
        /// What the kernel said.
        cause: std::io::Error,
    },
    /// `--ebpf=required` and the observer failed.
    #[error("the eBPF observer is required (--ebpf=required) but failed: {}", Chain(.0))]
    Ebpf(ebpf::Error),
    /// No client for the API server.
    #[error(transparent)]
    Client(#[from] kube::ClientError),
    /// TLS or scrape authentication could not be set up.
    #[error(transparent)]
    Tls(#[from] scrape_auth::TlsError),
}

// By hand rather than `#[from]`: the message prints the cause ([`Chain`]).
impl From<ebpf::Error> for Error {
    fn from(e: ebpf::Error) -> Self {
        Self::Ebpf(e)
    }
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the cluster's state comes from, decided once: files (`--pods`) or the API server.
enum Source {
    /// Input files, re-read when they change; no Events are written.
    Files(Box<FileSources>),
    /// The API server: watches, Events, lookups, scrape reviews.
    Cluster(::kube::Client),
}

impl Source {
    /// Files when `--pods` is given, else a client of the API server.
    async fn new(args: &Args) -> Result<Self> {
        Ok(
            match FileSources::new(&args.sources, &args.node.read.pod_ip_annotations) {
                Some(files) => Self::Files(Box::new(files)),
                None => Self::Cluster(kube::client().await?),
            },
        )
    }

    /// The API server's client, in cluster mode (scrape reviews use it too).
    fn client(&self) -> Option<&::kube::Client> {
        match self {
            Self::Cluster(c) => Some(c),
            Self::Files(_) => None,
        }
    }
}

/// Gives up the capabilities only loading, attaching and binding needed.
fn drop_privileges(observer: Option<&mut ObserverTask>, pod_namespaces: bool) {
    let attached = observer.map(|o| o as &mut dyn privileges::Attached);
    match privileges::drop_unneeded(attached, pod_namespaces) {
        Ok(d) => {
            tracing::info!(kept = ?d.kept, dropped = d.dropped.len(), "dropped the capabilities not needed any more");
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not drop capabilities; running with those it was given");
        }
    }
}

/// Starts every subsystem, runs until SIGTERM or SIGINT, then stops them all.
pub async fn run(args: Args) -> Result<()> {
    let mut term = signal(SignalKind::terminate()).map_err(subscribe("SIGTERM"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(subscribe("SIGINT"))?;
    let token = CancellationToken::new();
    let tracker = TaskTracker::new();
    // Each subsystem registers its own metrics here as it is built.
    let mut registry = Registry::default();
    let tasks = Supervisor::new(tracker.clone(), token.clone(), &mut registry);
    let built = build(&args, &tasks, &mut registry).await?;
    spawn_all(&tasks, &token, built, args.reconcile);
    tracker.close();
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    token.cancel();
    tracker.wait().await;
    tracing::info!("stopped");
    Ok(())
}

/// The error of subscribing to `what`.
fn subscribe(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Subscribe {
        what,
        cause: source,
    }
}

/// Where the reconcile loop and the observer publish (findings; traffic,
/// unexplained traffic), and what the cluster side reads and publishes.
type Senders = (
    watch::Sender<Published>,
    watch::Sender<Arc<Traffic>>,
    watch::Sender<Arc<Unexplained>>,
);

/// The channels between the subsystems.
fn channels() -> (Senders, cluster::Channels) {
    let (published, findings) = watch::channel(Published::default());
    let (traffic, traffic_rx) = watch::channel(Arc::<Traffic>::default());
    let (unexplained, unexplained_rx) = watch::channel(Arc::<Unexplained>::default());
    let (impacts_tx, impacts) = watch::channel(impact::Looked::default());
    let follows = Follows {
        findings,
        traffic: traffic_rx,
        impacts,
    };
    let channels = cluster::Channels {
        follows,
        unexplained: unexplained_rx,
        impacts_tx,
    };
    ((published, traffic, unexplained), channels)
}

/// Every subsystem, built and wired, none started; privileges dropped.
async fn build(args: &Args, tasks: &Supervisor, registry: &mut Registry) -> Result<Built> {
    let ((published_tx, traffic_tx, unexplained_tx), channels) = channels();
    let view = view(channels.follows.clone());
    let published = channels.follows.findings.clone();
    let reconciler = Reconciler::new(&args.node)?;
    let node = reconciler.node.clone();
    let (trigger_tx, triggers) = mpsc::channel(64);
    let host = HostSource::new(trigger_tx.clone()).map_err(subscribe("netlink notifications"))?;
    let source = Source::new(args).await?;
    let client = source.client().cloned();
    let side = side(args, source, &node, &trigger_tx, registry, channels).await?;
    let mut observer = ObserverTask::new(
        &args.observer,
        &node,
        registry,
        published,
        traffic_tx,
        unexplained_tx,
    )?;
    let (ping, pings) = mpsc::channel(8);
    let ready = Arc::new(AtomicBool::new(false));
    let wiring = Wiring {
        triggers,
        pings,
        published: published_tx,
        metrics: LoopMetrics::register(registry),
        ready: ready.clone(),
    };
    process::register(registry);
    // The HTTP listeners' metrics last: the registry is sealed for them to serve.
    let http_metrics = HttpMetrics::register(registry);
    let state = AppState {
        metrics: Arc::new(Exposition::new(std::mem::take(registry), view)),
        ready,
        ping,
        tasks: tasks.clone(),
    };
    let http = listen(&args.http, state, client.as_ref(), &node, http_metrics).await?;
    // Everything that needed privilege (loading, attaching, binding) is done.
    drop_privileges(observer.as_mut(), reconciler.reads_pod_namespaces());
    Ok(Built {
        host,
        observer,
        http,
        side,
        reconciler,
        wiring,
    })
}

/// The HTTP listeners, bound (an address taken or not ours fails the start).
async fn listen(
    args: &http::Args,
    state: AppState,
    client: Option<&::kube::Client>,
    node: &str,
    metrics: HttpMetrics,
) -> Result<Http> {
    let http = Http::new(args, state, client, metrics).await?;
    tracing::info!(listen = %args.listen, health = %args.health_listen, node = %node,
                   auth = ?args.metrics_auth, tls = args.tls_cert_file.is_some(),
                   "serving /metrics, /healthz, /readyz");
    Ok(http)
}

/// What `/metrics` shows at each scrape: the findings, traffic and impacts
/// as last published, read where they are published.
fn view(follows: Follows) -> ViewSource {
    Box::new(move || FindingsView {
        findings: Arc::clone(&follows.findings.borrow().findings),
        traffic: Arc::clone(&follows.traffic.borrow()),
        impacts: Arc::clone(&follows.impacts.borrow().impacts),
    })
}

/// The subsystems of `source`, built.
async fn side(
    args: &Args,
    source: Source,
    node: &str,
    trigger_tx: &mpsc::Sender<Trigger>,
    registry: &mut Registry,
    channels: cluster::Channels,
) -> Result<Side> {
    Ok(match source {
        Source::Files(files) => {
            let watch = FileWatch::new(&files.paths(), trigger_tx.clone())
                .map_err(subscribe("changes of the input files (inotify)"))?;
            tracing::info!("reading Kubernetes state from files; no Events are written");
            Side::Files(watch, files)
        }
        Source::Cluster(client) => {
            let parts = cluster::Parts::new(args, client, node, trigger_tx, registry, channels);
            tracing::info!("watching the cluster");
            Side::Cluster(Box::new(parts.await?))
        }
    })
}

/// Every subsystem, built, none started.
struct Built {
    host: HostSource,
    /// The eBPF observer, unless off or unavailable.
    observer: Option<ObserverTask>,
    http: Http,
    /// The subsystems of the chosen [`Source`].
    side: Side,
    /// The reconcile loop's reconciler, inputs and outputs.
    reconciler: Reconciler,
    wiring: Wiring,
}

/// The subsystems of the chosen [`Source`].
enum Side {
    /// inotify on the input files.
    Files(FileWatch, Box<FileSources>),
    /// The cluster's watches, Event writer, lookups, condition, remediation.
    Cluster(Box<cluster::Parts>),
}

/// Every task the agent runs, spawned here and nowhere else.
fn spawn_all(
    tasks: &Supervisor,
    token: &CancellationToken,
    built: Built,
    args: reconcile_loop::Args,
) {
    let run = || token.child_token();
    tasks.spawn("netlink-notifier", built.host.run(run()));
    if let Some(observer) = built.observer {
        tasks.spawn("ebpf-observer", observer.run(run()));
    }
    tasks.spawn("http", built.http.run(run()));
    let input = match built.side {
        Side::Files(watch, files) => {
            tasks.spawn("file-watch", watch.run(run()));
            Input::Files(Arc::new(std::sync::Mutex::new(*files)))
        }
        Side::Cluster(parts) => {
            let parts = *parts;
            tasks.spawn("cluster-watches", parts.watches.run(run()));
            if let Some(condition) = parts.condition {
                tasks.spawn("node-condition", condition.run(run()));
            }
            if let Some(remediation) = parts.remediation {
                tasks.spawn("remediation", remediation.run(run()));
            }
            tasks.spawn("impact-lookups", parts.impact.run(run()));
            tasks.spawn("event-writer", parts.events.run(run()));
            Input::Cluster(parts.view)
        }
    };
    let reconcile = ReconcileLoop::new(args, built.reconciler, input, built.wiring);
    tasks.spawn("reconcile", reconcile.run(run()));
}
