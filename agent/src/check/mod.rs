//! `ipshadow check`: one reconcile, optionally with a window of traffic
//! evidence from the eBPF observer, printed.

mod watch;

use std::{sync::Arc, time::Duration};

pub use self::watch::{Outcome, watch};
use crate::{
    detect::impact,
    ebpf,
    inventory::ClusterState,
    kube::{
        self, CalicoFiles, SourceArgs,
        cluster::{local_collisions, pods_holding, services_claiming},
        connect::{ConnectArgs, KubeconfigError},
        list::{ListError, ListOptions, Scope, cluster_state},
        sources::FileSources,
    },
    reconcile::{self, NodeArgs, Reconciler},
    report::{Report, chain::Chain, output::OutputFormat},
};

/// `--help`'s heading of the traffic-evidence flags.
const EBPF_HEADING: &str = "Traffic evidence (eBPF)";

/// `ipshadow check`: the flags of a one-shot check.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format, as kubectl's `-o`: `text` (a table for people), `json` (the
    /// contract of docs/reference.md), `yaml` (the same document), or `wide` (the
    /// table with severity, ip source, the kernel's route and who else holds the address).
    #[arg(long, short = 'o', env = "IPSHADOW_OUTPUT", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// `--kubeconfig`, `--context`: first in `--help`.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// This node.
    #[command(flatten)]
    pub node: NodeArgs,
    // `--help` lists the headings in the order of their first flag: the eBPF
    // flags before the sources, whose files come last.
    /// Watch host traffic to the shadowed IPs for this many seconds with the eBPF
    /// classifier and add what it saw to each finding. 0: do not watch.
    #[arg(long, env = "IPSHADOW_WATCH_SECONDS", default_value_t = 0, help_heading = EBPF_HEADING,
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub watch_seconds: u64,
    /// The eBPF observer for `--watch-seconds`.
    #[command(flatten, next_help_heading = EBPF_HEADING)]
    pub ebpf: ebpf::Args,
    /// Files, or the cluster.
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Calico's IPAM objects, from files.
    #[command(flatten)]
    pub calico: CalicoFiles,
}

/// Why a check could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input file could not be read.
    #[error(transparent)]
    Files(#[from] kube::files::Error),
    /// The node could not be read.
    #[error(transparent)]
    Reconcile(#[from] reconcile::Error),
    /// No client for the API server.
    #[error(transparent)]
    Client(#[from] KubeconfigError),
    /// Looking up which pod holds one of this node's addresses failed.
    #[error(
        "listing the pods that hold this node's addresses (fieldSelector status.podIP) failed: {}; \
         check that the service account may list pods cluster-wide (see deploy/base/rbac.yaml)", Chain(.0))]
    Lookup(::kube::Error),
    /// Listing the Services that may claim this node's addresses failed.
    #[error(
        "listing Services (to tell whether a Service claims the local address that shadows a pod) \
         failed: {}; check that you may list services cluster-wide (kubectl auth can-i list \
         services -A)", Chain(.0))]
    Services(::kube::Error),
    /// A list of what this node needs failed.
    #[error(transparent)]
    List(#[from] ListError),
    /// The lists did not come in time.
    #[error(
        "the cluster was not listed within {0:?} (--sync-timeout-seconds); check that the API \
         server is reachable"
    )]
    Sync(Duration),
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reads the sources and this node's netlink state, and detects. Any file that
/// cannot be read is an error: a one-shot check has no earlier state to fall back on.
pub async fn run(args: &Args) -> Result<Report> {
    let (node, sources) = (&args.node, &args.sources);
    let reconciler = Reconciler::new(node)?;
    let Some(files) = FileSources::new(sources, &node.read.pod_ip_annotations) else {
        return from_cluster(&reconciler, args).await;
    };
    let mut files = files.with_calico(&args.calico);
    if let Some(e) = files.refresh().into_iter().next() {
        return Err(e.into());
    }
    let done = reconciler.reconcile(files.state()).await?;
    let routes = &files.state().routes;
    let impacts = done
        .findings
        .iter()
        .filter_map(|f| Some((f.pod()?.clone(), impact::of_finding(f, routes)?)))
        .collect();
    Ok(Report {
        node: reconciler.node.clone(),
        findings: done.findings,
        invalid: files.state().invalid.to_vec(),
        impacts,
        truth: Some(done.truth),
        ..Report::default()
    })
}

/// One reconcile against the cluster: list what this node needs once (from
/// the watch cache), then look up once which pods elsewhere hold this node's
/// addresses (a one-off list each: a person runs `check`, not every node all
/// the time) and, where a local address shadows a pod, which Service claims
/// it; reconcile again with them. Nothing is watched, nothing polled.
async fn from_cluster(reconciler: &Reconciler, args: &Args) -> Result<Report> {
    let (node, sources) = (&args.node, &args.sources);
    let client = args.connect.client().await?;
    let timeout = Duration::from_secs(sources.sync_timeout_seconds);
    let keys = &node.read.pod_ip_annotations;
    let mut read = tokio::time::timeout(
        timeout,
        cluster_state(
            &client,
            Scope::Node(&reconciler.node),
            ListOptions {
                annotation_keys: keys,
                cilium_namespace: &sources.cilium_namespace,
            },
            &mut |_, _, _| {},
        ),
    )
    .await
    .map_err(|_| Error::Sync(timeout))??;
    let mut state = ClusterState::assemble(read.clone());
    let first = reconciler.reconcile(&state).await?;
    let lookups = first
        .claimable
        .iter()
        .map(|ip| pods_holding(&client, *ip, keys));
    let found = tokio::time::timeout(timeout, futures::future::try_join_all(lookups))
        .await
        .map_err(|_| Error::Sync(timeout))?
        .map_err(Error::Lookup)?;
    let pods = Arc::make_mut(&mut read.pods);
    for p in found.into_iter().flatten() {
        if !pods.iter().any(|q| q.uid == p.uid && q.name == p.name) {
            pods.push(p);
        }
    }
    state = ClusterState::assemble(read.clone());
    let mut done = reconciler.reconcile(&state).await?;
    // A local address that shadows a pod may be a Service's, which a tenant chose.
    let local = local_collisions(&done.findings, &reconciler.node);
    if !local.is_empty() {
        let claims = tokio::time::timeout(timeout, services_claiming(&client, &local))
            .await
            .map_err(|_| Error::Sync(timeout))?
            .map_err(Error::Services)?;
        read.services = Arc::new(claims);
        state = ClusterState::assemble(read);
        done = reconciler.reconcile(&state).await?;
    }
    Ok(Report {
        node: reconciler.node.clone(),
        findings: done.findings,
        invalid: state.invalid.to_vec(),
        truth: Some(done.truth),
        ..Report::default()
    })
}
