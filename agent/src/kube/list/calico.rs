//! Calico's IPAMBlocks and IPPools (`crd.projectcalico.org/v1`), listed for
//! `audit` only: cluster-wide objects, read once, never watched by the agent
//! (a watch per agent is multiplied by every node). An absent CRD is a
//! cluster without Calico's IPAM: nothing is read, nothing said.

use std::sync::Arc;

use super::{ListError, Progress, Read, Scope, custom::custom_objects};
use crate::{
    inventory::{CalicoIpam, Invalid},
    kube::{
        cluster::lean::{LeanIpPool, LeanIpamBlock},
        objects,
    },
};

/// Every IPAMBlock and IPPool for `Scope::Cluster`, in the audit's pages
/// (bounded memory: a 5,000-node cluster has thousands of blocks of up to 64
/// allocations each); nothing for one node's `check`.
///
/// Optional, as every source: a failed list (no `list` on Calico's CRDs) is
/// warned about and the rest of the audit stands.
pub(super) async fn ipam(
    client: &kube::Client,
    scope: Scope<'_>,
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
) -> Arc<CalicoIpam> {
    if scope != Scope::Cluster {
        return Arc::default();
    }
    let read = async {
        let blocks = custom_objects::<LeanIpamBlock, _>(
            client,
            ("crd.projectcalico.org", "v1", "IPAMBlock", "ipamblocks"),
            (Read::Pages, usize::MAX),
            progress,
            invalid,
            objects::ipam_block,
        )
        .await?;
        let pools = custom_objects::<LeanIpPool, _>(
            client,
            ("crd.projectcalico.org", "v1", "IPPool", "ippools"),
            (Read::Pages, usize::MAX),
            progress,
            invalid,
            objects::ip_pool,
        )
        .await?;
        Ok::<_, ListError>(Arc::new(CalicoIpam::new(blocks, pools)))
    };
    read.await.unwrap_or_else(|e| {
        tracing::warn!(
            error = %e,
            "listing Calico's IPAMBlocks and IPPools failed: tunnel addresses are not checked \
             against Calico's IPAM (`kubectl auth can-i list ipamblocks.crd.projectcalico.org`)"
        );
        Arc::default()
    })
}
