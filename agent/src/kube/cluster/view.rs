//! What the watches have seen, read for one reconcile at a time.

use std::{collections::BTreeSet, sync::Arc};

use super::{Cache, ClusterView, confirm, lock};
use crate::inventory::{CalicoIpam, ClusterState, NodeFacts, SourceStatus};

impl ClusterView {
    /// Whether this node's pods have been listed once: enough to reconcile.
    pub fn pods_listed(&self) -> bool {
        lock(&self.state).pods_here.synced
    }

    /// The current picture, for one reconcile, and this node's Node.
    pub fn snapshot(&self) -> (ClusterState, Option<NodeFacts>) {
        let mut st = lock(&self.state);
        let mut seen = BTreeSet::new();
        let mut pods = Vec::new();
        for p in st
            .pods_here
            .values()
            .chain(st.pods_at.values().flat_map(Cache::values))
            .chain(st.range_owners.pods.iter())
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
            .chain(st.ip_pools.problems())
            .chain(st.node.problems())
            .chain(st.annotated.problems())
            .chain(st.cilium_config.problems())
            .chain(st.sandbox_problems.values().flatten())
            .cloned()
            .collect();
        let node = st.node.values().find(|n| n.name == self.node).cloned();
        confirm::confirmed(&mut pods, &st.kube_ovn_ips);
        let state = ClusterState::assemble(ClusterState {
            pods: Arc::new(pods),
            cilium_nodes: st.cilium_nodes.shared(),
            annotated_nodes: st.annotated.shared(),
            subnets: st.subnets.shared(),
            nodes: Arc::new(
                node.iter()
                    .chain(st.range_owners.nodes.iter())
                    .cloned()
                    .collect(),
            ),
            sandbox: Arc::new(st.sandbox.values().flatten().cloned().collect()),
            cilium_config: st.cilium_config.values().next().cloned().map(Arc::new),
            services: Arc::clone(&st.services),
            // IPPools only: the blocks are `audit`'s and `check`'s.
            calico: Arc::new(CalicoIpam::new(
                Vec::new(),
                st.ip_pools.values().cloned().collect(),
            )),
            invalid: Arc::new(invalid),
            ..ClusterState::default()
        });
        (state, node)
    }

    /// Whether each watch's last request worked.
    /// A resource whose CRD is not installed (kube-ovn's Subnets on a Cilium
    /// cluster, Calico's IPPools on any other) is `absent`: there is nothing
    /// to read, and a source down would be an alert on every such cluster.
    pub fn status(&self) -> Vec<SourceStatus> {
        let st = lock(&self.state);
        [
            "pods",
            "ciliumnodes",
            "subnets",
            "ippools",
            "nodes",
            "node-annotations",
            "cilium-config",
            "events",
        ]
        .into_iter()
        .filter_map(|s| {
            st.up.get(s).map(|up| SourceStatus {
                source: s,
                up: *up,
                absent: st.absent.contains(s),
            })
        })
        .collect()
    }
}
