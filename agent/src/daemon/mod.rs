//! `ipshadow agent`: the DaemonSet process, made of small subsystems in the
//! spirit of Cilium's hive — each with its own flags, a `new` that does what
//! can fail at start, and a `run(self, CancellationToken)`:
//!
//! - host source ([`host`]): netlink change notifications;
//! - cluster source: the kube watches ([`crate::kube::cluster::ClusterSource`]),
//!   or inotify on the input files ([`files`]);
//! - the reconcile loop ([`reconcile_loop`]): netlink + cluster state → findings;
//! - the observer ([`observer`]): the eBPF map, counters and traffic series;
//! - the Event writer ([`events`]);
//! - HTTP ([`http`]): `/metrics`, `/healthz`, `/readyz`.
//!
//! This module only wires them: channels between them, one token to stop them.

mod condition;
mod endpoints;
pub mod events;
mod files;
mod host;
pub mod http;
mod impact;
pub mod observer;
pub mod reconcile_loop;
mod remediate;
mod scrape_auth;
mod supervise;
#[cfg(test)]
mod test_api;

use std::{
    collections::BTreeSet,
    net::IpAddr,
    sync::{Arc, atomic::AtomicBool},
};

use tokio::{
    signal::unix::{SignalKind, signal},
    sync::{mpsc, watch},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use self::supervise::Supervisor;

use self::{
    events::EventTask,
    files::FileWatch,
    host::{HostSource, Trigger},
    http::{AppState, Http},
    observer::ObserverTask,
    reconcile_loop::{Input, ReconcileLoop, Wiring},
};
use crate::{
    detect::Finding,
    ebpf,
    kube::{self, SourceArgs, cluster::ClusterSource, sources::FileSources},
    privileges,
    reconcile::{self, NodeArgs, Reconciler},
    report::{
        metrics::Metrics,
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
    #[error("subscribing to {what} failed: {source}")]
    Subscribe {
        /// Which one.
        what: &'static str,
        /// What the kernel said.
        #[source]
        source: std::io::Error,
    },
    /// `--ebpf=required` and the observer failed.
    #[error("the eBPF observer is required (--ebpf=required) but failed: {0}")]
    Ebpf(#[from] ebpf::Error),
    /// No client for the API server.
    #[error(transparent)]
    Client(#[from] kube::ClientError),
    /// TLS or scrape authentication could not be set up.
    #[error(transparent)]
    Tls(#[from] scrape_auth::TlsError),
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the reconcile loop publishes after each reconcile.
#[derive(Clone, Debug, Default)]
pub(crate) struct Published {
    findings: Arc<Vec<Finding>>,
    /// This node's addresses a pod elsewhere could hold: watched for traffic.
    claimable: Arc<BTreeSet<IpAddr>>,
    /// This node's Node (its uid for Events about it, its condition as shown).
    node: Option<crate::inventory::NodeFacts>,
    /// A reconcile has run.
    ready: bool,
}

/// Starts every subsystem, runs until SIGTERM or SIGINT, then stops them all.
pub async fn run(args: Args) -> Result<()> {
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let reconciler = Reconciler::new(&args.node)?;
    let node = reconciler.node.clone();
    let subscribe = |what| move |source| Error::Subscribe { what, source };
    let mut term = signal(SignalKind::terminate()).map_err(subscribe("SIGTERM"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(subscribe("SIGINT"))?;

    let token = CancellationToken::new();
    let tracker = TaskTracker::new();
    let tasks = Supervisor::new(tracker.clone(), token.clone(), metrics.task_up.clone());
    let (trigger_tx, triggers) = mpsc::channel(64);
    let (published_tx, published) = watch::channel(Published::default());
    let (traffic_tx, traffic) = watch::channel(Arc::<Traffic>::default());
    let (unexplained_tx, unexplained) = watch::channel(Arc::<Unexplained>::default());

    let host = HostSource::new(trigger_tx.clone()).map_err(subscribe("netlink notifications"))?;
    // Files (--pods) or the cluster: the client serves the watches, Events and scrape reviews.
    let client = match args.sources.pods {
        Some(_) => None,
        None => Some(kube::client().await?),
    };
    let (ping_tx, pings) = mpsc::channel(8);
    let state = AppState {
        metrics: metrics.clone(),
        ready: ready.clone(),
        ping: ping_tx,
        tasks: tasks.clone(),
    };
    let http = Http::new(&args.http, state, client.as_ref()).await?;
    tracing::info!(listen = %args.http.listen, health = %args.http.health_listen, node = %node,
                   auth = ?args.http.metrics_auth, tls = args.http.tls_cert_file.is_some(),
                   "serving /metrics, /healthz, /readyz");
    let input = cluster_input(
        &args,
        client.clone(),
        &node,
        (&tasks, &token),
        &trigger_tx,
        &metrics,
        (published.clone(), traffic.clone(), unexplained),
    )
    .await?;
    let mut observer = ObserverTask::new(
        &args.observer,
        &node,
        metrics.clone(),
        published,
        (traffic_tx, unexplained_tx),
    )?;

    // Everything that needed privilege (loading, attaching, binding) is done.
    let attached = observer
        .as_mut()
        .map(|o| o as &mut dyn privileges::Attached);
    match privileges::drop_unneeded(attached) {
        Ok(d) => {
            tracing::info!(kept = ?d.kept, dropped = d.dropped.len(), "dropped the capabilities not needed any more");
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not drop capabilities; running with those it was given");
        }
    }

    tasks.spawn("netlink-notifier", host.run(token.child_token()));
    if let Some(observer) = observer {
        tasks.spawn("ebpf-observer", observer.run(token.child_token()));
    }
    tasks.spawn("http", http.run(token.child_token()));
    let wiring = Wiring {
        triggers,
        pings,
        published: published_tx,
        metrics,
        ready,
    };
    let reconcile = ReconcileLoop::new(args.reconcile, reconciler, input, wiring);
    tasks.spawn("reconcile", reconcile.run(token.child_token()));
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

/// The cluster side: inotify on the input files, or the cluster's watches and
/// the Event writer, spawned on `tasks`.
async fn cluster_input(
    args: &Args,
    client: Option<::kube::Client>,
    node: &str,
    (tasks, token): (&Supervisor, &CancellationToken),
    trigger_tx: &mpsc::Sender<Trigger>,
    metrics: &Arc<Metrics>,
    (published, traffic, unexplained): (
        watch::Receiver<Published>,
        watch::Receiver<Arc<Traffic>>,
        watch::Receiver<Arc<Unexplained>>,
    ),
) -> Result<Input> {
    let subscribe = |what| move |source| Error::Subscribe { what, source };
    let files = FileSources::new(&args.sources, &args.node.read.pod_ip_annotations);
    let input = if let (Some(files), None) = (files, &client) {
        let watch = FileWatch::new(&files.paths(), trigger_tx.clone())
            .map_err(subscribe("changes of the input files (inotify)"))?;
        tasks.spawn("file-watch", watch.run(token.child_token()));
        tracing::info!("reading Kubernetes state from files; no Events are written");
        Input::Files(Arc::new(std::sync::Mutex::new(files)))
    } else {
        let client = match client {
            Some(c) => c,
            None => kube::client().await?,
        };
        let tx = trigger_tx.clone();
        let on_change = Arc::new(move || {
            let _ = tx.try_send(Trigger::Kube);
        });
        let (source, view) = ClusterSource::new(
            client.clone(),
            node,
            &args.node.read.pod_ip_annotations,
            on_change,
        );
        // The findings, for the records that confirm an annotated address.
        let (findings_tx, findings) = watch::channel(Arc::<Vec<Finding>>::default());
        let mut feed = published.clone();
        let stop = token.child_token();
        tasks.spawn("findings-feed", async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    changed = feed.changed() => if changed.is_err() { return },
                }
                let latest = Arc::clone(&feed.borrow_and_update().findings);
                findings_tx.send_replace(latest);
            }
        });
        let source = source
            .with_cilium_namespace(&args.sources.cilium_namespace)
            .with_confirmations(findings)
            .with_lookups(unexplained);
        tasks.spawn("cluster-watches", source.run(token.child_token()));
        if args.condition.node_condition {
            let task = condition::ConditionTask::new(
                client.clone(),
                node,
                &args.condition,
                metrics.clone(),
                published.clone(),
            );
            tasks.spawn("node-condition", task.run(token.child_token()));
        }
        if args.remediate.remediate != remediate::Mode::Off {
            let task = remediate::RemediateTask::new(
                kube::client_without_retries().await?,
                node,
                &args.remediate,
                metrics.clone(),
                published.clone(),
            );
            tasks.spawn("remediation", task.run(token.child_token()));
        }
        let (impacts_tx, impacts) = watch::channel(impact::Looked::default());
        let lookups = impact::ImpactTask::new(
            client.clone(),
            node,
            metrics.clone(),
            published.clone(),
            impacts_tx,
        );
        tasks.spawn("impact-lookups", lookups.run(token.child_token()));
        let writer = EventTask::new(
            client,
            node,
            &args.events,
            metrics.clone(),
            (published, traffic, impacts),
        );
        tasks.spawn("event-writer", writer.run(token.child_token()));
        tracing::info!("watching the cluster");
        Input::Cluster(view)
    };
    Ok(input)
}
