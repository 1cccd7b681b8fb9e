//! Which Node owns a range this node's bridge still routes: asked only while
//! a bridge routes a range outside this node's `spec.podCIDRs`, never watched.
//!
//! A bridge CNI's `cni0` that kept its previous podCIDR's gateway captures a
//! range another node owns now (kube-router#689, antrea#1685). Naming that
//! node and the pods this host cannot reach needs other Nodes' podCIDRs, and
//! the agent watches only its own Node: a watch of every Node from every node
//! would add one event per kubelet status report per agent. So the agent lists
//! the Nodes once from the watch cache (`resourceVersion=0`, the body parsed
//! as it arrives into lean Nodes), then the owner's pods (`spec.nodeName`, an
//! index of the watch cache) — only on a node with such a bridge, each range
//! again after [`REFRESH`] (longer while nobody owns it), at most one round
//! per [`MIN_GAP`].

use std::{sync::Arc, time::Duration};

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use kube::{Api, Client};
use tokio::{sync::watch as channel, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    OnChange, Shared, Sink,
    convert::{convert_node, convert_pod},
    lean::LeanNode,
    listed, lock,
};
use crate::{
    inventory::{NodeFacts, Pod},
    report::Published,
};

/// How long an answer stands: a Node's podCIDRs change only when it re-joins.
const REFRESH: Duration = Duration::from_mins(10);
/// A range nobody owns (containerd's default `cni0`, 10.88.0.0/16, left on a
/// node of another CNI) is asked about again ever less often: the wait doubles
/// this many times, to ~21 hours.
const QUIET_DOUBLINGS: u32 = 7;
/// After a failed round the wait doubles from [`MIN_GAP`] this many times, to
/// 32 minutes: an overloaded API server is not asked every minute.
const FAILURE_DOUBLINGS: u32 = 5;
/// One round (a Node list, a pod list per owner) at most this often.
const MIN_GAP: Duration = Duration::from_mins(1);

/// The owners of the ranges asked about, and their pods.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct RangeOwners {
    /// The ranges these answers cover.
    pub(super) ranges: Vec<IpNet>,
    /// Each range's owner (a Node other than this one whose podCIDRs overlap it).
    pub(super) nodes: Vec<NodeFacts>,
    /// The owners' pods.
    pub(super) pods: Vec<Pod>,
}

/// The range lookups of one node.
pub(super) struct Lookups {
    client: Client,
    node: String,
    keys: Arc<Vec<String>>,
    state: Shared,
    on_change: OnChange,
    published: channel::Receiver<Published>,
    /// When the ranges in the state were last asked about.
    asked: Option<Instant>,
    /// The last round failed (logged once until one works).
    failing: bool,
    /// Rounds in a row that found no owner.
    quiet: u32,
    /// Rounds in a row that failed.
    failures: u32,
    /// No round before this (the start's spread).
    not_before: Instant,
}

impl Lookups {
    pub(super) fn new(
        client: Client,
        sink: Sink,
        keys: Arc<Vec<String>>,
        published: channel::Receiver<Published>,
        spread: Duration,
    ) -> Self {
        Self {
            client,
            node: sink.node,
            keys,
            state: sink.state,
            on_change: sink.on_change,
            published,
            asked: None,
            failing: false,
            quiet: 0,
            failures: 0,
            // The first round at a random point of `spread`: a rollout does not
            // make every node with such a bridge list the Nodes at once.
            not_before: Instant::now() + spread.mul_f64(fastrand::f64()),
        }
    }

    pub(super) async fn run(mut self, token: CancellationToken) {
        loop {
            let wanted = Arc::clone(&self.published.borrow_and_update().foreign_ranges);
            let now = Instant::now();
            let plan = |me: &Self| Plan {
                asked: me.asked,
                quiet: me.quiet,
                failures: me.failures,
                covered: lock(&me.state).range_owners.ranges == *wanted,
                not_before: me.not_before,
            };
            if wanted.is_empty() {
                self.quiet = 0;
                self.store(RangeOwners::default());
            } else if plan(&self).due(now) {
                self.asked = Some(now);
                tokio::select! {
                    () = token.cancelled() => return,
                    () = self.round(&wanted) => {}
                }
            }
            let wake = if wanted.is_empty() {
                now + REFRESH
            } else {
                plan(&self).wake()
            };
            tokio::select! {
                () = token.cancelled() => return,
                changed = self.published.changed() => if changed.is_err() { return },
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Looks up the owners of `wanted` and their pods, and keeps them.
    async fn round(&mut self, wanted: &[IpNet]) {
        match owners(&self.client, &self.node, &self.keys, wanted).await {
            Ok(found) => {
                if self.failing {
                    tracing::info!("looking up the owners of the bridge's ranges works again");
                }
                self.failing = false;
                self.failures = 0;
                self.quiet = if found.nodes.is_empty() {
                    self.quiet.saturating_add(1)
                } else {
                    0
                };
                tracing::info!(
                    ranges = ?wanted,
                    owners = ?found.nodes.iter().map(|n| &n.name).collect::<Vec<_>>(),
                    "a bridge routes a range outside this node's podCIDRs: looked up its owner"
                );
                self.store(found);
            }
            Err(e) => {
                if !self.failing {
                    tracing::warn!(ranges = ?wanted, error = %e, "listing Nodes to find who owns the range this node's bridge still routes failed; the stale bridge stays unreported until it works; retrying");
                }
                self.failing = true;
                self.failures = self.failures.saturating_add(1);
            }
        }
    }

    /// Publishes `found`; a reconcile when it changed.
    fn store(&self, found: RangeOwners) {
        let changed = {
            let mut st = lock(&self.state);
            let changed = *st.range_owners != found;
            if changed {
                st.range_owners = Arc::new(found);
            }
            changed
        };
        if changed {
            (self.on_change)();
        }
    }
}

/// When to ask about the wanted ranges.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// The last round.
    asked: Option<Instant>,
    /// Rounds in a row that found no owner.
    quiet: u32,
    /// Rounds in a row that failed.
    failures: u32,
    /// The answers kept are for the ranges wanted now.
    covered: bool,
    /// The first round not before this.
    not_before: Instant,
}

impl Plan {
    /// How long after the last round the next one comes.
    fn wait(self) -> Duration {
        if self.failures > 0 {
            MIN_GAP * 2u32.pow((self.failures - 1).min(FAILURE_DOUBLINGS))
        } else if !self.covered {
            MIN_GAP
        } else {
            REFRESH * 2u32.pow(self.quiet.min(QUIET_DOUBLINGS))
        }
    }

    fn due(self, now: Instant) -> bool {
        now >= self.wake()
    }

    /// When the next round is due (a change of the wanted ranges wakes sooner).
    fn wake(self) -> Instant {
        self.asked.map_or(self.not_before, |t| t + self.wait())
    }
}

/// The Nodes other than `me` whose podCIDRs overlap `wanted`, and their pods.
async fn owners(
    client: &Client,
    me: &str,
    keys: &[String],
    wanted: &[IpNet],
) -> Result<RangeOwners, kube::runtime::watcher::Error> {
    // Only the Nodes overlapping a range are kept, each dropped once read.
    let overlapping = listed::list(&Api::<LeanNode>::all(client.clone()), None, |n| {
        convert_node(&n)
            .1
            .ok()
            .filter(|n| n.name != me && overlaps(&n.pod_cidrs, wanted))
    })
    .await?;
    // One owner per range, the first listed, as the finding names it: a wide
    // range over many nodes' podCIDRs costs one pod list, not one per node.
    let mut nodes: Vec<NodeFacts> = Vec::new();
    for range in wanted {
        let first = overlapping
            .iter()
            .find(|n| overlaps(&n.pod_cidrs, std::slice::from_ref(range)));
        if let Some(n) = first.filter(|n| !nodes.iter().any(|k| k.name == n.name)) {
            nodes.push(n.clone());
        }
    }
    let mut pods = Vec::new();
    for n in &nodes {
        let fields = format!("spec.nodeName={}", n.name);
        let items = listed::list(&Api::<K8sPod>::all(client.clone()), Some(&fields), |p| {
            convert_pod(&p, keys).1.ok()
        })
        .await?;
        pods.extend(items);
    }
    Ok(RangeOwners {
        ranges: wanted.to_vec(),
        nodes,
        pods,
    })
}

fn overlaps(cidrs: &[IpNet], wanted: &[IpNet]) -> bool {
    cidrs
        .iter()
        .any(|c| wanted.iter().any(|w| c.contains(w) || w.contains(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().expect("test CIDR")
    }

    #[test]
    fn a_range_is_asked_again_after_the_refresh_and_less_often_while_nobody_owns_it_or_it_fails() {
        let t = Instant::now();
        let first = Plan {
            asked: None,
            quiet: 0,
            failures: 0,
            covered: false,
            not_before: t + Duration::from_secs(90),
        };
        assert!(!first.due(t), "the start's spread");
        assert!(first.due(t + Duration::from_secs(90)));
        let kept = Plan {
            asked: Some(t),
            covered: true,
            ..first
        };
        assert!(!kept.due(t + REFRESH - Duration::from_secs(1)));
        assert!(kept.due(t + REFRESH));
        assert_eq!(kept.wake(), t + REFRESH);
        // New ranges wanted: asked again, but not within a minute of the last round.
        let changed = Plan {
            covered: false,
            ..kept
        };
        assert!(!changed.due(t + Duration::from_secs(30)));
        assert!(changed.due(t + MIN_GAP));
        // Nobody owns it: 10, 20, 40 … minutes, to 1,280 at most.
        let quiet: Vec<u64> = (0..9)
            .map(|quiet| Plan { quiet, ..kept }.wait().as_secs() / 60)
            .collect();
        assert_eq!(quiet, [10, 20, 40, 80, 160, 320, 640, 1280, 1280]);
        // Failing: 1, 2, 4 … minutes, to 32, whatever else holds.
        let failing: Vec<u64> = (1..9)
            .map(|failures| {
                Plan {
                    failures,
                    ..changed
                }
                .wait()
                .as_secs()
                    / 60
            })
            .collect();
        assert_eq!(failing, [1, 2, 4, 8, 16, 32, 32, 32]);
    }

    #[test]
    fn an_owner_is_a_node_whose_range_overlaps_either_way() {
        let wanted = [net("10.244.1.0/24")];
        assert!(overlaps(&[net("10.244.1.0/24")], &wanted));
        assert!(overlaps(&[net("10.244.0.0/16")], &wanted), "wider");
        assert!(overlaps(&[net("10.244.1.128/25")], &wanted), "narrower");
        assert!(!overlaps(&[net("10.244.2.0/24")], &wanted));
        assert!(!overlaps(&[], &wanted));
    }
}
