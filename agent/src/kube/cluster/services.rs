//! Which Service claims a local address of this node that one of its pods'
//! IPs equals: asked only for such findings, never watched.
//!
//! kube-proxy in IPVS mode binds every Service's cluster, external and
//! load-balancer IPs on every node, kube-vip its VIPs on the uplink; any user
//! who may create a Service chooses its external IPs. A local address a
//! Service claims is fixed by removing it there, and the agent never evicts the
//! pod it shadows (a tenant could point at any pod, a system pod too).
//! Services have no field selector for their addresses, so the agent lists
//! them from the API server's watch cache (`resourceVersion=0`) — only while it
//! has such findings, each address again after [`REFRESH`], at most one list
//! per [`MIN_GAP`] — and reads the list as it arrives, one lean Service at a
//! time: a tenant's Services with megabytes of annotations cost the agent
//! nothing but the bytes passing through.

use std::{borrow::Cow, collections::BTreeSet, net::IpAddr, sync::Arc, time::Duration};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Api, Client, runtime::watcher};
use serde::{Deserialize, Deserializer};
use tokio::{sync::watch as channel, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{OnChange, Shared, Sink, listed, lock};
use crate::kube::ttl::Cache;
use crate::report::Published;
use crate::{
    detect::{Cause, Finding, Role},
    inventory::{Covered, ServiceAddresses},
    kube::objects,
};

/// How long a lookup's answer for an address stands.
const REFRESH: Duration = Duration::from_mins(10);
/// Lists at most this often, whatever the findings do.
const MIN_GAP: Duration = Duration::from_secs(30);
/// Addresses remembered as looked up at most: a node with more shadowing
/// addresses than this lists again sooner, no worse.
const ADDRESSES: usize = 1024;

/// The local addresses of `node` that pods' IPs equal: those of its
/// local-address collisions: a collision's kind follows its owner's role (a Service already named among them, so that the
/// answer is kept while the finding stands).
pub fn local_collisions(findings: &[Finding], node: &str) -> BTreeSet<IpAddr> {
    findings
        .iter()
        .filter(|f| {
            f.owner.node == node
                && f.owner.role == Role::Local
                && matches!(f.cause, Cause::Collision { .. })
        })
        .filter_map(|f| f.ip)
        .collect()
}

/// A Service as the list hands it on: [`objects::LeanService`], and the empty
/// metadata kube's `Resource` wants (the list's reader reads none).
#[derive(Clone, Debug, Default)]
struct ListedService {
    metadata: ObjectMeta,
    service: objects::LeanService,
}

impl<'de> Deserialize<'de> for ListedService {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        objects::LeanService::deserialize(d).map(|service| Self {
            metadata: ObjectMeta::default(),
            service,
        })
    }
}

impl kube::core::Resource for ListedService {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        "Service".into()
    }
    fn group((): &()) -> Cow<'_, str> {
        "".into()
    }
    fn version((): &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural((): &()) -> Cow<'_, str> {
        "services".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The claims on `ips` of every Service, from one list of the watch cache
/// read as it arrives ([`listed::list`]): each Service parsed lean (its
/// annotations and the rest skipped unparsed) and dropped once its claims on
/// `ips` and its problem, if any, are kept. Every address of every Service is
/// read; one that cannot be read leaves the answer unknown
/// ([`ServiceAddresses::holders`]).
async fn claims(client: &Client, ips: &BTreeSet<IpAddr>) -> kube::Result<ServiceAddresses> {
    let api = Api::<ListedService>::all(client.clone());
    let read = listed::list(&api, None, |s| {
        let mut unreadable = Vec::new();
        let claims: Vec<_> = objects::service_addresses(&s.service, &mut unreadable)
            .into_iter()
            .filter(|(ip, _)| ips.contains(ip))
            .collect();
        (!claims.is_empty() || !unreadable.is_empty()).then_some((claims, unreadable))
    })
    .await
    .map_err(|e| match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        other => kube::Error::Service(Box::new(other)),
    })?;
    let mut out = ServiceAddresses {
        covered: Covered::Only(ips.clone()),
        ..ServiceAddresses::default()
    };
    for (claims, unreadable) in read {
        for (ip, a) in claims {
            out.add(ip, a);
        }
        out.unreadable.extend(unreadable);
    }
    Ok(out)
}

/// The claims on `ips` of every Service, listed once (`ipshadow check`, and
/// `audit` for the Nodes' and pods' addresses).
///
/// # Errors
/// The list failed.
pub async fn services_claiming(
    client: &Client,
    ips: &BTreeSet<IpAddr>,
) -> kube::Result<ServiceAddresses> {
    claims(client, ips).await
}

impl Lookups {
    /// The Service lookups for the addresses `findings` name, answers into `sink`.
    pub(super) fn new(client: Client, sink: Sink, findings: channel::Receiver<Published>) -> Self {
        let Sink {
            node,
            state,
            on_change,
        } = sink;
        Self {
            client,
            node,
            state,
            on_change,
            findings,
            asked: Cache::new(ADDRESSES),
            last_list: None,
            failing: false,
        }
    }
}

/// The Service lookups of one node: what was asked when, and where answers go.
pub(super) struct Lookups {
    client: Client,
    node: String,
    state: Shared,
    on_change: OnChange,
    findings: channel::Receiver<Published>,
    /// The addresses looked up, each fresh for REFRESH.
    asked: Cache<IpAddr, ()>,
    last_list: Option<Instant>,
    /// The last list failed (logged once until one works).
    failing: bool,
}

impl Lookups {
    pub(super) async fn run(mut self, token: CancellationToken) {
        loop {
            let wanted = local_collisions(&self.findings.borrow_and_update().findings, &self.node);
            self.asked.retain(|ip| wanted.contains(ip));
            let now = Instant::now();
            if self.due(&wanted, now) {
                self.list(&wanted, now).await;
            } else if wanted.is_empty() {
                self.forget();
            }
            let wake = self.wake(&wanted, now);
            tokio::select! {
                () = token.cancelled() => return,
                changed = self.findings.changed() => if changed.is_err() { return },
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Whether an address of `wanted` needs an answer and the gap allows a list.
    fn due(&self, wanted: &BTreeSet<IpAddr>, now: Instant) -> bool {
        let due = wanted.iter().any(|ip| !self.asked.fresh(ip, now));
        let gap_passed = self
            .last_list
            .is_none_or(|t| now.duration_since(t) >= MIN_GAP);
        due && gap_passed
    }

    /// Lists the Services' claims on `wanted` and keeps them.
    async fn list(&mut self, wanted: &BTreeSet<IpAddr>, now: Instant) {
        self.last_list = Some(now);
        match claims(&self.client, wanted).await {
            Ok(found) => {
                if self.failing {
                    tracing::info!("listing Services works again");
                }
                self.failing = false;
                for ip in wanted {
                    self.asked.put(*ip, (), REFRESH, false, now);
                }
                self.store(found);
            }
            Err(e) => {
                if !self.failing {
                    tracing::warn!(error = %e, "listing Services (which may claim this node's shadowing addresses) failed; those collisions stay unchecked and are not remediated; retrying");
                }
                self.failing = true;
            }
        }
    }

    /// Publishes `found`; a reconcile when it changed.
    fn store(&self, found: ServiceAddresses) {
        let changed = {
            let mut st = lock(&self.state);
            let changed = *st.services != found;
            st.services = Arc::new(found);
            changed
        };
        if changed {
            (self.on_change)();
        }
    }

    /// No such finding any more: what was read of the Services is stale.
    fn forget(&self) {
        let mut st = lock(&self.state);
        if !matches!(st.services.covered, Covered::Nothing) {
            st.services = Arc::default();
        }
    }

    /// The next answer that expires, no sooner than the gap allows.
    fn wake(&self, wanted: &BTreeSet<IpAddr>, now: Instant) -> Instant {
        wanted
            .iter()
            .map(|ip| self.asked.fresh_until(ip).unwrap_or(now))
            .min()
            .unwrap_or(now + REFRESH)
            .max(self.last_list.map_or(now, |t| t + MIN_GAP))
    }
}
