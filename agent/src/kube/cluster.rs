//! The cluster as a source: kube-runtime watchers (list + watch, no polling)
//! feeding converted caches. Watches per agent: pods on this node, all
//! CiliumNodes, kube-ovn Subnets, this node's Node, and one `status.podIP=<ip>`
//! pod watch per address of this node that a pod elsewhere could hold — a
//! number independent of the cluster's size.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Debug,
    net::IpAddr,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use futures::StreamExt as _;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, Pod as K8sPod};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
    runtime::watcher,
};
use serde::de::DeserializeOwned;

use super::{
    cache::{Cache, Converted},
    objects::{self, Invalid},
};
use crate::{
    inventory::{CiliumNode, Pod, Subnet},
    sources::{KubeState, SourceStatus},
};

/// This node as its Node object says.
#[derive(Clone, Debug, Default)]
pub struct NodeInfo {
    pub name: String,
    pub uid: String,
    /// `spec.podCIDRs` (or `spec.podCIDR`).
    pub pod_cidrs: Vec<IpNet>,
}

#[derive(Default)]
struct State {
    pods_here: Cache<Pod>,
    pods_at: BTreeMap<IpAddr, Cache<Pod>>,
    cilium_nodes: Cache<CiliumNode>,
    subnets: Cache<Subnet>,
    node: Cache<NodeInfo>,
    up: BTreeMap<&'static str, bool>,
}

type OnChange = Arc<dyn Fn() + Send + Sync>;

pub struct Cluster {
    client: Client,
    node: String,
    keys: Arc<Vec<String>>,
    state: Arc<Mutex<State>>,
    on_change: OnChange,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ip_tasks: BTreeMap<IpAddr, tokio::task::JoinHandle<()>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for t in self.tasks.iter().chain(self.ip_tasks.values()) {
            t.abort();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves consistent-enough caches: keep going.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

pub fn cilium_nodes_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cilium.io", "v2", "CiliumNode"),
        "ciliumnodes",
    )
}

pub fn subnets_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeovn.io", "v1", "Subnet"),
        "subnets",
    )
}

fn pod_key(p: &K8sPod) -> String {
    let m = &p.metadata;
    format!(
        "{}/{}/{}",
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or(""),
        m.uid.as_deref().unwrap_or("")
    )
}

fn convert_pod(p: &K8sPod, keys: &[String]) -> Converted<Pod> {
    let mut problems = Vec::new();
    let pod = objects::pod(p, keys, &mut problems);
    (pod_key(p), Ok(pod), problems)
}

fn dyn_key(o: &DynamicObject) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

/// A dynamic object as the JSON the file converters read (metadata + data).
fn as_json(o: &DynamicObject) -> serde_json::Value {
    let mut v = o.data.clone();
    if let (Some(map), Ok(meta)) = (v.as_object_mut(), serde_json::to_value(&o.metadata)) {
        map.insert("metadata".to_owned(), meta);
    }
    v
}

fn convert_cilium_node(o: &DynamicObject) -> Converted<CiliumNode> {
    let mut problems = Vec::new();
    let r = objects::cilium_node(&as_json(o), &mut problems);
    (dyn_key(o), r, problems)
}

fn convert_subnet(o: &DynamicObject) -> Converted<Subnet> {
    let mut problems = Vec::new();
    let r = objects::subnet(&as_json(o), &mut problems);
    (dyn_key(o), r, problems)
}

fn convert_node(n: &Node) -> Converted<NodeInfo> {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mut problems = Vec::new();
    let spec = n.spec.as_ref();
    let raw: Vec<String> = spec
        .and_then(|s| s.pod_cidrs.clone())
        .filter(|v| !v.is_empty())
        .or_else(|| spec.and_then(|s| s.pod_cidr.clone()).map(|c| vec![c]))
        .unwrap_or_default();
    let mut pod_cidrs = Vec::new();
    for c in raw {
        match c.parse::<IpNet>() {
            Ok(net) => pod_cidrs.push(net.trunc()),
            Err(_) => problems.push(Invalid {
                resource: "nodes",
                object: name.clone(),
                problem: format!(
                    "spec.podCIDRs entry {} is not a CIDR; ignored",
                    objects::quote(&c)
                ),
            }),
        }
    }
    let info = NodeInfo {
        name: name.clone(),
        uid: n.metadata.uid.clone().unwrap_or_default(),
        pod_cidrs,
    };
    (name, Ok(info), problems)
}

/// Whether a watcher error means "this resource does not exist here" (CRD not installed).
fn is_not_found(e: &watcher::Error) -> bool {
    let inner = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(s) => return s.code == 404,
        watcher::Error::NoResourceVersion => return false,
    };
    matches!(inner, kube::Error::Api(s) if s.code == 404)
}

/// Runs one watcher forever (kube's default backoff: 0.8 s doubling to 30 s,
/// jittered), applying its events to the shared state.
fn spawn_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    source: &'static str,
    state: Arc<Mutex<State>>,
    on_change: OnChange,
    apply: impl Fn(&mut State, watcher::Event<K>) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    tokio::spawn(async move {
        // Our own backoff rather than kube's default_backoff: the watcher yields
        // Ok(Init) before every relist attempt, which resets kube's backoff, so a
        // failing list (an absent CRD, an API outage) would retry every ~1 s forever.
        let mut stream = watcher(api, config).boxed();
        let mut backoff = Backoff::default();
        let mut failing = false;
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    let progress = !matches!(event, watcher::Event::Init);
                    {
                        let mut st = lock(&state);
                        apply(&mut st, event);
                        if progress {
                            st.up.insert(source, true);
                        }
                    }
                    if progress {
                        backoff.reset();
                        if failing {
                            tracing::info!(source, "watch recovered");
                            failing = false;
                        }
                        on_change();
                    }
                }
                Err(e) => {
                    lock(&state).up.insert(source, false);
                    let not_found = is_not_found(&e);
                    let delay = backoff.next(not_found);
                    if !failing {
                        if not_found {
                            tracing::warn!(
                                source,
                                "resource not found (CRD not installed?); retrying slowly, up to every 5 minutes"
                            );
                        } else {
                            tracing::warn!(source, error = %e, "watch failed; retrying with backoff");
                        }
                        on_change();
                    } else {
                        tracing::debug!(source, error = %e, retry_in_ms = delay.as_millis() as u64, "watch still failing");
                    }
                    failing = true;
                    // The watcher does nothing until polled again: sleeping here is the backoff.
                    tokio::time::sleep(delay).await;
                }
            }
        }
    })
}

/// Exponential backoff with jitter: 0.8 s doubling to 30 s for errors, 30 s
/// doubling to 5 minutes while the resource does not exist (a CRD not installed).
#[derive(Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    pub fn next(&mut self, not_found: bool) -> std::time::Duration {
        let (base_ms, max_ms) = if not_found {
            (30_000u64, 300_000u64)
        } else {
            (800, 30_000)
        };
        let exp = base_ms
            .saturating_mul(1u64 << self.failures.min(16))
            .min(max_ms);
        self.failures += 1;
        // ±25 % jitter, so agents on many nodes do not retry in step.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::from(d.subsec_nanos()));
        let jitter = exp / 4;
        let ms = exp - jitter + nanos % (2 * jitter + 1);
        std::time::Duration::from_millis(ms)
    }
}

impl Cluster {
    /// Starts the fixed watches. `on_change` is called after every applied event.
    pub fn start(
        client: Client,
        node: &str,
        annotation_keys: &[String],
        on_change: OnChange,
    ) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let keys = Arc::new(annotation_keys.to_vec());
        let mut tasks = Vec::new();

        let k = keys.clone();
        tasks.push(spawn_watch(
            Api::<K8sPod>::all(client.clone()),
            watcher::Config::default().fields(&format!("spec.nodeName={node}")),
            "pods",
            state.clone(),
            on_change.clone(),
            move |st, ev| st.pods_here.apply(ev, |p| convert_pod(p, &k)),
        ));
        tasks.push(spawn_watch(
            Api::<DynamicObject>::all_with(client.clone(), &cilium_nodes_resource()),
            watcher::Config::default(),
            "ciliumnodes",
            state.clone(),
            on_change.clone(),
            |st, ev| st.cilium_nodes.apply(ev, convert_cilium_node),
        ));
        tasks.push(spawn_watch(
            Api::<DynamicObject>::all_with(client.clone(), &subnets_resource()),
            watcher::Config::default(),
            "subnets",
            state.clone(),
            on_change.clone(),
            |st, ev| st.subnets.apply(ev, convert_subnet),
        ));
        tasks.push(spawn_watch(
            Api::<Node>::all(client.clone()),
            watcher::Config::default().fields(&format!("metadata.name={node}")),
            "nodes",
            state.clone(),
            on_change.clone(),
            |st, ev| st.node.apply(ev, convert_node),
        ));
        Self {
            client,
            node: node.to_owned(),
            keys,
            state,
            on_change,
            tasks,
            ip_tasks: BTreeMap::new(),
        }
    }

    /// Watches pods holding each of `ips` anywhere in the cluster (`status.podIP=<ip>`),
    /// stopping the watches of IPs no longer wanted.
    pub fn watch_ips(&mut self, ips: &BTreeSet<IpAddr>) {
        let gone: Vec<IpAddr> = self
            .ip_tasks
            .keys()
            .filter(|ip| !ips.contains(ip))
            .copied()
            .collect();
        for ip in gone {
            if let Some(t) = self.ip_tasks.remove(&ip) {
                t.abort();
            }
            lock(&self.state).pods_at.remove(&ip);
        }
        for ip in ips {
            if self.ip_tasks.contains_key(ip) {
                continue;
            }
            let ip = *ip;
            let k = self.keys.clone();
            let task = spawn_watch(
                Api::<K8sPod>::all(self.client.clone()),
                watcher::Config::default().fields(&format!("status.podIP={ip}")),
                "pods",
                self.state.clone(),
                self.on_change.clone(),
                move |st, ev| {
                    st.pods_at
                        .entry(ip)
                        .or_default()
                        .apply(ev, |p| convert_pod(p, &k))
                },
            );
            self.ip_tasks.insert(ip, task);
        }
    }

    /// How many watches are open (for the API-load figures).
    pub fn watch_count(&self) -> usize {
        self.tasks.len() + self.ip_tasks.len()
    }

    /// Whether this node's pods have been listed once: enough to reconcile. The
    /// agent does not wait for the per-address watches (with the API server away,
    /// a new one would otherwise hold up netlink detection).
    pub fn pods_listed(&self) -> bool {
        lock(&self.state).pods_here.synced
    }

    /// Whether this node's pods and every per-address watch have listed once
    /// (what a one-shot check waits for).
    pub fn synced(&self) -> bool {
        let st = lock(&self.state);
        st.pods_here.synced
            && self
                .ip_tasks
                .keys()
                .all(|ip| st.pods_at.get(ip).is_some_and(|c| c.synced))
    }

    /// Whether every fixed watch has listed once or failed (e.g. a CRD that is absent).
    pub fn settled(&self) -> bool {
        let st = lock(&self.state);
        let done = |c: bool, s: &str| c || st.up.get(s) == Some(&false);
        done(st.pods_here.synced, "pods")
            && done(st.cilium_nodes.synced, "ciliumnodes")
            && done(st.subnets.synced, "subnets")
            && done(st.node.synced, "nodes")
    }

    /// The current picture, for one reconcile.
    pub fn snapshot(&self) -> (KubeState, Option<NodeInfo>) {
        let mut st = lock(&self.state);
        let mut seen = BTreeSet::new();
        let mut pods = Vec::new();
        for p in st
            .pods_here
            .values()
            .chain(st.pods_at.values().flat_map(Cache::values))
        {
            if seen.insert((p.namespace.clone(), p.name.clone(), p.uid.clone())) {
                pods.push(p.clone());
            }
        }
        let invalid = st
            .pods_here
            .problems()
            .chain(st.pods_at.values().flat_map(Cache::problems))
            .chain(st.cilium_nodes.problems())
            .chain(st.subnets.problems())
            .chain(st.node.problems())
            .cloned()
            .collect();
        let node = st.node.values().find(|n| n.name == self.node).cloned();
        let state = KubeState {
            pods: Arc::new(pods),
            cilium_nodes: st.cilium_nodes.shared(),
            subnets: st.subnets.shared(),
            node_pod_cidrs: node
                .as_ref()
                .map(|n| n.pod_cidrs.clone())
                .unwrap_or_default(),
            invalid,
        };
        (state, node)
    }

    pub fn status(&self) -> Vec<SourceStatus> {
        let st = lock(&self.state);
        ["pods", "ciliumnodes", "subnets", "nodes"]
            .into_iter()
            .filter_map(|s| st.up.get(s).map(|up| SourceStatus { source: s, up: *up }))
            .collect()
    }
}
