//! The impact lookups: for the namespaces of this node's pods with findings,
//! their EndpointSlices, and the webhook configurations and APIServices that
//! call through Services — read only while there are such findings, each pod
//! at most once per [`REFRESH`] and all of them at most once per [`MIN_GAP`]:
//! a node without findings asks nothing, one with findings a few lists per
//! 10 minutes. Only what leads to those pods is kept ([`Behind`]): a tenant's
//! namespace of many large EndpointSlices costs reading them, not holding them.

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
        list::{Behind, ListError, Read, routes},
        ttl::Cache,
    },
    report::{Impacts, events::reported_here},
};

/// How often the routes of the same pods are read again.
const REFRESH: Duration = Duration::from_mins(10);
/// Lists at most this often, however the findings change (a new pod with a
/// finding is looked up after it at the latest).
const MIN_GAP: Duration = Duration::from_secs(30);
/// Pods remembered as read at most; beyond, routes are read again sooner.
const PODS: usize = 1024;

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
    /// The pods (and addresses) last read, each fresh for [`REFRESH`].
    read: Cache<(String, String), ()>,
    /// When the routes were last listed.
    last_list: Option<tokio::time::Instant>,
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
            read: Cache::new(PODS),
            last_list: None,
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
            let behind = Behind::of(mine.iter().copied());
            let listed = tokio::select! {
                () = token.cancelled() => return,
                r = self.refresh(&behind) => r,
            };
            if let Err(e) = &listed {
                let delay = backoff.next().unwrap_or(REFRESH);
                tracing::warn!(error = %e, retry_in = ?delay, "reading what routes to the shadowed pods failed; findings keep severity warning meanwhile");
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(delay) => continue,
                }
            }
            let wake = listed
                .ok()
                .flatten()
                .unwrap_or_else(|| tokio::time::Instant::now() + REFRESH);
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
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Lists what routes to the pods of `behind` from the watch cache, unless
    /// each was read less than [`REFRESH`] ago; within [`MIN_GAP`] of the
    /// last list, not yet: then when to come back.
    async fn refresh(
        &mut self,
        behind: &Behind,
    ) -> Result<Option<tokio::time::Instant>, ListError> {
        let now = tokio::time::Instant::now();
        let keys: BTreeSet<(String, String)> = behind.keys().collect();
        if keys.iter().all(|k| self.read.fresh(k, now)) {
            return Ok(None);
        }
        if let Some(at) = self.last_list.map(|t| t + MIN_GAP).filter(|at| now < *at) {
            return Ok(Some(at));
        }
        self.last_list = Some(now);
        let mut quiet = |_: &'static str, _: usize, _: bool| {};
        self.routes = Arc::new(routes(&self.client, behind, Read::Cache, &mut quiet).await?);
        // Only these pods' routes are held now.
        self.read.retain(|_| false);
        let now = tokio::time::Instant::now();
        for k in keys {
            self.read.put(k, (), REFRESH, false, now);
        }
        Ok(None)
    }
}
