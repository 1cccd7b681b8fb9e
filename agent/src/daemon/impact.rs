//! The impact lookups: for the namespaces of this node's pods with findings,
//! their EndpointSlices, and the webhook configurations and APIServices that
//! call through Services — read only while there are such findings, and each
//! at most once per [`REFRESH`]: a node without findings asks nothing, one
//! with findings a few lists per 10 minutes.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Published;
use crate::{
    detect::{Finding, impact::of_finding},
    kube::{
        cluster::{Failure, backoff},
        list::{ListError, Read, routes},
        ttl::Cache,
    },
    report::{Impacts, events::reported_here},
};

/// How often the routes of the same namespaces are read again.
const REFRESH: Duration = Duration::from_mins(10);
/// Namespaces remembered as read at most; beyond, routes are read again sooner.
const NAMESPACES: usize = 1024;

/// The impacts of one publication of findings (the same `Arc`): the Event
/// writer waits for them briefly before it opens new series, whose notes are
/// not updated later.
#[derive(Clone, Debug, Default)]
pub(crate) struct Looked {
    /// The findings they were looked up for.
    pub(crate) for_findings: Arc<Vec<Finding>>,
    /// What breaks behind each pod with a finding.
    pub(crate) impacts: Arc<Impacts>,
}

/// The lookup task.
pub(crate) struct ImpactTask {
    client: kube::Client,
    node: String,
    published: watch::Receiver<Published>,
    impacts: watch::Sender<Looked>,
    /// The namespaces last read, each fresh for [`REFRESH`].
    read: Cache<String, ()>,
    /// What routes to pods in them.
    routes: Arc<crate::inventory::Routes>,
}

impl ImpactTask {
    pub(crate) fn new(
        client: kube::Client,
        node: &str,
        published: watch::Receiver<Published>,
        impacts: watch::Sender<Looked>,
    ) -> Self {
        Self {
            client,
            node: node.to_owned(),
            published,
            impacts,
            read: Cache::new(NAMESPACES),
            routes: Arc::default(),
        }
    }

    /// Looks up until `token` is cancelled.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        let mut backoff = backoff(Failure::Error);
        loop {
            let input = self.published.borrow_and_update().clone();
            let mine: Vec<&Finding> = input
                .findings
                .iter()
                .filter(|f| reported_here(f, &self.node))
                .collect();
            let namespaces: BTreeSet<String> = mine
                .iter()
                .filter_map(|f| f.pod().map(|p| p.namespace.clone()))
                .collect();
            let listed = tokio::select! {
                () = token.cancelled() => return,
                r = self.refresh(namespaces) => r,
            };
            if let Err(e) = listed {
                let delay = backoff.next().unwrap_or(REFRESH);
                tracing::warn!(error = %e, retry_in = ?delay, "reading what routes to the shadowed pods failed; findings keep severity warning meanwhile");
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(delay) => continue,
                }
            }
            kube::runtime::utils::Backoff::reset(&mut backoff);
            let impacts: Impacts = mine
                .iter()
                .filter_map(|f| Some((f.pod()?.clone(), of_finding(f, &self.routes)?)))
                .collect::<BTreeMap<_, _>>();
            self.impacts.send_replace(Looked {
                for_findings: Arc::clone(&input.findings),
                impacts: Arc::new(impacts),
            });
            tokio::select! {
                () = token.cancelled() => return,
                r = self.published.changed() => if r.is_err() { return },
                () = tokio::time::sleep(REFRESH) => {}
            }
        }
    }

    /// Lists what routes to pods of `namespaces` from the watch cache, unless
    /// each was read less than [`REFRESH`] ago.
    async fn refresh(&mut self, namespaces: BTreeSet<String>) -> Result<(), ListError> {
        let now = tokio::time::Instant::now();
        if namespaces.is_empty() || namespaces.iter().all(|ns| self.read.fresh(ns, now)) {
            return Ok(());
        }
        let mut quiet = |_: &'static str, _: usize, _: bool| {};
        self.routes = Arc::new(routes(&self.client, &namespaces, Read::Cache, &mut quiet).await?);
        // Only these namespaces' routes are held now.
        self.read.retain(|_| false);
        let now = tokio::time::Instant::now();
        for ns in namespaces {
            self.read.put(ns, (), REFRESH, false, now);
        }
        Ok(())
    }
}
