//! A small Kubernetes API server for tests and the demo: real HTTP and JSON for
//! exactly what ipshadow uses, so the real `kube` client (and its watcher's
//! request pattern) is what talks to it. No kube-apiserver can be installed here.
//!
//! Speaks: discovery (`/api`, `/apis`, group versions), list with
//! `resourceVersion` and `fieldSelector` (`=`, `==`, `!=` on any field path),
//! `watch=true` streams replaying from a resourceVersion (ADDED, MODIFIED,
//! DELETED, BOOKMARK; ERROR 410 when it is too old), get, create (409 when the
//! name exists), JSON merge patch, for pods, nodes, `cilium.io/v2` CiliumNodes,
//! `kubeovn.io/v1` Subnets (404 while their "CRD" is not installed) and
//! `events.k8s.io/v1` Events, which read back as core/v1 Events.
//!
//! Streaming lists (`sendInitialEvents=true`): every current object as ADDED,
//! then a BOOKMARK annotated `k8s.io/initial-events-end`, then live events; or,
//! playing an older or gate-off server, the 422 Invalid it answers
//! ([`crate::watch_list`]).
//!
//! Metadata only (`as=PartialObjectMetadata(List)` in Accept) as
//! kube-apiserver negotiates it ([`representation`]); lists written item by
//! item as they are sent (as kube-apiserver's streaming JSON list encoding);
//! no object larger than etcd stores ([`OBJECT_MAX`]).
//!
//! Fault injection: error bursts, slow responses, dropped watches, 410 Gone on
//! the next watches, and being down altogether (the listener closes).
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    convert::Infallible,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    http::{Method, StatusCode, Uri, header},
    response::Response,
};
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::{
    netns::NetNs,
    watch_list::{self, WatchList},
};

/// The resources the server knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Res {
    Pods,
    Nodes,
    CiliumNodes,
    Subnets,
    Events,
    ConfigMaps,
    KubeOvnIps,
    /// policy/v1 PodDisruptionBudgets, which evictions obey.
    Pdbs,
    /// discovery.k8s.io/v1 EndpointSlices.
    EndpointSlices,
    /// admissionregistration.k8s.io/v1 ValidatingWebhookConfigurations.
    ValidatingWebhooks,
    /// admissionregistration.k8s.io/v1 MutatingWebhookConfigurations.
    MutatingWebhooks,
    /// apiregistration.k8s.io/v1 APIServices.
    ApiServices,
    /// v1 Services.
    Services,
    /// crd.projectcalico.org/v1 IPAMBlocks.
    IpamBlocks,
    /// crd.projectcalico.org/v1 IPPools.
    IpPools,
    /// metallb.io/v1beta1 IPAddressPools.
    IpAddressPools,
    /// cilium.io/v2alpha1 CiliumLoadBalancerIPPools (served at v2alpha1 only,
    /// as before Cilium 1.18: a client asking v2 first gets 404).
    LbIpPools,
    /// networking.k8s.io/v1 ServiceCIDRs ("installed" as a CRD is: a cluster
    /// before 1.33 without the feature serves none).
    ServiceCidrs,
    /// k8s.cni.cncf.io/v1 NetworkAttachmentDefinitions.
    NetAttachDefs,
}

impl Res {
    fn namespaced(self) -> bool {
        matches!(
            self,
            Self::Pods
                | Self::Events
                | Self::ConfigMaps
                | Self::Pdbs
                | Self::EndpointSlices
                | Self::Services
                | Self::IpAddressPools
                | Self::NetAttachDefs
        )
    }
    fn api_version(self) -> &'static str {
        match self {
            Self::Pods | Self::Nodes | Self::ConfigMaps | Self::Services => "v1",
            Self::CiliumNodes => "cilium.io/v2",
            Self::Subnets | Self::KubeOvnIps => "kubeovn.io/v1",
            Self::Events => "events.k8s.io/v1",
            Self::Pdbs => "policy/v1",
            Self::EndpointSlices => "discovery.k8s.io/v1",
            Self::ValidatingWebhooks | Self::MutatingWebhooks => "admissionregistration.k8s.io/v1",
            Self::ApiServices => "apiregistration.k8s.io/v1",
            Self::IpamBlocks | Self::IpPools => "crd.projectcalico.org/v1",
            Self::IpAddressPools => "metallb.io/v1beta1",
            Self::LbIpPools => "cilium.io/v2alpha1",
            Self::ServiceCidrs => "networking.k8s.io/v1",
            Self::NetAttachDefs => "k8s.cni.cncf.io/v1",
        }
    }
    fn kind(self) -> &'static str {
        match self {
            Self::Pods => "Pod",
            Self::Nodes => "Node",
            Self::CiliumNodes => "CiliumNode",
            Self::Subnets => "Subnet",
            Self::Events => "Event",
            Self::ConfigMaps => "ConfigMap",
            Self::KubeOvnIps => "IP",
            Self::Pdbs => "PodDisruptionBudget",
            Self::EndpointSlices => "EndpointSlice",
            Self::ValidatingWebhooks => "ValidatingWebhookConfiguration",
            Self::MutatingWebhooks => "MutatingWebhookConfiguration",
            Self::ApiServices => "APIService",
            Self::Services => "Service",
            Self::IpamBlocks => "IPAMBlock",
            Self::IpPools => "IPPool",
            Self::IpAddressPools => "IPAddressPool",
            Self::LbIpPools => "CiliumLoadBalancerIPPool",
            Self::ServiceCidrs => "ServiceCIDR",
            Self::NetAttachDefs => "NetworkAttachmentDefinition",
        }
    }
    fn plural(self) -> &'static str {
        match self {
            Self::Pods => "pods",
            Self::Nodes => "nodes",
            Self::CiliumNodes => "ciliumnodes",
            Self::Subnets => "subnets",
            Self::Events => "events",
            Self::ConfigMaps => "configmaps",
            Self::KubeOvnIps => "ips",
            Self::Pdbs => "poddisruptionbudgets",
            Self::EndpointSlices => "endpointslices",
            Self::ValidatingWebhooks => "validatingwebhookconfigurations",
            Self::MutatingWebhooks => "mutatingwebhookconfigurations",
            Self::ApiServices => "apiservices",
            Self::Services => "services",
            Self::IpamBlocks => "ipamblocks",
            Self::IpPools => "ippools",
            Self::IpAddressPools => "ipaddresspools",
            Self::LbIpPools => "ciliumloadbalancerippools",
            Self::ServiceCidrs => "servicecidrs",
            Self::NetAttachDefs => "network-attachment-definitions",
        }
    }
    /// Custom resources exist only while their CRD is "installed".
    fn is_crd(self) -> bool {
        matches!(
            self,
            Self::CiliumNodes
                | Self::Subnets
                | Self::KubeOvnIps
                | Self::IpamBlocks
                | Self::IpPools
                | Self::IpAddressPools
                | Self::LbIpPools
                | Self::ServiceCidrs
                | Self::NetAttachDefs
        )
    }
}

#[derive(Clone, Debug)]
struct Change {
    rv: u64,
    res: Res,
    kind: &'static str,
    obj: Value,
}

/// The largest object a real API server stores: etcd's default
/// `--max-request-bytes` (1.5 MiB), which kube-apiserver's writes must fit.
pub const OBJECT_MAX: usize = 1_572_864;

/// How many changes the server remembers for watches; older resourceVersions get 410.
const HISTORY: usize = 10_000;

#[derive(Default)]
struct Store {
    rv: u64,
    uid: u64,
    objects: BTreeMap<(Res, String, String), Value>,
    history: VecDeque<Change>,
    /// Watches from a resourceVersion below this one are answered with 410 Gone.
    oldest_rv: u64,
    crds: BTreeSet<Res>,
    /// Namespaces being deleted: creating anything in them is Forbidden.
    terminating: BTreeSet<String>,
    /// Resources the client may not list (RBAC grants it no `list`).
    forbidden: BTreeSet<Res>,
}

/// What the server is told to get wrong.
#[derive(Default)]
struct Faults {
    /// The next N requests fail with this status code.
    fail: Option<(u32, u16)>,
    /// The next N requests get 429 Too Many Requests with `Retry-After: S`.
    throttle: Option<(u32, u64)>,
    /// The next N watch requests get an in-stream ERROR 410.
    gone: u32,
    /// Added before every response.
    delay: Duration,
    /// Bumped to end every open watch stream.
    drop_generation: u64,
    /// Which server it plays for streaming lists.
    watch_list: WatchList,
}

/// Counts of requests, for asserting that clients back off.
#[derive(Clone, Debug, Default)]
pub struct RequestCounts {
    pub total: u64,
    pub lists: u64,
    /// Watch requests, streaming lists and refused ones included.
    pub watches: u64,
    /// Initial states asked for by a list: lists without `continue`.
    pub list_starts: u64,
    /// Initial states asked for by a streaming list (`sendInitialEvents=true`), accepted.
    pub streaming_starts: u64,
    /// Watches answered 422 Invalid for their `sendInitialEvents` or
    /// `resourceVersionMatch` (the server playing an older or gate-off one).
    pub refused_watches: u64,
    pub gets: u64,
    pub creates: u64,
    pub patches: u64,
    pub failed_by_fault: u64,
    pub throttled: u64,
    /// Connections accepted and cut at once during a blackout.
    pub cut_connections: u64,
    /// (method, path) of every request, in order.
    pub log: Vec<(String, String)>,
    /// When each request came, its URI, and the fault status it was answered with.
    pub timeline: Vec<(std::time::Instant, String, Option<u16>)>,
    /// Lists and watches whose field selector the real API server's watch
    /// cache cannot index (it then tests every object, or every change, of the
    /// resource cluster-wide): (watch?, URI).
    pub unindexed: Vec<(bool, String)>,
    /// Lists and watches of Events, which the API server serves from etcd
    /// (their watch cache is off by default): (watch?, URI).
    pub event_reads: Vec<(bool, String)>,
    /// Lists not served from the watch cache: without `resourceVersion=0` (or
    /// a `resourceVersionMatch=NotOlderThan`), a quorum read of etcd on the
    /// kube-apiserver versions before consistent lists from the cache, and on
    /// any whose etcd lacks progress notifications. Events are in `event_reads`.
    pub uncached_lists: Vec<String>,
    /// Lists answered as PartialObjectMetadataList (metadata only): their URIs.
    pub metadata_lists: Vec<String>,
    /// TokenReviews and SubjectAccessReviews created.
    pub reviews: u64,
    /// When each TokenReview came, and the token it asked about.
    pub token_reviews: Vec<(std::time::Instant, String)>,
    /// Evictions asked for (whatever the answer).
    pub evictions: u64,
    /// Patches of a Node's status (`patches` counts Event patches).
    pub status_patches: u64,
    /// Every Event and Node status the server wrote, as the admission request
    /// (object and old object) a real API server would have checked it with;
    /// no user yet (tests/tests/admission_policy.rs).
    pub writes: Vec<crate::admission::Request>,
}

struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Faults>,
    counts: Mutex<RequestCounts>,
    changes: broadcast::Sender<Change>,
    drops: tokio::sync::watch::Sender<u64>,
    wire: Mutex<Wire>,
    reviews: Mutex<crate::reviews::Reviews>,
}

/// What the server sent, for the fleet benchmark.
#[derive(Clone, Debug, Default)]
pub struct Wire {
    /// Bytes of list bodies and watch events sent.
    pub bytes: u64,
    /// Watch events sent (each to one watcher).
    pub watch_events: u64,
    /// Watch streams open now, by resource (plural; `…-metadata` for metadata-only).
    pub open_watches: BTreeMap<String, i64>,
}

/// Counts one open watch stream until dropped.
struct OpenWatch {
    shared: Arc<Shared>,
    key: String,
}

impl OpenWatch {
    fn new(shared: &Arc<Shared>, key: String) -> Self {
        *shared
            .wire
            .lock()
            .unwrap()
            .open_watches
            .entry(key.clone())
            .or_default() += 1;
        Self {
            shared: shared.clone(),
            key,
        }
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        if let Ok(mut w) = self.shared.wire.lock() {
            *w.open_watches.entry(self.key.clone()).or_default() -= 1;
        }
    }
}

pub struct ApiServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    control: tokio::sync::mpsc::UnboundedSender<Control>,
    thread: Option<std::thread::JoinHandle<()>>,
}

enum Control {
    Down(std::sync::mpsc::Sender<()>),
    Blackout(std::sync::mpsc::Sender<()>),
    Up(std::sync::mpsc::Sender<()>),
    Stop,
}

impl ApiServer {
    /// Starts the server on 127.0.0.1 of `ns` (the test's namespace when `None`),
    /// with CiliumNodes installed and Subnets not.
    pub fn start(ns: Option<&NetNs>) -> Self {
        Self::start_on(ns, "127.0.0.1:0")
    }

    /// Like [`ApiServer::start`], on `bind` (e.g. `0.0.0.0:0` to be reached from
    /// other test namespaces over a veth).
    pub fn start_on(ns: Option<&NetNs>, bind: &'static str) -> Self {
        let (changes, _) = broadcast::channel(4096);
        let (drops, _) = tokio::sync::watch::channel(0);
        let mut store = Store::default();
        store.crds.insert(Res::CiliumNodes);
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            faults: Mutex::new(Faults::default()),
            counts: Mutex::new(RequestCounts::default()),
            changes,
            drops,
            wire: Mutex::new(Wire::default()),
            reviews: Mutex::new(crate::reviews::Reviews::default()),
        });
        let (control, mut control_rx) = tokio::sync::mpsc::unbounded_channel();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let ns_name = ns.map(|n| n.name.clone());
        let server_shared = shared.clone();
        let thread = std::thread::spawn(move || {
            // Bind inside the namespace: the listener (and every accepted socket) lives there.
            let _inside = ns_name.map(|n| crate::netns::enter_named(&n));
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
                let addr = listener.local_addr().unwrap();
                addr_tx.send(addr).unwrap();
                let serve = |l: tokio::net::TcpListener| {
                    let app = Router::new().fallback({
                        let s = server_shared.clone();
                        move |method: Method,
                              headers: axum::http::HeaderMap,
                              uri: Uri,
                              body: Bytes| {
                            // Metadata-only lists and watches ask for
                            // PartialObjectMetadata(List) in Accept ([`representation`]).
                            let accept = headers
                                .get_all(header::ACCEPT)
                                .iter()
                                .filter_map(|v| v.to_str().ok())
                                .collect::<Vec<_>>()
                                .join(",");
                            handle(s.clone(), method, uri, body, accept)
                        }
                    });
                    tokio::spawn(async move {
                        let _ = axum::serve(l, app).await;
                    })
                };
                let mut task = Some(serve(listener));
                let mut cutter: Option<tokio::task::JoinHandle<()>> = None;
                while let Some(c) = control_rx.recv().await {
                    if let Some(t) = cutter.take() {
                        t.abort();
                        let _ = t.await;
                    }
                    match c {
                        Control::Blackout(ack) => {
                            if let Some(t) = task.take() {
                                t.abort();
                                let _ = t.await;
                            }
                            server_shared.drops.send_modify(|g| *g += 1);
                            let l = tokio::net::TcpListener::bind(addr).await.unwrap();
                            let s = server_shared.clone();
                            cutter = Some(tokio::spawn(async move {
                                while let Ok((sock, _)) = l.accept().await {
                                    tokio::spawn(cut(s.clone(), sock));
                                }
                            }));
                            let _ = ack.send(());
                        }
                        Control::Down(ack) => {
                            if let Some(t) = task.take() {
                                t.abort();
                                let _ = t.await;
                            }
                            // End open watches too: a dead server's streams break.
                            server_shared.drops.send_modify(|g| *g += 1);
                            let _ = ack.send(());
                        }
                        Control::Up(ack) => {
                            if task.is_none() {
                                let l = tokio::net::TcpListener::bind(addr).await.unwrap();
                                task = Some(serve(l));
                            }
                            let _ = ack.send(());
                        }
                        Control::Stop => break,
                    }
                }
            });
        });
        let addr = addr_rx.recv().unwrap();
        Self {
            addr,
            shared,
            control,
            thread: Some(thread),
        }
    }

    /// A kubeconfig that points the `kube` client at this server, without auth.
    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        self.write_kubeconfig_via(path, &self.addr.to_string());
    }

    /// A kubeconfig reaching this server at `host_port` (another namespace's view).
    pub fn write_kubeconfig_via(&self, path: &std::path::Path, host_port: &str) {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: http://{host_port}\n\
             users:\n- name: test\n  user: {{}}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: default\n\
             current-context: test\n"
        );
        std::fs::write(path, text).unwrap();
    }

    /// [`Self::apply`] of every object of each `(resource, objects)`, in order.
    pub fn apply_all(&self, sets: &[(Res, &[Value])]) {
        for (res, items) in sets {
            for o in *items {
                self.apply(*res, o.clone());
            }
        }
    }

    /// Creates or replaces an object (as another client would), notifying watches.
    ///
    /// # Panics
    /// On an object larger than a real API server stores ([`OBJECT_MAX`]).
    pub fn apply(&self, res: Res, mut obj: Value) {
        let size = obj.to_string().len();
        assert!(
            size <= OBJECT_MAX,
            "a {size}-byte object: etcd refuses a request over {OBJECT_MAX} bytes (its default \
             --max-request-bytes), so no real API server holds it"
        );
        let mut st = self.shared.store.lock().unwrap();
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
        let key = (res, if res.namespaced() { ns } else { String::new() }, name);
        let kind = if st.objects.contains_key(&key) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        st.uid += 1;
        if obj["metadata"]["uid"].is_null() {
            obj["metadata"]["uid"] = json!(format!("uid-{}", st.uid));
        }
        store(&self.shared, &mut st, key, obj, kind);
    }

    /// kubelet's status report of Node `name` (as another client, not logged):
    /// a strategic merge patch of its `status` — its own conditions merged by
    /// `type`, every other condition kept, as kubelet's `PatchNodeStatus`
    /// writes the difference it made to the Node it read. Replacing the Node
    /// with [`Self::apply`] instead would drop the conditions other writers
    /// keep (node-problem-detector's, ipshadow's), which kubelet never does.
    ///
    /// # Panics
    /// When the Node does not exist or the patch is not a valid status patch.
    pub fn report_node_status(&self, name: &str, status: &Value) {
        let mut st = self.shared.store.lock().unwrap();
        let key = (Res::Nodes, String::new(), name.to_owned());
        let mut obj = st.objects.get(&key).cloned().unwrap();
        crate::node_status::strategic_status(&mut obj["status"], status).unwrap();
        store(&self.shared, &mut st, key, obj, "MODIFIED");
    }

    pub fn delete(&self, res: Res, namespace: &str, name: &str) {
        let mut st = self.shared.store.lock().unwrap();
        let key = (
            res,
            if res.namespaced() {
                namespace.to_owned()
            } else {
                String::new()
            },
            name.to_owned(),
        );
        if let Some(mut obj) = st.objects.remove(&key) {
            st.rv += 1;
            let rv = st.rv;
            obj["metadata"]["resourceVersion"] = json!(rv.to_string());
            record(
                &self.shared,
                &mut st,
                Change {
                    rv,
                    res,
                    kind: "DELETED",
                    obj,
                },
            );
        }
    }

    /// Marks a namespace as being deleted: the real server then answers every
    /// create in it with 403 Forbidden.
    pub fn terminate_namespace(&self, namespace: &str) {
        self.shared
            .store
            .lock()
            .unwrap()
            .terminating
            .insert(namespace.to_owned());
    }

    /// Installs or removes a custom resource's "CRD" (404 for its paths while
    /// absent); kube-ovn's Subnets and IPs come and go together, and so do
    /// Calico's IPAMBlocks and IPPools (one chart installs each pair).
    pub fn set_crd(&self, res: Res, installed: bool) {
        let mut st = self.shared.store.lock().unwrap();
        let pair = match res {
            Res::Subnets | Res::KubeOvnIps => [Res::Subnets, Res::KubeOvnIps],
            Res::IpamBlocks | Res::IpPools => [Res::IpamBlocks, Res::IpPools],
            _ => [res, res],
        };
        let all: &[Res] = &pair;
        for r in all {
            if installed {
                st.crds.insert(*r);
            } else {
                st.crds.remove(r);
            }
        }
    }

    /// Refuses to list `res` with 403 Forbidden, as RBAC does without a `list`
    /// grant on it.
    pub fn forbid_list(&self, res: Res) {
        self.shared.store.lock().unwrap().forbidden.insert(res);
    }

    /// The object `namespace/name` (namespace empty for cluster-scoped ones).
    pub fn object(&self, res: Res, namespace: &str, name: &str) -> Option<Value> {
        let st = self.shared.store.lock().unwrap();
        st.objects
            .get(&(res, namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every events.k8s.io/v1 Event object.
    pub fn event_objects(&self) -> Vec<Value> {
        let st = self.shared.store.lock().unwrap();
        st.objects
            .iter()
            .filter(|((r, _, _), _)| *r == Res::Events)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The core/v1 Events about one object, as `kubectl describe` reads them.
    pub fn core_events_for(&self, namespace: &str, name: &str) -> Vec<Value> {
        self.event_objects()
            .iter()
            .map(core_event)
            .filter(|e| {
                e["involvedObject"]["name"] == name && e["metadata"]["namespace"] == namespace
            })
            .collect()
    }

    /// Who TokenReviews and SubjectAccessReviews know: `f` edits it.
    pub fn reviews(&self, f: impl FnOnce(&mut crate::reviews::Reviews)) {
        f(&mut self.shared.reviews.lock().unwrap());
    }

    pub fn wire(&self) -> Wire {
        self.shared.wire.lock().unwrap().clone()
    }

    pub fn counts(&self) -> RequestCounts {
        self.shared.counts.lock().unwrap().clone()
    }

    /// The next `n` requests fail with `code`.
    pub fn fail_next(&self, n: u32, code: u16) {
        self.shared.faults.lock().unwrap().fail = Some((n, code));
    }

    /// The next `n` requests get 429 Too Many Requests with `Retry-After: secs`
    /// (and `details.retryAfterSeconds`), as API Priority and Fairness answers.
    pub fn throttle_next(&self, n: u32, secs: u64) {
        self.shared.faults.lock().unwrap().throttle = Some((n, secs));
    }

    /// Every response waits this long first.
    pub fn set_delay(&self, d: Duration) {
        self.shared.faults.lock().unwrap().delay = d;
    }

    /// Ends every open watch stream (the client re-watches from its last resourceVersion).
    pub fn drop_watches(&self) {
        self.shared.drops.send_modify(|g| *g += 1);
        self.shared.faults.lock().unwrap().drop_generation += 1;
    }

    /// The next `n` watches get ERROR 410 Gone, which forces a relist.
    pub fn gone_next_watches(&self, n: u32) {
        self.shared.faults.lock().unwrap().gone = n;
    }

    /// Plays a server with streaming lists on (the default), with the
    /// `WatchList` gate off, or one from before they existed.
    pub fn set_watch_list(&self, server: WatchList) {
        self.shared.faults.lock().unwrap().watch_list = server;
    }

    /// Forgets the change history: every resourceVersion seen so far becomes too old.
    pub fn compact(&self) {
        let mut st = self.shared.store.lock().unwrap();
        st.history.clear();
        st.oldest_rv = st.rv + 1;
    }

    /// Stops listening (connections are refused) until [`ApiServer::up`].
    pub fn down(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = self.control.send(Control::Down(tx));
        let _ = rx.recv_timeout(Duration::from_secs(5));
    }

    /// An API server whose backends are all gone behind its load balancer:
    /// connections are accepted and cut at once (and counted), until [`ApiServer::up`].
    pub fn blackout(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = self.control.send(Control::Blackout(tx));
        let _ = rx.recv_timeout(Duration::from_secs(5));
    }

    pub fn up(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = self.control.send(Control::Up(tx));
        let _ = rx.recv_timeout(Duration::from_secs(5));
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A blackout's answer: read the request line (to log what was asked for, as
/// "METHOD URI" with status 0), then close without a response.
async fn cut(shared: Arc<Shared>, mut sock: tokio::net::TcpStream) {
    use tokio::io::AsyncReadExt as _;
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(1), sock.read(&mut buf))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(0);
    let head = String::from_utf8_lossy(&buf[..n]);
    let request = head
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let mut c = shared.counts.lock().unwrap();
    c.cut_connections += 1;
    c.timeline
        .push((std::time::Instant::now(), request, Some(0)));
}

/// Stores `obj` under `key` at the next resourceVersion (with its apiVersion
/// and kind) and tells the watches; returns it as stored.
fn store(
    shared: &Shared,
    st: &mut Store,
    key: (Res, String, String),
    mut obj: Value,
    kind: &'static str,
) -> Value {
    st.rv += 1;
    let rv = st.rv;
    let res = key.0;
    obj["metadata"]["resourceVersion"] = json!(rv.to_string());
    // Set by the server on create and kept on every update, as the real one does.
    obj["metadata"]["creationTimestamp"] = st
        .objects
        .get(&key)
        .map(|o| o["metadata"]["creationTimestamp"].clone())
        .filter(|t| !t.is_null())
        .unwrap_or_else(|| {
            let now = jiff::Timestamp::now();
            json!(
                jiff::Timestamp::from_second(now.as_second())
                    .unwrap_or(now)
                    .to_string()
            )
        });
    obj["apiVersion"] = json!(res.api_version());
    obj["kind"] = json!(res.kind());
    st.objects.insert(key, obj.clone());
    record(
        shared,
        st,
        Change {
            rv,
            res,
            kind,
            obj: obj.clone(),
        },
    );
    obj
}

fn record(shared: &Shared, st: &mut Store, change: Change) {
    st.history.push_back(change.clone());
    while st.history.len() > HISTORY {
        if let Some(c) = st.history.pop_front() {
            st.oldest_rv = c.rv + 1;
        }
    }
    let _ = shared.changes.send(change);
}

/// The core/v1 view of an events.k8s.io/v1 Event (what the real API server serves).
fn core_event(e: &Value) -> Value {
    let count = e["series"]["count"].as_i64().unwrap_or(1);
    let last = if e["series"]["lastObservedTime"].is_null() {
        e["eventTime"].clone()
    } else {
        e["series"]["lastObservedTime"].clone()
    };
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": e["metadata"],
        "involvedObject": e["regarding"],
        "related": e["related"],
        "reason": e["reason"],
        "message": e["note"],
        "type": e["type"],
        "action": e["action"],
        "count": count,
        "eventTime": e["eventTime"],
        "firstTimestamp": e["eventTime"],
        "lastTimestamp": last,
        "series": e["series"],
        "reportingComponent": e["reportingController"],
        "reportingInstance": e["reportingInstance"],
        "source": {"component": e["reportingController"], "host": e["reportingInstance"]},
    })
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code
    });
    json_response(
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &body,
    )
}

fn json_response(code: StatusCode, v: &Value) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(v.to_string()))
        .unwrap()
}

/// A parsed request path.
struct Target {
    res: Res,
    namespace: Option<String>,
    name: Option<String>,
    /// `/api/v1/…/events`: the core/v1 view of events.
    core_events: bool,
    /// The client asked for PartialObjectMetadata (metadata only).
    metadata_only: bool,
    /// `…/nodes/<name>/status` or `…/pods/<name>/eviction`.
    sub: Option<Sub>,
}

/// The subresources the server knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sub {
    Status,
    Eviction,
}

/// An object as PartialObjectMetadata: its metadata and nothing else.
fn partial(obj: &Value) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj["metadata"]})
}

/// Whether a request's `Accept` asks for metadata only, as kube-apiserver
/// negotiates it (`endpoints/handlers/negotiation`, `rest.go`
/// `AllowsMediaTypeTransform`, `response.go` `asPartialObjectMetadata(List)`):
/// the first media type it can serve wins — JSON (`*/*` too) whole, or with
/// `as=PartialObjectMetadata` or `as=PartialObjectMetadataList` of
/// `meta.k8s.io` v1/v1beta1 metadata only; others (protobuf, Table here) are
/// passed over. The transform is chosen before it is tried, so the one for a
/// single object on a list (or the list's on one object) is 406 Not
/// Acceptable, never a fall back to the next entry.
fn representation(accept: &str, a_list: bool) -> Result<bool, String> {
    if accept.trim().is_empty() {
        return Ok(false);
    }
    for entry in accept.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let mime = parts.next().unwrap_or_default();
        if !matches!(mime, "application/json" | "*/*" | "application/*") {
            continue;
        }
        let params: BTreeMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
        let Some(target) = params.get("as") else {
            return Ok(false);
        };
        let meta = params.get("g") == Some(&"meta.k8s.io")
            && matches!(params.get("v"), Some(&"v1" | &"v1beta1"));
        match (*target, meta, a_list) {
            ("PartialObjectMetadataList", true, true) | ("PartialObjectMetadata", true, false) => {
                return Ok(true);
            }
            ("PartialObjectMetadata", true, true) => {
                return Err(
                    "you requested PartialObjectMetadata, but the requested object is a list"
                        .to_owned(),
                );
            }
            ("PartialObjectMetadataList", true, false) => {
                return Err(
                    "you requested PartialObjectMetadataList, but the requested object is not a list"
                        .to_owned(),
                );
            }
            _ => {}
        }
    }
    Err(format!(
        "only the following media types are accepted: application/json, \
         application/json;as=PartialObjectMetadata(List);g=meta.k8s.io;v=v1 (asked: {accept})"
    ))
}

fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group_len, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => (2, rest),
        ["apis", "cilium.io", "v2" | "v2alpha1", rest @ ..]
        | ["apis", "metallb.io", "v1beta1", rest @ ..]
        | [
            "apis",
            "kubeovn.io"
            | "events.k8s.io"
            | "discovery.k8s.io"
            | "admissionregistration.k8s.io"
            | "apiregistration.k8s.io"
            | "crd.projectcalico.org"
            | "networking.k8s.io"
            | "k8s.cni.cncf.io",
            "v1",
            rest @ ..,
        ] => (3, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
        rest => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some((*n).to_owned()), None),
        ["nodes", n, "status"] => ("nodes", Some((*n).to_owned()), Some(Sub::Status)),
        ["pods", n, "eviction"] => ("pods", Some((*n).to_owned()), Some(Sub::Eviction)),
        _ => return None,
    };
    // Each kind at the version it is served at, and no other.
    let version = if group_len == 3 { parts[2] } else { "v1" };
    let res = match (parts[1], plural) {
        ("cilium.io", "ciliumloadbalancerippools") if version == "v2alpha1" => Res::LbIpPools,
        ("cilium.io", _) if version != "v2" => return None,
        ("metallb.io", "ipaddresspools") => Res::IpAddressPools,
        ("networking.k8s.io", "servicecidrs") => Res::ServiceCidrs,
        ("k8s.cni.cncf.io", "network-attachment-definitions") => Res::NetAttachDefs,
        ("v1", "pods") => Res::Pods,
        ("v1", "nodes") => Res::Nodes,
        ("v1" | "events.k8s.io", "events") => Res::Events,
        ("v1", "configmaps") => Res::ConfigMaps,
        ("v1", "services") => Res::Services,
        ("cilium.io", "ciliumnodes") => Res::CiliumNodes,
        ("kubeovn.io", "subnets") => Res::Subnets,
        ("kubeovn.io", "ips") => Res::KubeOvnIps,
        ("discovery.k8s.io", "endpointslices") => Res::EndpointSlices,
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            Res::ValidatingWebhooks
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => Res::MutatingWebhooks,
        ("apiregistration.k8s.io", "apiservices") => Res::ApiServices,
        ("crd.projectcalico.org", "ipamblocks") => Res::IpamBlocks,
        ("crd.projectcalico.org", "ippools") => Res::IpPools,
        _ => return None,
    };
    Some(Target {
        res,
        namespace,
        name,
        core_events: group_len == 2 && res == Res::Events,
        metadata_only: false,
        sub,
    })
}

fn query(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => out.push(b),
                    Err(_) => out.extend_from_slice(&bytes[i..i + 3]),
                }
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The field labels the real API server accepts per resource (the
/// conversion functions of pkg/apis/core/v1; custom resources: metadata only).
fn field_label_supported(res: Res, label: &str) -> bool {
    let meta = matches!(label, "metadata.name" | "metadata.namespace");
    match res {
        Res::Pods => {
            meta || matches!(
                label,
                "spec.nodeName"
                    | "spec.restartPolicy"
                    | "spec.schedulerName"
                    | "spec.serviceAccountName"
                    | "spec.hostNetwork"
                    | "status.phase"
                    | "status.podIP"
                    | "status.podIPs"
                    | "status.nominatedNodeName"
            )
        }
        Res::Nodes => meta || label == "spec.unschedulable",
        Res::Services => meta || matches!(label, "spec.clusterIP" | "spec.type"),
        Res::CiliumNodes
        | Res::Subnets
        | Res::ConfigMaps
        | Res::KubeOvnIps
        | Res::Pdbs
        | Res::EndpointSlices
        | Res::ValidatingWebhooks
        | Res::MutatingWebhooks
        | Res::ApiServices
        | Res::IpamBlocks
        | Res::IpPools
        | Res::IpAddressPools
        | Res::LbIpPools
        | Res::ServiceCidrs
        | Res::NetAttachDefs => meta,
        Res::Events => {
            meta || matches!(
                label,
                "involvedObject.kind"
                    | "involvedObject.namespace"
                    | "involvedObject.name"
                    | "involvedObject.uid"
                    | "involvedObject.apiVersion"
                    | "involvedObject.resourceVersion"
                    | "involvedObject.fieldPath"
                    | "reason"
                    | "reportingComponent"
                    | "source"
                    | "type"
            )
        }
    }
}

/// Whether the real watch cache answers this selector without testing every
/// object of the resource: no selector (nothing to test), `metadata.name=` in
/// a namespace or of a cluster-scoped object (served as one key), or pods by
/// `spec.nodeName=` (the cache's only field index, which kubelet uses).
fn indexed(res: Res, namespaced: bool, sel: &[(String, bool, String)]) -> bool {
    let equal = |label: &str| sel.iter().any(|(k, eq, _)| k == label && *eq);
    sel.is_empty()
        || (equal("metadata.name") && (namespaced || !res.namespaced()))
        || (res == Res::Pods && equal("spec.nodeName"))
}

/// `spec.nodeName=a,status.podIP!=b` as (path, equal?, value) terms.
fn selector(s: Option<&String>) -> Vec<(String, bool, String)> {
    s.map(|s| {
        s.split(',')
            .filter(|t| !t.is_empty())
            .filter_map(|t| {
                if let Some((k, v)) = t.split_once("!=") {
                    Some((k.to_owned(), false, v.to_owned()))
                } else {
                    let (k, v) = t.split_once("==").or_else(|| t.split_once('='))?;
                    Some((k.to_owned(), true, v.to_owned()))
                }
            })
            .collect()
    })
    .unwrap_or_default()
}

fn field(obj: &Value, path: &str) -> String {
    let mut v = obj;
    for part in path.split('.') {
        v = &v[part];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn matches(obj: &Value, sel: &[(String, bool, String)]) -> bool {
    sel.iter().all(|(k, eq, v)| (field(obj, k) == *v) == *eq)
}

fn in_scope(t: &Target, obj: &Value) -> bool {
    t.namespace
        .as_deref()
        .is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
}

async fn handle(
    shared: Arc<Shared>,
    method: Method,
    uri: Uri,
    body: Bytes,
    accept: String,
) -> Response {
    let q = query(&uri);
    let watch = q.get("watch").is_some_and(|w| w == "true" || w == "1");
    let (delay, fault, throttle) = {
        let mut f = shared.faults.lock().unwrap();
        let fault = match &mut f.fail {
            Some((n, code)) if *n > 0 => {
                *n -= 1;
                Some(*code)
            }
            _ => None,
        };
        let throttle = match &mut f.throttle {
            Some((n, secs)) if *n > 0 && fault.is_none() => {
                *n -= 1;
                Some(*secs)
            }
            _ => None,
        };
        (f.delay, fault, throttle)
    };
    {
        let mut c = shared.counts.lock().unwrap();
        c.total += 1;
        c.log.push((method.to_string(), uri.to_string()));
        let answered = fault.or(throttle.map(|_| 429));
        c.timeline
            .push((std::time::Instant::now(), uri.to_string(), answered));
        if fault.is_some() {
            c.failed_by_fault += 1;
        }
        if throttle.is_some() {
            c.throttled += 1;
        }
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(code) = fault {
        return status(code, "InternalError", "injected fault");
    }
    if let Some(secs) = throttle {
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "TooManyRequests", "code": 429,
            "message": "too many requests, please try again later",
            "details": {"retryAfterSeconds": secs},
        });
        let mut r = json_response(StatusCode::TOO_MANY_REQUESTS, &body);
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        return r;
    }
    let path = uri.path();
    if method == Method::POST {
        let answer = shared.reviews.lock().unwrap().answer(path, &body);
        if let Some((code, v)) = answer {
            let mut c = shared.counts.lock().unwrap();
            c.reviews += 1;
            if path.trim_end_matches('/').ends_with("/tokenreviews")
                && let Ok(review) = serde_json::from_slice::<Value>(&body)
                && let Some(token) = review["spec"]["token"].as_str()
            {
                c.token_reviews
                    .push((std::time::Instant::now(), token.to_owned()));
            }
            drop(c);
            return json_response(
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                &v,
            );
        }
    }
    if let Some(r) = discovery(&shared, path) {
        return r;
    }
    let Some(mut t) = parse_path(path) else {
        return status(
            404,
            "NotFound",
            &format!("the server could not find the requested resource ({path})"),
        );
    };
    let a_list = method == Method::GET && t.name.is_none() && !watch;
    match representation(&accept, a_list) {
        Ok(metadata_only) => t.metadata_only = metadata_only,
        Err(refused) => return status(406, "NotAcceptable", &refused),
    }
    if t.metadata_only && a_list {
        shared
            .counts
            .lock()
            .unwrap()
            .metadata_lists
            .push(uri.to_string());
    }
    if t.res.is_crd() && !shared.store.lock().unwrap().crds.contains(&t.res) {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    let counts = || shared.counts.lock().unwrap();
    if method == Method::GET
        && t.name.is_none()
        && shared.store.lock().unwrap().forbidden.contains(&t.res)
    {
        return status(
            403,
            "Forbidden",
            &format!(
                "{} is forbidden: User \"system:serviceaccount:test:auditor\" cannot list \
                 resource \"{}\" at the cluster scope",
                t.res.plural(),
                t.res.plural()
            ),
        );
    }
    if method == Method::GET && t.name.is_none() {
        let sel = selector(q.get("fieldSelector"));
        if let Some((bad, _, _)) = sel
            .iter()
            .find(|(k, _, _)| !field_label_supported(t.res, k))
        {
            return status(
                400,
                "BadRequest",
                &format!("field label not supported: {bad} (for {})", t.res.plural()),
            );
        }
        if t.res == Res::Events {
            // Not in the watch cache at all (its default size for Events is 0):
            // every Event list or watch is a read of etcd.
            counts().event_reads.push((watch, uri.to_string()));
        } else if !indexed(t.res, t.namespace.is_some(), &sel) {
            counts().unindexed.push((watch, uri.to_string()));
        }
        let cached = q.get("resourceVersion").is_some_and(|v| v == "0")
            || q.get("resourceVersionMatch")
                .is_some_and(|m| m == "NotOlderThan");
        if !watch && !cached && t.res != Res::Events {
            counts().uncached_lists.push(uri.to_string());
        }
    }
    match (method, t.name.as_deref(), watch) {
        (Method::GET, None, true) => {
            counts().watches += 1;
            let server = shared.faults.lock().unwrap().watch_list;
            match watch_list::initial_events(&q, server) {
                Ok(initial) => {
                    if initial {
                        counts().streaming_starts += 1;
                    }
                    watch_stream(&shared, &t, &q, initial)
                }
                Err(invalid) => {
                    counts().refused_watches += 1;
                    json_response(StatusCode::UNPROCESSABLE_ENTITY, &invalid)
                }
            }
        }
        (Method::GET, None, false) => {
            let mut c = counts();
            c.lists += 1;
            if !q.contains_key("continue") {
                c.list_starts += 1;
            }
            drop(c);
            list(&shared, &t, &q)
        }
        (Method::GET, Some(name), _) => {
            counts().gets += 1;
            let st = shared.store.lock().unwrap();
            let key = (
                t.res,
                t.namespace.clone().unwrap_or_default(),
                name.to_owned(),
            );
            match st.objects.get(&key) {
                Some(o) if t.core_events => json_response(StatusCode::OK, &core_event(o)),
                Some(o) => json_response(StatusCode::OK, o),
                None => status(
                    404,
                    "NotFound",
                    &format!("{} \"{name}\" not found", t.res.plural()),
                ),
            }
        }
        (Method::POST, None, _) if t.res == Res::Events && !t.core_events => {
            counts().creates += 1;
            create_event(&shared, &t, &body)
        }
        (Method::PATCH, Some(name), _) if t.res == Res::Events && !t.core_events => {
            counts().patches += 1;
            patch_event(&shared, &t, name, &body)
        }
        (Method::POST, Some(name), _) if t.sub == Some(Sub::Eviction) => {
            counts().evictions += 1;
            evict(&shared, &t, name, &body)
        }
        (Method::PATCH, Some(name), _) if t.sub == Some(Sub::Status) => {
            counts().status_patches += 1;
            patch_node_status(&shared, name, &body)
        }
        _ => status(
            405,
            "MethodNotAllowed",
            "not supported by the test API server",
        ),
    }
}

fn discovery(shared: &Shared, path: &str) -> Option<Response> {
    let crds = shared.store.lock().unwrap().crds.clone();
    let group = |name: &str, version: &str| {
        json!({"name": name, "versions": [{"groupVersion": format!("{name}/{version}"), "version": version}],
               "preferredVersion": {"groupVersion": format!("{name}/{version}"), "version": version}})
    };
    let resources = |gv: &str, list: &[(Res, bool)]| {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources":
            list.iter().map(|(r, ns)| json!({"name": r.plural(), "singularName": "", "namespaced": ns, "kind": r.kind(),
                "verbs": ["get", "list", "watch", "create", "patch"]})).collect::<Vec<_>>()})
    };
    let v = match path.trim_end_matches('/') {
        "/version" => json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-ipshadow-test"}),
        "/api" => {
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        }
        "/apis" => {
            let mut groups = vec![group("events.k8s.io", "v1")];
            if crds.contains(&Res::CiliumNodes) {
                groups.push(group("cilium.io", "v2"));
            }
            if crds.contains(&Res::Subnets) {
                groups.push(group("kubeovn.io", "v1"));
            }
            if crds.contains(&Res::IpamBlocks) {
                groups.push(group("crd.projectcalico.org", "v1"));
            }
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        "/api/v1" => {
            let mut v = resources(
                "v1",
                &[
                    (Res::Pods, true),
                    (Res::Nodes, false),
                    (Res::Events, true),
                    (Res::ConfigMaps, true),
                    (Res::Services, true),
                ],
            );
            // The subresource the Node condition is written through.
            v["resources"].as_array_mut().unwrap().push(json!({"name": "nodes/status",
                "singularName": "", "namespaced": false, "kind": "Node", "verbs": ["get", "patch", "update"]}));
            v
        }
        "/apis/events.k8s.io/v1" => resources("events.k8s.io/v1", &[(Res::Events, true)]),
        "/apis/cilium.io/v2" if crds.contains(&Res::CiliumNodes) => {
            resources("cilium.io/v2", &[(Res::CiliumNodes, false)])
        }
        "/apis/kubeovn.io/v1" if crds.contains(&Res::Subnets) => resources(
            "kubeovn.io/v1",
            &[(Res::Subnets, false), (Res::KubeOvnIps, false)],
        ),
        "/apis/crd.projectcalico.org/v1" if crds.contains(&Res::IpamBlocks) => resources(
            "crd.projectcalico.org/v1",
            &[(Res::IpamBlocks, false), (Res::IpPools, false)],
        ),
        _ => return None,
    };
    Some(json_response(StatusCode::OK, &v))
}

fn list(shared: &Arc<Shared>, t: &Target, q: &BTreeMap<String, String>) -> Response {
    let sel = selector(q.get("fieldSelector"));
    let st = shared.store.lock().unwrap();
    let items: Vec<Value> = st
        .objects
        .iter()
        .filter(|((r, _, _), _)| *r == t.res)
        .map(|(_, o)| {
            if t.core_events {
                core_event(o)
            } else {
                o.clone()
            }
        })
        .filter(|o| in_scope(t, o) && matches(o, &sel))
        .map(|o| if t.metadata_only { partial(&o) } else { o })
        .collect();
    let (api_version, kind) = if t.metadata_only {
        ("meta.k8s.io/v1", "PartialObjectMetadataList".to_owned())
    } else if t.core_events {
        ("v1", format!("{}List", t.res.kind()))
    } else {
        (t.res.api_version(), format!("{}List", t.res.kind()))
    };
    // Pages as the real server cuts them for `limit` without `resourceVersion=0`
    // (the watch cache ignores limit for resourceVersion=0): `continue` to follow.
    let (items, next) = match q.get("limit").and_then(|l| l.parse::<usize>().ok()) {
        Some(limit) if limit > 0 && q.get("resourceVersion").is_none_or(|v| v != "0") => {
            let from: usize = q
                .get("continue")
                .and_then(|c| c.strip_prefix("offset-"))
                .and_then(|o| o.parse().ok())
                .unwrap_or(0);
            let page: Vec<Value> = items.iter().skip(from).take(limit).cloned().collect();
            let next = (from + limit < items.len()).then(|| {
                (
                    format!("offset-{}", from + limit),
                    items.len() - from - limit,
                )
            });
            (page, next)
        }
        _ => (items, None),
    };
    let mut metadata = json!({"resourceVersion": st.rv.to_string()});
    if let Some((next, remaining)) = next {
        metadata["continue"] = json!(next);
        metadata["remainingItemCount"] = json!(remaining);
    }
    drop(st);
    // Written item by item as it is sent, as kube-apiserver does since 1.33
    // (StreamingCollectionEncodingToJSON): a list of large objects is never
    // one buffer, here nor there.
    let head = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata}).to_string();
    let head = format!("{},\"items\":[", head.strip_suffix('}').unwrap_or(&head));
    let sent = shared.clone();
    let chunks = std::iter::once(head)
        .chain(items.into_iter().enumerate().map(|(i, o)| {
            let comma = if i == 0 { "" } else { "," };
            format!("{comma}{o}")
        }))
        .chain(std::iter::once("]}".to_owned()))
        .map(move |c| {
            sent.wire.lock().unwrap().bytes += c.len() as u64;
            Ok::<_, Infallible>(Bytes::from(c))
        });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap()
}

fn watch_line(kind: &str, obj: &Value) -> Bytes {
    let mut s = json!({"type": kind, "object": obj}).to_string();
    s.push('\n');
    Bytes::from(s)
}

/// A watch: from a resourceVersion, or (`initial`, a streaming list) every
/// current object as ADDED, the end BOOKMARK when bookmarks are allowed, then
/// the changes after.
fn watch_stream(
    shared: &Arc<Shared>,
    t: &Target,
    q: &BTreeMap<String, String>,
    initial: bool,
) -> Response {
    let sel = selector(q.get("fieldSelector"));
    let from: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let timeout = Duration::from_secs(
        q.get("timeoutSeconds")
            .and_then(|v| v.parse().ok())
            .unwrap_or(290),
    );
    let gone = {
        let mut f = shared.faults.lock().unwrap();
        let g = f.gone > 0;
        f.gone = f.gone.saturating_sub(1);
        g
    };
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|b| b == "true");
    let (backlog, rx, too_old) = {
        let st = shared.store.lock().unwrap();
        let rx = shared.changes.subscribe();
        let too_old = gone || (!initial && from > 0 && from < st.oldest_rv);
        let backlog: Vec<Change> = if initial {
            initial_events(&st, t.res, bookmarks)
        } else {
            st.history.iter().filter(|c| c.rv > from).cloned().collect()
        };
        (backlog, rx, too_old)
    };
    if too_old {
        let expired = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version", "reason": "Expired", "code": 410});
        let body = Body::from(watch_line("ERROR", &expired));
        return Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .unwrap();
    }
    let res = t.res;
    let ns = t.namespace.clone();
    let keep = move |c: &Change| {
        c.kind == "BOOKMARK"
            || (c.res == res
                && ns
                    .as_deref()
                    .is_none_or(|n| c.obj["metadata"]["namespace"].as_str() == Some(n))
                && matches(&c.obj, &sel))
    };
    let keep2 = keep.clone();
    let metadata_only = t.metadata_only;
    let sent = shared.clone();
    let encode = move |c: &Change| {
        let line = if metadata_only {
            watch_line(c.kind, &partial(&c.obj))
        } else {
            watch_line(c.kind, &c.obj)
        };
        let mut w = sent.wire.lock().unwrap();
        w.bytes += line.len() as u64;
        w.watch_events += 1;
        line
    };
    let open = OpenWatch::new(
        shared,
        format!(
            "{}{}",
            t.res.plural(),
            if metadata_only { "-metadata" } else { "" }
        ),
    );
    // Encoded before the answer: held lazily, the copies of 10,000 objects
    // per streaming list (JSON trees, several times their bytes) for 50
    // agents at once outgrow the bench machine.
    let first: Vec<Result<Bytes, Infallible>> = backlog
        .into_iter()
        .filter(|c| keep(c))
        .map(|c| Ok(encode(&c)))
        .collect();
    let mut drops = shared.drops.subscribe();
    drops.mark_unchanged();
    let deadline = tokio::time::Instant::now() + timeout;
    let live = futures::stream::unfold((rx, drops, open), move |(mut rx, mut drops, open)| {
        let wanted = keep2.clone();
        let encode = encode.clone();
        async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => return None,
                    _ = drops.changed() => return None,
                    c = rx.recv() => match c {
                        Ok(c) if wanted(&c) => return Some((Ok(encode(&c)), (rx, drops, open))),
                        Ok(_) => {}
                        // Lagged or closed: end the stream, the client re-watches.
                        Err(_) => return None,
                    },
                }
            }
        }
    });
    let body = Body::from_stream(futures::stream::iter(first).chain(live));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .unwrap()
}

/// A streaming list's initial events: every object of `res` as ADDED (the
/// watch's filter picks its scope), then the end BOOKMARK at the store's
/// resourceVersion when bookmarks are allowed (the real server sends none
/// otherwise).
fn initial_events(st: &Store, res: Res, bookmarks: bool) -> Vec<Change> {
    let mut events: Vec<Change> = st
        .objects
        .iter()
        .filter(|((r, _, _), _)| *r == res)
        .map(|(_, o)| Change {
            rv: st.rv,
            res,
            kind: "ADDED",
            obj: o.clone(),
        })
        .collect();
    if bookmarks {
        events.push(Change {
            rv: st.rv,
            res,
            kind: "BOOKMARK",
            obj: watch_list::end_bookmark(res.api_version(), res.kind(), st.rv),
        });
    }
    events
}

fn create_event(shared: &Shared, t: &Target, body: &[u8]) -> Response {
    let Ok(mut obj) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "body is not JSON");
    };
    let Some(name) = obj["metadata"]["name"].as_str().map(str::to_owned) else {
        return status(
            422,
            "Invalid",
            "metadata.name is required (generateName is not supported)",
        );
    };
    let ns = t.namespace.clone().unwrap_or_default();
    for required in [
        "eventTime",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        if obj[required].is_null() {
            return status(422, "Invalid", &format!("{required} is required"));
        }
    }
    if obj["note"].as_str().is_some_and(|n| n.len() > 1024) {
        return status(422, "Invalid", "note must be at most 1 kB");
    }
    let mut st = shared.store.lock().unwrap();
    if st.terminating.contains(&ns) {
        return status(
            403,
            "Forbidden",
            &format!(
                "events.events.k8s.io \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated"
            ),
        );
    }
    let key = (Res::Events, ns.clone(), name.clone());
    if st.objects.contains_key(&key) {
        return status(
            409,
            "AlreadyExists",
            &format!("events.events.k8s.io \"{name}\" already exists"),
        );
    }
    st.uid += 1;
    obj["metadata"]["namespace"] = json!(ns);
    obj["metadata"]["uid"] = json!(format!("uid-{}", st.uid));
    let admitted = crate::admission::Request::new(
        "CREATE",
        ("events.k8s.io", "v1", "events"),
        "Event",
        obj.clone(),
        Value::Null,
    );
    let obj = store(shared, &mut st, key, obj, "ADDED");
    drop(st);
    shared.counts.lock().unwrap().writes.push(admitted);
    json_response(StatusCode::CREATED, &obj)
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// An eviction as the API server's eviction subresource answers it: 404 for
/// no pod, 409 when the uid precondition does not match, 429 when a matching
/// PodDisruptionBudget allows no disruption (no Retry-After), else the pod
/// is deleted and the answer is 201.
fn evict(shared: &Shared, t: &Target, name: &str, body: &[u8]) -> Response {
    let Ok(eviction) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "body is not JSON");
    };
    let ns = t.namespace.clone().unwrap_or_default();
    let key = (Res::Pods, ns.clone(), name.to_owned());
    let mut st = shared.store.lock().unwrap();
    let Some(pod) = st.objects.get(&key).cloned() else {
        return status(404, "NotFound", &format!("pods \"{name}\" not found"));
    };
    let uid = &pod["metadata"]["uid"];
    let want = &eviction["deleteOptions"]["preconditions"]["uid"];
    if !want.is_null() && want != uid {
        return status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on Pod \"{name}\": Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
            ),
        );
    }
    let labels = &pod["metadata"]["labels"];
    let blocking = st.objects.iter().find(|((r, n, _), pdb)| {
        *r == Res::Pdbs
            && *n == ns
            && pdb["spec"]["selector"]["matchLabels"]
                .as_object()
                .is_some_and(|m| m.iter().all(|(k, v)| &labels[k] == v))
            && pdb["status"]["disruptionsAllowed"].as_i64().unwrap_or(0) < 1
    });
    if let Some(((_, _, pdb), _)) = blocking {
        let mut body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests", "code": 429,
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": format!("The disruption budget {pdb} needs 1 healthy pods and has 1 currently")}]},
        });
        body["details"]["retryAfterSeconds"] = json!(0);
        return json_response(StatusCode::TOO_MANY_REQUESTS, &body);
    }
    if let Some(mut obj) = st.objects.remove(&key) {
        st.rv += 1;
        let rv = st.rv;
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        record(
            shared,
            &mut st,
            Change {
                rv,
                res: Res::Pods,
                kind: "DELETED",
                obj,
            },
        );
    }
    json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}

/// A strategic merge patch of a Node's status: `conditions` merged by `type`
/// (with `$patch: delete`), the rest as a JSON merge patch.
fn patch_node_status(shared: &Shared, name: &str, body: &[u8]) -> Response {
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "body is not JSON");
    };
    let mut st = shared.store.lock().unwrap();
    let key = (Res::Nodes, String::new(), name.to_owned());
    let Some(mut obj) = st.objects.get(&key).cloned() else {
        return status(404, "NotFound", &format!("nodes \"{name}\" not found"));
    };
    let old = obj.clone();
    if let Err(e) = crate::node_status::strategic_status(&mut obj["status"], &patch["status"]) {
        return status(422, "Invalid", &e);
    }
    let admitted = crate::admission::Request::new(
        "UPDATE",
        ("", "v1", "nodes/status"),
        "Node",
        obj.clone(),
        old,
    );
    let obj = store(shared, &mut st, key, obj, "MODIFIED");
    drop(st);
    shared.counts.lock().unwrap().writes.push(admitted);
    json_response(StatusCode::OK, &obj)
}

/// What an events.k8s.io/v1 update may not change.
const IMMUTABLE_EVENT_FIELDS: [&str; 10] = [
    "note",
    "reason",
    "regarding",
    "related",
    "type",
    "action",
    "reportingController",
    "reportingInstance",
    "deprecatedSource",
    "eventTime",
];

fn patch_event(shared: &Shared, t: &Target, name: &str, body: &[u8]) -> Response {
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "body is not JSON");
    };
    let mut st = shared.store.lock().unwrap();
    let key = (
        Res::Events,
        t.namespace.clone().unwrap_or_default(),
        name.to_owned(),
    );
    let Some(mut obj) = st.objects.get(&key).cloned() else {
        return status(
            404,
            "NotFound",
            &format!("events.events.k8s.io \"{name}\" not found"),
        );
    };
    let old = obj.clone();
    merge(&mut obj, &patch);
    // events.k8s.io/v1 updates may change the series alone
    // (ValidateEventUpdate in pkg/apis/core/validation/events.go).
    if let Some(field) = IMMUTABLE_EVENT_FIELDS
        .iter()
        .find(|f| obj.get(**f) != old.get(**f))
    {
        return status(
            422,
            "Invalid",
            &format!(
                "Event.events.k8s.io \"{name}\" is invalid: {field}: Invalid value: field is immutable"
            ),
        );
    }
    let admitted = crate::admission::Request::new(
        "UPDATE",
        ("events.k8s.io", "v1", "events"),
        "Event",
        obj.clone(),
        old,
    );
    let obj = store(shared, &mut st, key, obj, "MODIFIED");
    drop(st);
    shared.counts.lock().unwrap().writes.push(admitted);
    json_response(StatusCode::OK, &obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_to_resources() {
        let t = parse_path("/api/v1/namespaces/ns/pods/p").unwrap();
        assert_eq!(
            (t.res, t.namespace.as_deref(), t.name.as_deref()),
            (Res::Pods, Some("ns"), Some("p"))
        );
        let t = parse_path("/apis/cilium.io/v2/ciliumnodes").unwrap();
        assert_eq!((t.res, t.namespace, t.name), (Res::CiliumNodes, None, None));
        assert!(
            parse_path("/api/v1/namespaces/ns/events")
                .unwrap()
                .core_events
        );
        assert!(
            !parse_path("/apis/events.k8s.io/v1/namespaces/ns/events")
                .unwrap()
                .core_events
        );
        assert!(parse_path("/apis/apps/v1/deployments").is_none());
    }

    #[test]
    fn field_labels_are_checked_and_only_real_indexes_count_as_indexed() {
        let sel = |s: &str| selector(Some(&s.to_owned()));
        assert!(field_label_supported(Res::Pods, "status.podIP"));
        assert!(!field_label_supported(Res::Pods, "status.hostIP"));
        assert!(!field_label_supported(
            Res::CiliumNodes,
            "spec.ipam.podCIDRs"
        ));
        assert!(field_label_supported(Res::Nodes, "metadata.name"));
        assert!(indexed(Res::Pods, false, &sel("spec.nodeName=a")));
        assert!(indexed(Res::Pods, true, &sel("metadata.name=p")));
        assert!(indexed(Res::Nodes, false, &sel("metadata.name=n")));
        assert!(indexed(Res::CiliumNodes, false, &[]));
        assert!(!indexed(Res::Pods, false, &sel("status.podIP=10.0.0.1")));
        assert!(
            !indexed(Res::Pods, false, &sel("metadata.name=p")),
            "a name across all namespaces is a scan"
        );
        assert!(!indexed(Res::Pods, false, &sel("spec.nodeName!=a")));
    }

    #[test]
    fn field_selectors_match_nested_fields() {
        let pod = json!({"spec": {"nodeName": "a"}, "status": {"podIP": "10.0.0.1"}});
        assert!(matches(
            &pod,
            &selector(Some(&"spec.nodeName=a".to_owned()))
        ));
        assert!(matches(
            &pod,
            &selector(Some(&"status.podIP==10.0.0.1,spec.nodeName!=b".to_owned()))
        ));
        assert!(!matches(
            &pod,
            &selector(Some(&"spec.nodeName=b".to_owned()))
        ));
        assert_eq!(decode("spec.nodeName%3Dnode-a"), "spec.nodeName=node-a");
    }

    #[test]
    fn accept_is_negotiated_as_kube_apiserver_does() {
        let list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        let one = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(representation("", true), Ok(false));
        assert_eq!(representation("application/json", true), Ok(false));
        assert_eq!(representation(list, true), Ok(true));
        assert_eq!(
            representation(&format!("{list},application/json"), true),
            Ok(true)
        );
        assert_eq!(representation(one, false), Ok(true));
        // The transform is chosen first, then fails: no fall back to the next entry.
        assert!(representation(&format!("{one},application/json"), true).is_err());
        assert!(representation(list, false).is_err());
        // What it cannot serve is passed over.
        let proto =
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(representation(&format!("{proto},{list}"), true), Ok(true));
        let table = "application/json;as=Table;g=meta.k8s.io;v=v1";
        assert_eq!(
            representation(&format!("{table},application/json"), true),
            Ok(false)
        );
        assert!(representation("application/vnd.kubernetes.protobuf", true).is_err());
    }

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut v = json!({"a": 1, "series": {"count": 1}, "keep": true});
        merge(&mut v, &json!({"a": null, "series": {"count": 2}}));
        assert_eq!(v, json!({"series": {"count": 2}, "keep": true}));
    }
}
