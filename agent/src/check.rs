//! `ipshadow check`: one reconcile, printed.

use std::{sync::Arc, time::Duration};

use crate::{
    cli::{NodeArgs, SourceArgs},
    detect::Finding,
    kube::{self, Invalid, cluster::Cluster},
    reconcile::{self, Reconciler},
    sources::FileSources,
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Files(#[from] kube::files::Error),
    #[error(transparent)]
    Reconcile(#[from] reconcile::Error),
    #[error(
        "connecting to the Kubernetes API failed: {0}; set KUBECONFIG (or run in a pod with a \
         service account), or pass --pods/--ciliumnodes/--subnets files"
    )]
    Client(#[source] ::kube::Error),
    #[error(
        "pods were not listed from the cluster within {0:?}; check that the API server is reachable \
         and that the service account may list pods (see deploy/rbac.yaml)"
    )]
    Sync(Duration),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The outcome of one check.
#[derive(Debug)]
pub struct Report {
    pub node: String,
    pub findings: Vec<Finding>,
    /// Objects (or fields) skipped as malformed.
    pub invalid: Vec<Invalid>,
}

/// Reads the sources and this node's netlink state, and detects. Any file that
/// cannot be read is an error: a one-shot check has no earlier state to fall back on.
pub async fn run(node: &NodeArgs, sources: &SourceArgs) -> Result<Report> {
    let reconciler = Reconciler::new(node)?;
    let Some(pods) = sources.pods.clone() else {
        return from_cluster(&reconciler, node, sources).await;
    };
    let mut files = FileSources::new(
        pods,
        sources.ciliumnodes.clone(),
        sources.subnets.clone(),
        node,
    );
    if let Some(e) = files.refresh().into_iter().next() {
        return Err(e.into());
    }
    let done = reconciler.reconcile(files.state()).await?;
    Ok(Report {
        node: reconciler.node.clone(),
        findings: done.findings,
        invalid: files.state().invalid.clone(),
    })
}

/// One reconcile against the cluster: list everything once, then list the pods
/// holding this node's addresses, and reconcile again with them.
async fn from_cluster(
    reconciler: &Reconciler,
    node: &NodeArgs,
    sources: &SourceArgs,
) -> Result<Report> {
    let client = ::kube::Client::try_default().await.map_err(Error::Client)?;
    let mut cluster = Cluster::start(
        client,
        &reconciler.node,
        &node.pod_ip_annotations,
        Arc::new(|| {}),
    );
    let timeout = Duration::from_secs(sources.sync_timeout_seconds);
    wait(timeout, || cluster.settled()).await?;
    if !cluster.synced() {
        return Err(Error::Sync(timeout));
    }
    let first = reconciler.reconcile(&cluster.snapshot().0).await?;
    cluster.watch_ips(&first.watch_ips);
    wait(timeout, || cluster.synced()).await?;
    let (state, _) = cluster.snapshot();
    let done = reconciler.reconcile(&state).await?;
    Ok(Report {
        node: reconciler.node.clone(),
        findings: done.findings,
        invalid: state.invalid,
    })
}

async fn wait(timeout: Duration, mut ready: impl FnMut() -> bool) -> Result<()> {
    let start = std::time::Instant::now();
    while !ready() {
        if start.elapsed() > timeout {
            return Err(Error::Sync(timeout));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
