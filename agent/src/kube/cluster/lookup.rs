//! Which pod holds an address of this node: asked when traffic to it is seen
//! that no finding explains, never watched.
//!
//! A cluster-wide watch with `status.podIP=<ip>` is evaluated by the API server
//! against every pod change in the cluster (its watch cache indexes pods by
//! `spec.nodeName` only), and one per address on every node is ~10,000 such
//! watchers at 5,000 nodes. Instead the agent lists once, from the watch cache
//! (`resourceVersion=0`), when its eBPF observer sees host traffic to one of its
//! own addresses that no finding explains; [`PACE`] bounds how often. Each
//! pod found on another node is then followed by a watch on its name alone
//! (`metadata.name=<name>` in its namespace, which the API server serves as a
//! single key, as kubelet watches the Secrets its pods mount) until it no
//! longer holds the address.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use kube::{
    Api, Client, Resource as _,
    api::{ListParams, ResourceExt as _},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::list_body::{each_item, list_request};
use super::{
    Sink,
    convert::convert_pod,
    follow::{Lookup, Pace},
    initial::Scope,
    lean::LeanPod,
    watch::{self, Watched},
};
use crate::{inventory::Pod, report::traffic::Unexplained};

/// How often one agent asks which pod holds an address: per address, not again
/// before new traffic and a wait of a minute doubling up to 15 while nobody is
/// found (the node's own traffic to its router IP, with no pod on it, costs a
/// few lookups an hour); across addresses, 5 at once, then 5 a minute.
pub(super) const PACE: Pace = Pace::OnNews {
    first: Duration::from_mins(1),
    longest: Duration::from_mins(15),
    burst: 5,
    per_minute: 5,
};
/// Pods followed by name at most (each one a watch): several pods holding this
/// node's addresses at once is already a broken cluster.
pub(super) const MAX_FOLLOWED: usize = 32;

/// Pods read at most of one lookup: several pods on one address is already broken.
const HOLDERS_MOST: usize = 1_000;

/// The pods anywhere that hold `ip` (`status.podIP`), listed once from the API
/// server's watch cache, each read lean as it arrives.
///
/// # Errors
/// The list failed.
pub async fn pods_holding(
    client: &Client,
    ip: IpAddr,
    annotation_keys: &[String],
) -> Result<Vec<Pod>, kube::Error> {
    let params = ListParams::default()
        .fields(&format!("status.podIP={ip}"))
        .match_any();
    let request = list_request(&K8sPod::url_path(&(), None), &params, false)?;
    let mut found = Vec::new();
    let listed = each_item(client, request, HOLDERS_MOST, |p: LeanPod| {
        let p = &p.0;
        if !p.name_any().is_empty() {
            found.extend(convert_pod(p, annotation_keys).1.ok());
        }
    })
    .await?;
    if listed.cut {
        tracing::warn!(%ip, most = HOLDERS_MOST, "more pods than are read hold this address; the rest are not looked at");
    }
    Ok(found)
}

/// The lookups of which pod holds this node's addresses with unexplained
/// traffic, and the watches by name of the pods they found elsewhere.
pub(super) struct Holders {
    pub(super) client: Client,
    pub(super) sink: Sink,
    pub(super) keys: Arc<Vec<String>>,
    pub(super) tasks: TaskTracker,
    pub(super) token: CancellationToken,
    pub(super) followed: BTreeMap<Followed, CancellationToken>,
}

impl Lookup for Holders {
    type Input = Arc<Unexplained>;
    type Key = IpAddr;
    type Answer = Vec<Pod>;
    type Error = kube::Error;
    const ASKING: &'static str = "looking up which pod holds this node's address";
    const MEANWHILE: &'static str = "its traffic stays unexplained";

    fn pace(&self) -> Pace {
        PACE
    }

    /// The addresses with unexplained traffic; forgets the followed pods that
    /// went or left the address (each stopped its own watch).
    fn wanted(&mut self, input: &Arc<Unexplained>) -> Vec<IpAddr> {
        self.followed.retain(|_, stop| !stop.is_cancelled());
        input.keys().copied().collect()
    }

    /// Its traffic's count; none while a pod found on it is followed.
    fn news(&self, input: &Arc<Unexplained>, ip: &IpAddr) -> Option<u64> {
        (input.get(ip).copied()).filter(|_| !self.followed.keys().any(|f| f.ip == *ip))
    }

    async fn ask(&self, ip: &IpAddr, _: &[IpAddr]) -> kube::Result<Vec<Pod>> {
        pods_holding(&self.client, *ip, &self.keys).await
    }

    /// Follows each pod found elsewhere by name; whether there was one.
    fn store(&mut self, &ip: &IpAddr, pods: Vec<Pod>) -> bool {
        let elsewhere: Vec<Pod> = (pods.into_iter())
            .filter(|p| p.node.as_deref() != Some(self.sink.node.as_str()))
            .collect();
        tracing::info!(%ip, pods = ?elsewhere.iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect::<Vec<_>>(), "host traffic to this node's address no finding explains: looked up who holds it");
        let found = !elsewhere.is_empty();
        for p in elsewhere {
            let f = Followed {
                ip,
                namespace: p.namespace,
                name: p.name,
            };
            if self.followed.len() >= MAX_FOLLOWED || self.followed.contains_key(&f) {
                continue;
            }
            let stop = self.token.child_token();
            self.tasks.spawn(self.follow(f.clone(), stop.clone()));
            self.followed.insert(f, stop);
        }
        found
    }
}

impl Holders {
    /// Watches one pod a lookup found, by name, until it no longer holds the address.
    fn follow(&self, f: Followed, stop: CancellationToken) -> impl Future<Output = ()> + use<> {
        let k = self.keys.clone();
        let stopped = stop.clone();
        watch::run(
            Watched {
                api: Api::<K8sPod>::namespaced(self.client.clone(), &f.namespace),
                scope: Scope::Selected(format!("metadata.name={}", f.name)),
                // Its own label: a failing watch of a pod elsewhere is not this node's pods' source.
                source: "pods-elsewhere",
            },
            self.sink.clone(),
            move |st, ev| {
                // An event that raced the stop must not bring the cache back.
                if stopped.is_cancelled() {
                    return false;
                }
                let cache = st.pods_at.entry(f.clone()).or_default();
                let changed = cache.apply(ev, |p| convert_pod(p, &k));
                let holds = cache
                    .values()
                    .any(|p| p.ips.iter().any(|pip| pip.ip == f.ip));
                if cache.synced && !holds {
                    tracing::info!(ip = %f.ip, pod = %format!("{}/{}", f.namespace, f.name), "the pod found on this node's address is gone or moved");
                    stopped.cancel();
                    st.pods_at.remove(&f);
                    return true;
                }
                changed
            },
            stop,
        )
    }
}

/// A pod a lookup found holding this node's address `ip`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Followed {
    ip: IpAddr,
    namespace: String,
    name: String,
}
