//! Which pod holds an address of this node: asked when traffic to it is seen
//! that no finding explains, never watched.
//!
//! A cluster-wide watch with `status.podIP=<ip>` is evaluated by the API server
//! against every pod change in the cluster (its watch cache indexes pods by
//! `spec.nodeName` only), and one per address on every node is ~10,000 such
//! watchers at 5,000 nodes. Instead the agent lists once, from the watch cache
//! (`resourceVersion=0`), when its eBPF observer sees host traffic to one of its
//! own addresses that no finding explains; a [`Limiter`] bounds how often. Each
//! pod found on another node is then followed by a watch on its name alone
//! (`metadata.name=<name>` in its namespace, which the API server serves as a
//! single key, as kubelet watches the Secrets its pods mount) until it no
//! longer holds the address.

use std::{
    collections::BTreeMap,
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use kube::{
    Api, Client, Resource as _,
    api::{ListParams, ResourceExt as _},
};
use tokio::sync::watch as channel;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::list_body::{each_item, list_request};
use super::{ClusterSource, convert::convert_pod, lean::LeanPod, selected, watch};
use crate::{
    inventory::Pod,
    kube::pace::{Backoffs, Budget},
    report::traffic::Unexplained,
};

/// After a lookup that found nobody, the next one for the same address waits
/// this long, doubling up to [`LONGEST_WAIT`]: the node's own traffic to its
/// router IP, with no pod on it, costs a few lookups an hour.
const FIRST_WAIT: Duration = Duration::from_mins(1);
/// The longest wait between two lookups of one address.
const LONGEST_WAIT: Duration = Duration::from_mins(15);
/// Lookups one agent may make at once, across all its addresses, and then per
/// minute (one every 12 s).
const BURST: u32 = 5;
/// Pods followed by name at most (each one a watch): several pods holding this
/// node's addresses at once is already a broken cluster.
pub(super) const MAX_FOLLOWED: usize = 32;

/// How often one agent asks which pod holds an address: per address, not
/// again before new traffic and a wait that grows while nobody is found; across
/// addresses, a token bucket.
pub(super) struct Limiter {
    /// The noise count (see [`Unexplained`]) of each address at its last lookup.
    asked_at: BTreeMap<IpAddr, u64>,
    /// When each address may be looked up again.
    waits: Backoffs<IpAddr>,
    budget: Budget,
}

impl Limiter {
    pub(super) fn new() -> Self {
        Self {
            asked_at: BTreeMap::new(),
            waits: Backoffs::new(FIRST_WAIT, LONGEST_WAIT),
            budget: Budget::new(BURST, BURST),
        }
    }

    /// Whether `ip` has traffic since its last lookup and its wait has passed.
    fn wants(&self, ip: IpAddr, noise: u64, now: Instant) -> bool {
        self.asked_at.get(&ip) != Some(&noise) && self.waits.ready(&ip, now)
    }

    /// The addresses to look up now, each counted as asked. `skip`: addresses
    /// already followed.
    pub(super) fn due(
        &mut self,
        now: Instant,
        unexplained: &Unexplained,
        skip: impl Fn(IpAddr) -> bool,
    ) -> Vec<IpAddr> {
        let mut due = Vec::new();
        for (&ip, &noise) in unexplained {
            if skip(ip) || !self.wants(ip, noise, now) {
                continue;
            }
            if !self.budget.take() {
                break;
            }
            self.asked_at.insert(ip, noise);
            self.waits.asked(ip, now);
            due.push(ip);
        }
        // Addresses with no traffic left and no wait pending are forgotten.
        self.waits
            .retain(|ip, next| unexplained.contains_key(ip) || now < next);
        let waits = &self.waits;
        self.asked_at.retain(|ip, _| waits.contains(ip));
        due
    }

    /// What a lookup of `ip` found. Every lookup already made the next wait
    /// longer (nobody found, or the lookup failed); a pod starts the waits
    /// over (when that pod goes, new traffic is news soon).
    pub(super) fn answered(&mut self, ip: IpAddr, found: bool) {
        if found {
            self.waits.reset(&ip);
        }
    }

    /// When an address with traffic becomes due, if one waits.
    pub(super) fn next_due(
        &self,
        unexplained: &Unexplained,
        skip: impl Fn(IpAddr) -> bool,
    ) -> Option<Instant> {
        let per_ip = unexplained
            .iter()
            .filter(|(ip, _)| !skip(**ip))
            .filter_map(|(ip, noise)| {
                let asked_at = self.asked_at.get(ip)?;
                if asked_at == noise {
                    return None;
                }
                self.waits.next(ip)
            })
            .min();
        // Only while a lookup is refused: a token that came back is no wait.
        let token = self.budget.ready_at().filter(|_| !unexplained.is_empty());
        per_ip.into_iter().chain(token).max()
    }
}

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
        let p = p.pod();
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

impl ClusterSource {
    /// Asks which pod holds each address with unexplained traffic, as the
    /// limiter allows, and follows each pod found elsewhere by name.
    pub(super) async fn look_up(
        &self,
        mut unexplained: channel::Receiver<Arc<Unexplained>>,
        tasks: &TaskTracker,
        token: &CancellationToken,
    ) {
        let mut limiter = Limiter::new();
        let mut followed: BTreeMap<Followed, CancellationToken> = BTreeMap::new();
        let mut observer_gone = false;
        loop {
            // A followed pod that went (or left the address) stopped its own watch.
            followed.retain(|_, stop| !stop.is_cancelled());
            let noise = Arc::clone(&unexplained.borrow_and_update());
            let is_followed = |ip: IpAddr| followed.keys().any(|f| f.ip == ip);
            let due = limiter.due(Instant::now(), &noise, is_followed);
            for ip in due {
                let answer = tokio::select! {
                    () = token.cancelled() => return,
                    a = pods_holding(&self.client, ip, &self.keys) => a,
                };
                let pods = match answer {
                    Ok(pods) => pods,
                    Err(e) => {
                        tracing::warn!(%ip, error = %e, "cannot look up which pod holds this node's address; asking again later");
                        limiter.answered(ip, false);
                        continue;
                    }
                };
                let elsewhere: Vec<Pod> = pods
                    .into_iter()
                    .filter(|p| p.node.as_deref() != Some(self.node.as_str()))
                    .collect();
                tracing::info!(%ip, pods = ?elsewhere.iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect::<Vec<_>>(), "host traffic to this node's address no finding explains: looked up who holds it");
                limiter.answered(ip, !elsewhere.is_empty());
                for p in elsewhere {
                    let f = Followed {
                        ip,
                        namespace: p.namespace,
                        name: p.name,
                    };
                    if followed.len() >= MAX_FOLLOWED || followed.contains_key(&f) {
                        continue;
                    }
                    let stop = token.child_token();
                    tasks.spawn(self.follow(f.clone(), stop.clone()));
                    followed.insert(f, stop);
                }
            }
            let is_followed = |ip: IpAddr| followed.keys().any(|f| f.ip == ip);
            let wake = limiter.next_due(&noise, is_followed);
            tokio::select! {
                () = token.cancelled() => return,
                changed = unexplained.changed(), if !observer_gone => observer_gone = changed.is_err(),
                () = sleep_until(wake) => {}
            }
        }
    }

    /// Watches one pod a lookup found, by name, until it no longer holds the address.
    fn follow(&self, f: Followed, stop: CancellationToken) -> impl Future<Output = ()> + use<> {
        let k = self.keys.clone();
        let stopped = stop.clone();
        let name = f.name.clone();
        watch::run(
            Api::<K8sPod>::namespaced(self.client.clone(), &f.namespace),
            selected(&format!("metadata.name={name}")),
            // Its own label: a failing watch of a pod elsewhere is not this node's pods' source.
            "pods-elsewhere",
            self.state.clone(),
            self.on_change.clone(),
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

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 244, 4, last])
    }

    fn noise(pairs: &[(u8, u64)]) -> Unexplained {
        pairs.iter().map(|(l, n)| (ip(*l), *n)).collect()
    }

    /// The paused clock the budget reads, moved on to `t`.
    async fn at(t: Instant) -> Instant {
        let now = tokio::time::Instant::now().into_std();
        tokio::time::advance(t.saturating_duration_since(now)).await;
        t
    }

    /// How many tokens come back a minute.
    const REFILL: Duration = Duration::from_secs(12);

    #[tokio::test(start_paused = true)]
    async fn an_address_is_asked_once_per_burst_and_less_often_while_nobody_holds_it() {
        let t0 = tokio::time::Instant::now().into_std();
        let mut l = Limiter::new();
        let never = |_| false;
        assert_eq!(l.due(at(t0).await, &noise(&[(251, 1)]), never), [ip(251)]);
        l.answered(ip(251), false);
        assert!(
            l.due(at(t0).await, &noise(&[(251, 1)]), never).is_empty(),
            "no new traffic"
        );
        assert!(
            l.due(
                at(t0 + Duration::from_secs(30)).await,
                &noise(&[(251, 2)]),
                never
            )
            .is_empty(),
            "new traffic, but within the first wait"
        );
        assert_eq!(
            l.next_due(&noise(&[(251, 2)]), never),
            Some(t0 + FIRST_WAIT)
        );
        let t1 = t0 + FIRST_WAIT;
        assert_eq!(l.due(at(t1).await, &noise(&[(251, 2)]), never), [ip(251)]);
        l.answered(ip(251), false);
        // The wait doubles while nobody is found, up to its ceiling.
        assert!(
            l.due(at(t1 + FIRST_WAIT).await, &noise(&[(251, 3)]), never)
                .is_empty()
        );
        assert_eq!(
            l.due(at(t1 + FIRST_WAIT * 2).await, &noise(&[(251, 3)]), never),
            [ip(251)]
        );
        let mut t = t1 + FIRST_WAIT * 2;
        for n in 4..20 {
            l.answered(ip(251), false);
            t += LONGEST_WAIT;
            assert_eq!(
                l.due(at(t).await, &noise(&[(251, n)]), never),
                [ip(251)],
                "{n}"
            );
        }
        // Followed addresses are not asked about.
        assert!(
            l.due(at(t + LONGEST_WAIT).await, &noise(&[(251, 99)]), |_| true)
                .is_empty()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn across_addresses_a_token_bucket_bounds_the_lookups() {
        let t0 = tokio::time::Instant::now().into_std();
        let mut l = Limiter::new();
        let many: Unexplained = (1..=50).map(|i| (ip(i), 1)).collect();
        assert_eq!(l.due(at(t0).await, &many, |_| false).len(), 5, "the burst");
        assert!(l.due(at(t0).await, &many, |_| false).is_empty());
        assert_eq!(l.next_due(&many, |_| false), Some(t0 + REFILL));
        // A minute: five more, whatever the number of addresses.
        let mut got = 0;
        for i in 1..=5 {
            got += l.due(at(t0 + REFILL * i).await, &many, |_| false).len();
        }
        assert_eq!(got, 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_found_pod_resets_the_wait() {
        let t0 = tokio::time::Instant::now().into_std();
        let mut l = Limiter::new();
        for i in 0..4u32 {
            let t = t0 + LONGEST_WAIT * i;
            assert_eq!(
                l.due(at(t).await, &noise(&[(9, u64::from(i) + 1)]), |_| false),
                [ip(9)]
            );
            l.answered(ip(9), i == 3);
        }
        let t = t0 + LONGEST_WAIT * 3;
        assert!(
            l.due(
                at(t + Duration::from_secs(59)).await,
                &noise(&[(9, 10)]),
                |_| false
            )
            .is_empty()
        );
        assert_eq!(
            l.due(at(t + FIRST_WAIT).await, &noise(&[(9, 10)]), |_| false),
            [ip(9)]
        );
    }
}
