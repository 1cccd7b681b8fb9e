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

use super::{
    Sink,
    convert::{convert_node, convert_pod},
    follow::{Lookup, Pace},
    lean::LeanNode,
    listed,
};
use crate::{
    inventory::{NodeFacts, Pod},
    report::Published,
};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Pod as K8sPod;
use kube::{Client, Resource as _};

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

/// The range lookups of one node: one key, the ranges wanted, asked about
/// again when they change.
pub(super) struct Lookups {
    pub(super) client: Client,
    pub(super) sink: Sink,
    pub(super) keys: Arc<Vec<String>>,
    /// The first round at a random point of it.
    pub(super) spread: Duration,
}

impl Lookup for Lookups {
    type Input = Published;
    type Key = Arc<Vec<IpNet>>;
    type Answer = RangeOwners;
    type Error = kube::runtime::watcher::Error;
    const ASKING: &'static str =
        "listing Nodes to find who owns the range this node's bridge still routes";
    const MEANWHILE: &'static str = "the stale bridge stays unreported until it works";

    fn pace(&self) -> Pace {
        Pace::AllKeys {
            refresh: REFRESH,
            gap: MIN_GAP,
            quiet_doublings: QUIET_DOUBLINGS,
            failure_doublings: FAILURE_DOUBLINGS,
            spread: self.spread,
        }
    }

    fn wanted(&mut self, input: &Published) -> Vec<Self::Key> {
        if input.foreign_ranges.is_empty() {
            self.sink.set(|st| &mut st.range_owners, Arc::default());
            return Vec::new();
        }
        vec![Arc::clone(&input.foreign_ranges)]
    }

    async fn ask(&self, wanted: &Self::Key, _: &[Self::Key]) -> Result<RangeOwners, Self::Error> {
        owners(&self.client, &self.sink.node, &self.keys, wanted).await
    }

    /// Publishes `found`; a reconcile when it changed.
    fn store(&mut self, _: &Self::Key, found: RangeOwners) -> bool {
        if !found.ranges.is_empty() {
            tracing::info!(
                ranges = ?found.ranges,
                owners = ?found.nodes.iter().map(|n| &n.name).collect::<Vec<_>>(),
                "a bridge routes a range outside this node's podCIDRs: looked up its owner"
            );
        }
        let owned = !found.nodes.is_empty();
        self.sink.set(|st| &mut st.range_owners, Arc::new(found));
        owned
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
    let overlapping = listed::list(client, &LeanNode::url_path(&(), None), None, |n| {
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
        let url = K8sPod::url_path(&(), None);
        let items = listed::list(client, &url, Some(&fields), |p| {
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
    fn an_owner_is_a_node_whose_range_overlaps_either_way() {
        let wanted = [net("10.244.1.0/24")];
        assert!(overlaps(&[net("10.244.1.0/24")], &wanted));
        assert!(overlaps(&[net("10.244.0.0/16")], &wanted), "wider");
        assert!(overlaps(&[net("10.244.1.128/25")], &wanted), "narrower");
        assert!(!overlaps(&[net("10.244.2.0/24")], &wanted));
        assert!(!overlaps(&[], &wanted));
    }
}
