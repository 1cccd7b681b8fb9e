//! The cluster side of the agent, built at start: the watches and what reads
//! the published findings to act on the API server (Events, the Node
//! condition, lookups, remediation). [`super::spawn_all`] runs them.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::{
    Args, Result,
    condition::ConditionTask,
    events::{EventTask, Follows},
    host::Trigger,
    impact::{ImpactTask, Looked},
    remediate,
};
use crate::{
    kube::{
        self,
        cluster::{ClusterSource, ClusterView},
    },
    report::{metrics::Registry, traffic::Unexplained},
};

/// What the cluster side reads and publishes.
pub(super) struct Channels {
    /// Each reconcile's findings (which every cluster-side task follows), the
    /// traffic and the impacts: what the Event writer follows.
    pub(super) follows: Follows,
    /// Traffic to this node's addresses no finding explains: pod lookups.
    pub(super) unexplained: watch::Receiver<Arc<Unexplained>>,
    /// Where the impact lookups publish.
    pub(super) impacts_tx: watch::Sender<Looked>,
}

/// The cluster-side subsystems, not started yet.
pub(super) struct Parts {
    /// The watches' state, for the reconcile loop.
    pub(super) view: ClusterView,
    /// The watches, and the lookups and records they run.
    pub(super) watches: ClusterSource,
    /// The Node condition, unless turned off.
    pub(super) condition: Option<ConditionTask>,
    /// Remediation, when asked for.
    pub(super) remediation: Option<remediate::RemediateTask>,
    /// What breaks behind the pods with findings.
    pub(super) impact: ImpactTask,
    /// The Event writer.
    pub(super) events: EventTask,
}

impl Parts {
    /// Builds every cluster-side subsystem on `client`.
    pub(super) async fn new(
        args: &Args,
        client: ::kube::Client,
        node: &str,
        trigger_tx: &mpsc::Sender<Trigger>,
        registry: &mut Registry,
        channels: Channels,
    ) -> Result<Self> {
        let published = channels.follows.findings.clone();
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
        let watches = source
            .with_cilium_namespace(&args.sources.cilium_namespace)
            .with_initial_list(args.watches.initial_list)
            .with_owner_lookup_spread(std::time::Duration::from_secs(
                args.watches.owner_lookup_spread_seconds,
            ))
            .with_confirmations(published.clone())
            .with_lookups(channels.unexplained);
        // Beside Events, the Node condition (unless turned off) and remediation (when asked for).
        let condition = args.condition.node_condition.then(|| {
            ConditionTask::new(
                client.clone(),
                node,
                &args.condition,
                registry,
                published.clone(),
            )
        });
        let remediation = if args.remediate.remediate == remediate::Mode::Off {
            None
        } else {
            Some(remediate::RemediateTask::new(
                kube::client_without_retries().await?,
                node,
                &args.remediate,
                registry,
                published.clone(),
            ))
        };
        let impact = ImpactTask::new(client.clone(), node, published, channels.impacts_tx);
        let events = EventTask::new(client, node, &args.events, registry, channels.follows);
        Ok(Self {
            view,
            watches,
            condition,
            remediation,
            impact,
            events,
        })
    }
}
