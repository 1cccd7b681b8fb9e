//! The impact lookups: for the namespaces of this node's pods with findings,
//! their EndpointSlices, and the webhook configurations and APIServices that
//! call through Services — read only while there are such findings, each pod
//! at most once per [`REFRESH`] and all of them at most once per [`MIN_GAP`]:
//! a node without findings asks nothing, one with findings a few lists per
//! 10 minutes. Only what leads to those pods is kept ([`Behind`]): a tenant's
//! namespace of many large EndpointSlices costs reading them, not holding them.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Published;
use crate::{
    detect::{Finding, impact::of_finding},
    kube::{
        cluster::follow::{self, Lookup, Pace},
        list::{Behind, ListError, Read, routes},
    },
    report::{Impacts, events::reported_here},
};

/// How often the routes of the same pods are read again.
const REFRESH: Duration = Duration::from_mins(10);
/// Lists at most this often, however the findings change (a new pod with a
/// finding is looked up after it at the latest).
const MIN_GAP: Duration = Duration::from_secs(30);

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
    impacts: watch::Sender<Looked>,
    published: watch::Receiver<Published>,
    /// The pods with findings reported here, and their addresses.
    behind: Behind,
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
            impacts,
            published,
            behind: Behind::default(),
            routes: Arc::default(),
        }
    }

    /// Looks up until `token` is cancelled.
    pub(crate) async fn run(self, token: CancellationToken) {
        let published = self.published.clone();
        follow::run(self, published, token).await;
    }

    fn mine<'a>(&self, input: &'a Published) -> impl Iterator<Item = &'a Finding> {
        let node = self.node.clone();
        input
            .findings
            .iter()
            .filter(move |f| reported_here(f, &node))
    }
}

impl Lookup for ImpactTask {
    type Input = Published;
    type Key = (String, String);
    type Answer = crate::inventory::Routes;
    type Error = ListError;
    const ASKING: &'static str = "reading what routes to the shadowed pods";
    const MEANWHILE: &'static str = "findings keep severity warning meanwhile";

    fn pace(&self) -> Pace {
        Pace::all_keys(REFRESH, MIN_GAP)
    }

    /// The pods (and addresses) behind this node's findings.
    fn wanted(&mut self, input: &Published) -> Vec<Self::Key> {
        self.behind = Behind::of(self.mine(input));
        self.behind.keys().collect()
    }

    /// Lists what routes to the pods from the watch cache.
    async fn ask(&self, _: &Self::Key, _: &[Self::Key]) -> Result<Self::Answer, ListError> {
        let mut quiet = |_: &'static str, _: usize, _: bool| {};
        routes(&self.client, &self.behind, Read::Cache, &mut quiet).await
    }

    fn store(&mut self, _: &Self::Key, routes: Self::Answer) -> bool {
        self.routes = Arc::new(routes);
        true
    }

    /// Publishes the impacts of `input`'s findings, as far as the routes read show them.
    fn settled(&mut self, input: &Published) {
        let impacts: Impacts = (self.mine(input))
            .filter_map(|f| Some((f.pod()?.clone(), of_finding(f, &self.routes)?)))
            .collect::<BTreeMap<_, _>>();
        self.impacts.send_replace(Looked {
            for_findings: Arc::clone(&input.findings),
            impacts: Arc::new(impacts),
        });
    }
}
