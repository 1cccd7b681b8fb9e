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
/// this many times, to 160 minutes.
const QUIET_DOUBLINGS: u32 = 4;
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
}

impl Lookups {
    pub(super) fn new(
        client: Client,
        sink: Sink,
        keys: Arc<Vec<String>>,
        published: channel::Receiver<Published>,
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
        }
    }

    pub(super) async fn run(mut self, token: CancellationToken) {
        loop {
            let wanted = Arc::clone(&self.published.borrow_and_update().foreign_ranges);
            let now = Instant::now();
            let covered = lock(&self.state).range_owners.ranges == *wanted;
            let plan = Plan {
                asked: self.asked,
                quiet: self.quiet,
                covered,
            };
            if wanted.is_empty() {
                self.quiet = 0;
                self.store(RangeOwners::default());
            } else if plan.due(now) {
                self.asked = Some(now);
                self.round(&wanted).await;
            }
            let wake = if wanted.is_empty() {
                now + REFRESH
            } else {
                Plan {
                    asked: self.asked,
                    ..plan
                }
                .wake(now)
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
    /// The answers kept are for the ranges wanted now.
    covered: bool,
}

impl Plan {
    fn refresh(self) -> Duration {
        REFRESH * 2u32.pow(self.quiet.min(QUIET_DOUBLINGS))
    }

    /// A round now: the wanted ranges changed or the answer is stale, and the
    /// last round is a gap ago.
    fn due(self, now: Instant) -> bool {
        let Some(t) = self.asked else { return true };
        now >= t + MIN_GAP && (!self.covered || now >= t + self.refresh())
    }

    /// When to look again (a change of the wanted ranges wakes sooner).
    fn wake(self, now: Instant) -> Instant {
        match self.asked {
            None => now,
            Some(t) if !self.covered => t + MIN_GAP,
            Some(t) => t + self.refresh(),
        }
    }
}

/// The Nodes other than `me` whose podCIDRs overlap `wanted`, and their pods.
async fn owners(
    client: &Client,
    me: &str,
    keys: &[String],
    wanted: &[IpNet],
) -> Result<RangeOwners, kube::runtime::watcher::Error> {
    // Only the owners are kept, each Node dropped as soon as it is read.
    let (me, ranges) = (me.to_owned(), wanted.to_vec());
    let (nodes, _) = listed::list(&Api::<LeanNode>::all(client.clone()), None, move |n| {
        convert_node(&n)
            .1
            .ok()
            .filter(|n| n.name != me && overlaps(&n.pod_cidrs, &ranges))
    })
    .await?;
    let mut pods = Vec::new();
    for n in &nodes {
        let fields = format!("spec.nodeName={}", n.name);
        let keys = keys.to_vec();
        let (items, _) = listed::list(
            &Api::<K8sPod>::all(client.clone()),
            Some(&fields),
            move |p| convert_pod(&p, &keys).1.ok(),
        )
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
    fn a_range_is_asked_again_after_the_refresh_and_less_often_while_nobody_owns_it() {
        let t = Instant::now();
        let first = Plan {
            asked: None,
            quiet: 0,
            covered: false,
        };
        assert!(first.due(t));
        let kept = Plan {
            asked: Some(t),
            covered: true,
            ..first
        };
        assert!(!kept.due(t + REFRESH - Duration::from_secs(1)));
        assert!(kept.due(t + REFRESH));
        assert_eq!(kept.wake(t), t + REFRESH);
        // New ranges wanted: asked again, but not within a minute of the last round.
        let changed = Plan {
            covered: false,
            ..kept
        };
        assert!(!changed.due(t + Duration::from_secs(30)));
        assert!(changed.due(t + MIN_GAP));
        assert_eq!(changed.wake(t), t + MIN_GAP);
        // Nobody owns it: 10, 20, 40, 80, then 160 minutes at most.
        let waits: Vec<u64> = (0..7)
            .map(|quiet| Plan { quiet, ..kept }.refresh().as_secs() / 60)
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 160, 160]);
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
