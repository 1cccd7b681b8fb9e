//! The cluster as a source: watches (list + watch, no polling) feeding
//! converted caches — pods on this node, all CiliumNodes, kube-ovn Subnets,
//! Calico's IPPools, this node's Node, every Node's metadata — each with a selector the API
//! server indexes, or none; each started with a streaming list where the API
//! server offers one, else a list from the watch cache ([`initial`]). A pod
//! elsewhere holding one of this node's addresses is looked up only when host
//! traffic to the address shows it ([`lookup`]), then watched by name.
//! [`ClusterSource`] runs them until cancelled; [`ClusterView`] reads snapshots.

mod annotations;
mod cache;
mod confirm;
mod convert;
pub(crate) mod follow;
pub mod initial;
pub(in crate::kube) mod lean;
pub(in crate::kube) mod list_body;
mod listed;
mod lookup;
mod ranges;
mod sandbox;
mod services;
mod view;
mod watch;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
};

use k8s_openapi::api::core::v1::{ConfigMap, Pod as K8sPod};
use kube::{Api, Client};
use tokio::sync::watch as channel;

use crate::report::Published;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use self::{
    cache::Cache,
    convert::{by_name, convert_cilium_config, convert_node, convert_pod},
    initial::{Initial, InitialList, Scope},
    lean::{LeanCiliumNode, LeanIpPool, LeanNode, LeanSubnet},
    lookup::Followed,
    watch::Watched,
};
pub use self::{
    lookup::pods_holding,
    services::{local_collisions, services_claiming},
    watch::{Failure, backoff},
};
use crate::{
    inventory::{CiliumConfig, CniNode, IpPool, NodeFacts, Pod, SandboxFailure, Subnet, lock},
    kube::objects,
    report::traffic::Unexplained,
};

#[derive(Default)]
struct State {
    pods_here: Cache<Pod>,
    /// Pods elsewhere found holding this node's addresses, each watched by name.
    pods_at: BTreeMap<Followed, Cache<Pod>>,
    cilium_nodes: Cache<CniNode>,
    subnets: Cache<Subnet>,
    /// Calico's IPPools: where its pods get addresses (its IPAMBlocks, one
    /// or more per node, are not watched: every agent would hold them all).
    ip_pools: Cache<IpPool>,
    node: Cache<NodeFacts>,
    /// Cilium's addresses in every Node's annotations (metadata-only watch,
    /// run only while there are no CiliumNodes: see [`wants_annotations`]).
    annotated: Cache<CniNode>,
    /// Cilium's `cilium-config` ConfigMap.
    cilium_config: Cache<CiliumConfig>,
    /// kubelet's sandbox refusals of this node's waiting pods, by pod uid.
    sandbox: BTreeMap<String, Vec<SandboxFailure>>,
    /// What reading them cut short (a list, a message), by pod uid.
    sandbox_problems: BTreeMap<String, Vec<crate::inventory::Invalid>>,
    /// The addresses kube-ovn's IP records hold, by pod uid, for this node's
    /// pods whose finding rests on their annotation.
    kube_ovn_ips: BTreeMap<String, Vec<std::net::IpAddr>>,
    /// The Services claiming this node's local addresses that pods' IPs equal.
    services: Arc<crate::inventory::ServiceAddresses>,
    /// The Nodes owning ranges this node's bridges still route, and their pods.
    range_owners: Arc<ranges::RangeOwners>,
    up: BTreeMap<&'static str, bool>,
    /// Watches whose resource does not exist here (a CRD not installed), or
    /// not read now (every Node's annotations while CiliumNodes exist).
    absent: BTreeSet<&'static str>,
    /// How watches get their initial state.
    initial: Arc<Initial>,
}

/// Whether every Node's annotations must be read: only while the cluster has
/// no CiliumNodes (the resource absent, or none listed). Cilium creates one per
/// node by default and it carries the same addresses as its Node annotations
/// (`--annotate-k8s-node`); watching every Node from every node would add one
/// event per kubelet status report per agent: ~17 events/s per agent at 5,000
/// nodes, ~83,000/s from the API server in all.
fn wants_annotations(st: &State) -> bool {
    st.absent.contains("ciliumnodes") || (st.cilium_nodes.synced && st.cilium_nodes.is_empty())
}

/// Where Cilium's ConfigMap lives unless told otherwise.
pub const DEFAULT_CILIUM_NAMESPACE: &str = "kube-system";
/// Cilium's ConfigMap.
const CILIUM_CONFIG: &str = "cilium-config";

type Shared = Arc<Mutex<State>>;
type OnChange = Arc<dyn Fn() + Send + Sync>;

/// Where a sub-task's answers go: the shared state of `node`'s watches, and
/// who to tell of a change.
#[derive(Clone)]
struct Sink {
    node: String,
    state: Shared,
    on_change: OnChange,
}

impl Sink {
    /// Changes the state; a reconcile when `change` says it changed anything.
    fn change(&self, change: impl FnOnce(&mut State) -> bool) {
        let changed = change(&mut lock(&self.state));
        if changed {
            (self.on_change)();
        }
    }

    /// Sets what `field` picks to `new`; a reconcile when that changed it.
    fn set<T: PartialEq>(&self, field: impl FnOnce(&mut State) -> &mut T, new: T) {
        self.change(|st| {
            let old = field(st);
            *old != new && {
                *old = new;
                true
            }
        });
    }
}

/// The watches of one node; [`ClusterSource::run`] runs them.
pub struct ClusterSource {
    client: Client,
    sink: Sink,
    cilium_namespace: String,
    keys: Arc<Vec<String>>,
    unexplained: Option<channel::Receiver<Arc<Unexplained>>>,
    findings: Option<channel::Receiver<Published>>,
    owner_lookup_spread: std::time::Duration,
}

/// Reads what the watches have seen.
pub struct ClusterView {
    node: String,
    state: Shared,
}

impl ClusterSource {
    /// The watches of `node`; `on_change` is called after every applied event.
    pub fn new(
        client: Client,
        node: &str,
        annotation_keys: &[String],
        on_change: Arc<dyn Fn() + Send + Sync>,
    ) -> (Self, ClusterView) {
        let state = Shared::default();
        let source = Self {
            client,
            sink: Sink {
                node: node.to_owned(),
                state: state.clone(),
                on_change,
            },
            cilium_namespace: DEFAULT_CILIUM_NAMESPACE.to_owned(),
            keys: Arc::new(annotation_keys.to_vec()),
            unexplained: None,
            findings: None,
            owner_lookup_spread: std::time::Duration::ZERO,
        };
        let view = ClusterView {
            node: node.to_owned(),
            state,
        };
        (source, view)
    }

    /// Starts watches with streaming lists, lists, or the first where the API
    /// server offers it (the default).
    #[must_use]
    pub fn with_initial_list(self, mode: InitialList) -> Self {
        lock(&self.sink.state).initial = Arc::new(Initial::new(mode));
        self
    }

    /// Spreads the first lookup of a bridge range's owner over `spread`.
    #[must_use]
    pub fn with_owner_lookup_spread(mut self, spread: std::time::Duration) -> Self {
        self.owner_lookup_spread = spread;
        self
    }

    /// Reads Cilium's `cilium-config` in `namespace` (default `kube-system`).
    #[must_use]
    pub fn with_cilium_namespace(mut self, namespace: &str) -> Self {
        namespace.clone_into(&mut self.cilium_namespace);
        self
    }

    /// Asks kube-ovn's IP record of a pod of this node whose finding rests on
    /// its annotation alone (see [`confirm`]); with the same findings, looks
    /// up the owners of a bridge's foreign range and the Services behind
    /// local addresses, and watches Calico's IPPools once Calico runs here.
    /// Without it, none of these runs.
    #[must_use]
    pub fn with_confirmations(mut self, findings: channel::Receiver<Published>) -> Self {
        self.findings = Some(findings);
        self
    }

    /// Looks up which pod holds an address of this node when the observer
    /// reports traffic to it that no finding explains (see [`lookup`]).
    #[must_use]
    pub fn with_lookups(mut self, unexplained: channel::Receiver<Arc<Unexplained>>) -> Self {
        self.unexplained = Some(unexplained);
        self
    }

    /// Runs the fixed watches, the lookups and the watches of the pods they
    /// found, until `token` is cancelled.
    pub async fn run(mut self, token: CancellationToken) {
        let tasks = TaskTracker::new();
        let cilium_nodes_moved = self.spawn_pods_and_cilium_nodes(&tasks, &token);
        self.spawn_node_watches(&tasks, &token);
        self.spawn_records(&tasks, &token);
        tasks.spawn(self.annotations_without_cilium_nodes(
            cilium_nodes_moved,
            tasks.clone(),
            token.clone(),
        ));
        if let Some(unexplained) = self.unexplained.take() {
            let holders = lookup::Holders {
                client: self.client.clone(),
                sink: self.sink.clone(),
                keys: self.keys.clone(),
                tasks: tasks.clone(),
                token: token.clone(),
                followed: BTreeMap::new(),
            };
            follow::run(holders, unexplained, token.clone()).await;
        } else {
            token.cancelled().await;
        }
        tasks.close();
        tasks.wait().await;
    }

    /// The watches of this node's pods and of every CiliumNode; the latter
    /// also notifies the returned [`Notify`](tokio::sync::Notify), which
    /// decides whether Node annotations are needed.
    fn spawn_pods_and_cilium_nodes(
        &self,
        tasks: &TaskTracker,
        token: &CancellationToken,
    ) -> Arc<tokio::sync::Notify> {
        let k = self.keys.clone();
        tasks.spawn(watch::run(
            Watched {
                api: Api::<K8sPod>::all(self.client.clone()),
                scope: Scope::Selected(format!("spec.nodeName={}", self.sink.node)),
                source: "pods",
            },
            self.sink.clone(),
            move |st, ev| st.pods_here.apply(ev, |p| convert_pod(p, &k)),
            token.clone(),
        ));
        let cilium_nodes_moved = Arc::new(tokio::sync::Notify::new());
        let moved = cilium_nodes_moved.clone();
        let on_change = self.sink.on_change.clone();
        tasks.spawn(watch::run(
            Watched {
                api: Api::<LeanCiliumNode>::all(self.client.clone()),
                scope: Scope::Cluster,
                source: "ciliumnodes",
            },
            Sink {
                on_change: Arc::new(move || {
                    on_change();
                    moved.notify_one();
                }),
                ..self.sink.clone()
            },
            |st, ev| {
                st.cilium_nodes
                    .apply(ev, |o| by_name(o, objects::cilium_node))
            },
            token.clone(),
        ));
        cilium_nodes_moved
    }

    /// The watches of kube-ovn's Subnets, this node's Node and `cilium-config`.
    fn spawn_node_watches(&self, tasks: &TaskTracker, token: &CancellationToken) {
        tasks.spawn(watch::run(
            Watched {
                api: Api::<LeanSubnet>::all(self.client.clone()),
                scope: Scope::Cluster,
                source: "subnets",
            },
            self.sink.clone(),
            |st, ev| st.subnets.apply(ev, |o| by_name(o, objects::subnet)),
            token.clone(),
        ));
        tasks.spawn(watch::run(
            Watched {
                api: Api::<LeanNode>::all(self.client.clone()),
                scope: Scope::Selected(format!("metadata.name={}", self.sink.node)),
                source: "nodes",
            },
            self.sink.clone(),
            |st, ev| st.node.apply(ev, convert_node),
            token.clone(),
        ));
        tasks.spawn(watch::run(
            Watched {
                api: Api::<ConfigMap>::namespaced(self.client.clone(), &self.cilium_namespace),
                scope: Scope::Selected(format!("metadata.name={CILIUM_CONFIG}")),
                source: "cilium-config",
            },
            self.sink.clone(),
            |st, ev| st.cilium_config.apply(ev, convert_cilium_config),
            token.clone(),
        ));
    }

    /// What is read beside the watches: kubelet's sandbox refusals, and (when
    /// fed the findings) the Services and kube-ovn records behind them.
    fn spawn_records(&mut self, tasks: &TaskTracker, token: &CancellationToken) {
        let (client, token) = (&self.client, token.clone());
        if let Some(findings) = self.findings.take() {
            let services = services::Lookups(client.clone(), self.sink.clone());
            tasks.spawn(follow::run(services, findings.clone(), token.clone()));
            let ranges = ranges::Lookups {
                client: client.clone(),
                sink: self.sink.clone(),
                keys: self.keys.clone(),
                spread: self.owner_lookup_spread,
            };
            tasks.spawn(follow::run(ranges, findings.clone(), token.clone()));
            tasks.spawn(self.ip_pools_once_calico_runs(findings.clone(), token.clone()));
            let confirmations = confirm::Confirmations {
                api: Api::all(client.clone()),
                sink: self.sink.clone(),
            };
            tasks.spawn(follow::run(confirmations, findings, token.clone()));
        }
        let refusals = sandbox::Refusals(client.clone(), self.sink.clone());
        // Read on the clock alone: no input to follow.
        tasks.spawn(follow::run(refusals, channel::channel(()).1, token));
    }

    /// Watches Calico's IPPools from the first reconcile that finds Calico on
    /// this node ([`crate::cni::calico::runs_here`]), until `token` is
    /// cancelled: on a cluster without Calico no agent asks for a resource
    /// that is not there.
    fn ip_pools_once_calico_runs(
        &self,
        mut published: channel::Receiver<Published>,
        token: CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let api = Api::<LeanIpPool>::all(self.client.clone());
        let sink = self.sink.clone();
        async move {
            let seen = tokio::select! {
                () = token.cancelled() => return,
                seen = published.wait_for(|p| p.calico) => seen.is_ok(),
            };
            if !seen {
                return;
            }
            let apply =
                |st: &mut State, ev| st.ip_pools.apply(ev, |o| by_name(o, objects::ip_pool));
            let pools = Watched {
                api,
                scope: Scope::Cluster,
                source: "ippools",
            };
            watch::run(pools, sink, apply, token).await;
        }
    }
}
