//! Cilium's addresses from every Node's annotations, read only while the
//! cluster has no CiliumNodes (see [`super::wants_annotations`]).

use std::sync::Arc;

use kube::Api;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    ClusterSource,
    cache::Cache,
    convert::convert_node_annotations,
    initial::Scope,
    lean::LeanNodeMeta,
    lock, wants_annotations,
    watch::{self, Watched},
};

impl ClusterSource {
    /// Watches every Node's annotations (metadata only) while the cluster has
    /// no CiliumNodes, and stops when they appear.
    pub(super) fn annotations_without_cilium_nodes(
        &self,
        moved: Arc<tokio::sync::Notify>,
        tasks: TaskTracker,
        token: CancellationToken,
    ) -> impl Future<Output = ()> + use<> {
        let (client, sink) = (self.client.clone(), self.sink.clone());
        async move {
            let mut running: Option<CancellationToken> = None;
            loop {
                let want = wants_annotations(&lock(&sink.state));
                match (&running, want) {
                    (None, true) => {
                        tracing::info!(
                            "no CiliumNodes: reading Cilium's addresses from every Node's annotations"
                        );
                        let stop = token.child_token();
                        tasks.spawn(watch::run(
                            Watched {
                                api: Api::<LeanNodeMeta>::all(client.clone()),
                                scope: Scope::Cluster,
                                source: "node-annotations",
                            },
                            sink.clone(),
                            |st, ev| st.annotated.apply(ev, convert_node_annotations),
                            stop.clone(),
                        ));
                        running = Some(stop);
                    }
                    (Some(stop), false) => {
                        tracing::info!(
                            "CiliumNodes present: no longer watching every Node's annotations"
                        );
                        stop.cancel();
                        running = None;
                        sink.change(|st| {
                            st.annotated = Cache::default();
                            // Not read, so no series (a stale 1 or 0 would stay).
                            st.absent.insert("node-annotations");
                            true
                        });
                    }
                    _ => {}
                }
                tokio::select! {
                    () = token.cancelled() => return,
                    () = moved.notified() => {}
                }
            }
        }
    }
}
