//! The cluster listed once, as a [`ClusterState`]: every pod, Node,
//! CiliumNode and kube-ovn Subnet, kubelet's sandbox refusals and Cilium's
//! configuration for `ipshadow audit`; what one node needs for `ipshadow
//! check` ([`Scope`]). The agent keeps its state by watches instead.
//!
//! Every list is read as it arrives, item by item, into a lean type that
//! skips what is not read ([`super::cluster::list_body`]): memory holds the
//! inventory's small objects and one object in flight, never a list's body.
//! The audit's lists go in pages of [`PAGE`] as kubectl's do (`limit` and
//! `continue`; since Kubernetes 1.31 served from the watch cache). `check`'s
//! and the agent's lists ([`Read::Cache`]) come whole from the watch cache,
//! each read to a cap of items past which it stops (named in the invalid
//! objects or the log, with what it leaves unchecked).

mod calico;
mod custom;
mod plan;
pub(in crate::kube) mod refusals;
mod routes;

use std::sync::Arc;

use self::custom::custom_objects;
pub use self::routes::{Behind, routes};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod as K8sPod};
use kube::{Resource as _, api::ListParams};
use serde::de::DeserializeOwned;

use super::{
    cluster::{
        lean::{LeanCiliumNode, LeanListedNode, LeanNodeMeta, LeanPod, LeanSubnet},
        list_body::{Listed, each_item, list_request},
    },
    objects,
};
use crate::inventory::{AsRead, CiliumConfig, ClusterState, CniNode, Invalid, NodeFacts, Subnet};
use crate::report::chain::Chain;

/// Objects per list request.
pub const PAGE: u32 = 500;

/// A list the audit needs failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "listing {what} failed: {}; check that you may list them cluster-wide \
     (kubectl auth can-i list {what} -A)",
    Chain(.cause)
)]
pub struct ListError {
    /// The resource.
    pub what: &'static str,
    /// What the API server said.
    pub cause: kube::Error,
}

/// How far the lists are: (resource, objects so far, done).
pub type Progress<'a> = &'a mut (dyn FnMut(&'static str, usize, bool) + Send);

/// How a list is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// Consistent, in pages of [`PAGE`]: a one-off audit of a whole cluster.
    Pages,
    /// Whole, from the watch cache (`resourceVersion=0`): the agent, whose
    /// lookups are multiplied by the nodes with findings, never reads etcd.
    Cache,
}

/// One list to read: of what, where, how, and how many items at most.
#[derive(Clone, Copy, Debug)]
struct Ask<'a> {
    /// The resource, as errors and progress name it.
    what: &'static str,
    /// Its collection's path.
    url: &'a str,
    read: Read,
    /// A field selector.
    fields: Option<&'a str>,
    /// Ask for `PartialObjectMetadataList` (only metadata is read).
    metadata_only: bool,
    /// Items read at most from the watch cache (a [`Read::Pages`] list is
    /// read whole, a page at a time: the audit wants every object).
    most: usize,
}

impl<'a> Ask<'a> {
    fn new(what: &'static str, url: &'a str, read: Read, most: usize) -> Self {
        Self {
            what,
            url,
            read,
            fields: None,
            metadata_only: false,
            most,
        }
    }
}

/// Every page of `ask`, each item parsed as `K` and handed to `each` as it
/// comes off the wire; what the pages gave (`cut`: stopped at [`Ask::most`]).
async fn pages<K>(
    client: &kube::Client,
    ask: Ask<'_>,
    progress: Progress<'_>,
    mut each: impl FnMut(K),
) -> Result<Listed, ListError>
where
    K: DeserializeOwned + Send + 'static,
{
    let failed = |source| ListError {
        what: ask.what,
        cause: source,
    };
    let mut next: Option<String> = None;
    let mut seen = 0;
    loop {
        // A continue token (a server that pages anyway) goes without a version.
        let mut lp = match (ask.read, &next) {
            (Read::Cache, None) => ListParams::default().match_any(),
            (Read::Pages, _) | (Read::Cache, Some(_)) => ListParams::default().limit(PAGE),
        };
        if let Some(f) = ask.fields {
            lp = lp.fields(f);
        }
        if let Some(token) = &next {
            lp = lp.continue_token(token);
        }
        let most = match ask.read {
            Read::Cache => ask.most.saturating_sub(seen),
            Read::Pages => usize::MAX,
        };
        let request = list_request(ask.url, &lp, ask.metadata_only).map_err(failed)?;
        let mut listed = each_item(client, request, most, &mut each)
            .await
            .map_err(failed)?;
        seen += listed.items;
        next = listed.meta.continue_.take().filter(|c| !c.is_empty());
        listed.cut |= next.is_some() && seen >= ask.most && ask.read == Read::Cache;
        progress(ask.what, seen, next.is_none() || listed.cut);
        if listed.cut || next.is_none() {
            listed.items = seen;
            return Ok(listed);
        }
    }
}

/// The problem a list cut at `most` items leaves (logged and counted where
/// invalid objects are): `unchecked` says what.
fn cut_list(resource: &'static str, object: String, most: usize, unchecked: &str) -> Invalid {
    Invalid {
        resource,
        object,
        problem: format!("more than {most} listed; the rest were not read: {unchecked}"),
    }
}

/// Whose pods a [`cluster_state`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every pod, Node and sandbox refusal, in consistent pages: `audit`.
    Cluster,
    /// The pods of one node and its own Node, from the watch cache, and the
    /// refusals of its pods waiting for an address: `check` on that node.
    Node(&'a str),
}

/// Items read at most of one list from the watch cache, by resource: far
/// past any real node or cluster (kubelet runs 110 pods by default, 5,000
/// nodes is Kubernetes' tested scale); what bounds the work of one list.
const PODS_MOST: usize = 10_000;
/// Nodes, CiliumNodes, Subnets of a cluster.
const CLUSTER_MOST: usize = 50_000;

/// Where the cluster keeps what a list reads beside the objects themselves.
#[derive(Clone, Copy, Debug)]
pub struct ListOptions<'a> {
    /// Pod annotations with the IPs of pods not started yet.
    pub annotation_keys: &'a [String],
    /// The namespace of `cilium-config`.
    pub cilium_namespace: &'a str,
}

/// The cluster as `scope` needs it, listed once: pods (IPs of pods not started
/// yet from `annotation_keys`), Nodes, CiliumNodes, Subnets, kubelet's
/// sandbox refusals and `cilium-config` (from `cilium_namespace`). The one
/// place a [`ClusterState`] is read from the API server in one go, as read:
/// the caller asks for the Services it needs before it assembles it.
pub async fn cluster_state(
    client: &kube::Client,
    scope: Scope<'_>,
    ListOptions {
        annotation_keys,
        cilium_namespace,
    }: ListOptions<'_>,
    progress: Progress<'_>,
) -> Result<ClusterState<AsRead>, ListError> {
    let (read, pod_fields) = match scope {
        Scope::Cluster => (Read::Pages, None),
        Scope::Node(node) => (Read::Cache, Some(format!("spec.nodeName={node}"))),
    };
    let mut invalid: Vec<Invalid> = Vec::new();
    let pods = pods(
        client,
        read,
        pod_fields,
        annotation_keys,
        progress,
        &mut invalid,
    )
    .await?;
    let (cilium_nodes, subnets) = crds(client, read, progress, &mut invalid).await?;
    let (annotated, facts) = nodes(
        client,
        scope,
        cilium_nodes.is_empty(),
        progress,
        &mut invalid,
    )
    .await?;
    let sandbox = refusals::refusals(client, scope, &pods, progress, &mut invalid).await?;
    let config = cilium_config(client, cilium_namespace, &mut invalid).await?;
    let calico = calico::ipam(client, scope, progress, &mut invalid).await;
    let (plan, plan_unlisted) = plan::plan(client, scope, progress, &mut invalid).await;
    Ok(ClusterState {
        pods: Arc::new(pods),
        cilium_nodes: Arc::new(cilium_nodes),
        annotated_nodes: Arc::new(annotated),
        subnets: Arc::new(subnets),
        nodes: Arc::new(facts),
        sandbox: Arc::new(sandbox),
        cilium_config: config,
        calico,
        plan: Arc::new(plan),
        plan_unlisted: Arc::new(plan_unlisted),
        invalid: Arc::new(invalid),
        // Asked for afterwards, only for the local addresses that shadow a pod.
        ..ClusterState::default()
    })
}

/// The pods of `read` (those on `fields` where it names a node), their IPs
/// before they start from `annotation_keys`; a cut list named in `invalid`.
async fn pods(
    client: &kube::Client,
    read: Read,
    pod_fields: Option<String>,
    annotation_keys: &[String],
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
) -> Result<Vec<crate::inventory::Pod>, ListError> {
    let mut pods = Vec::new();
    let url = K8sPod::url_path(&(), None);
    let ask = Ask {
        fields: pod_fields.as_deref(),
        ..Ask::new("pods", &url, read, PODS_MOST)
    };
    let listed = pages(client, ask, progress, |p: LeanPod| {
        pods.push(objects::pod(&p.0, annotation_keys, invalid));
    })
    .await?;
    if listed.cut {
        let on = pod_fields.unwrap_or_default();
        invalid.push(cut_list(
            "pods",
            on,
            PODS_MOST,
            "their collisions are not checked",
        ));
    }
    Ok(pods)
}

/// Every CiliumNode and kube-ovn Subnet (an absent CRD: none).
async fn crds(
    client: &kube::Client,
    read: Read,
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
) -> Result<(Vec<CniNode>, Vec<Subnet>), ListError> {
    let cilium_nodes = custom_objects::<LeanCiliumNode, _>(
        client,
        ("cilium.io", "v2", "CiliumNode", "ciliumnodes"),
        (read, CLUSTER_MOST),
        progress,
        invalid,
        objects::cilium_node,
    )
    .await?;
    let subnets = custom_objects::<LeanSubnet, _>(
        client,
        ("kubeovn.io", "v1", "Subnet", "subnets"),
        (read, CLUSTER_MOST),
        progress,
        invalid,
        objects::subnet,
    )
    .await?;
    Ok((cilium_nodes, subnets))
}

/// Cilium's addresses in Node annotations and the Nodes' facts: every Node
/// for the audit; for one node its own Node, and the others' annotations
/// (metadata only) only where no CiliumNode exists (as the agent watches them).
async fn nodes(
    client: &kube::Client,
    scope: Scope<'_>,
    no_cilium_nodes: bool,
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
) -> Result<(Vec<CniNode>, Vec<NodeFacts>), ListError> {
    let (mut annotated, mut facts) = (Vec::new(), Vec::new());
    let url = Node::url_path(&(), None);
    let (read, fields) = match scope {
        Scope::Cluster => (Read::Pages, None),
        Scope::Node(node) => (Read::Cache, Some(format!("metadata.name={node}"))),
    };
    let ask = Ask {
        fields: fields.as_deref(),
        ..Ask::new("nodes", &url, read, CLUSTER_MOST)
    };
    pages(client, ask, progress, |lean: LeanListedNode| {
        let n = &lean.node;
        let name = n.metadata.name.clone().unwrap_or_default();
        let annotations = n.metadata.annotations.clone().unwrap_or_default();
        annotated.extend(objects::node_annotations(&name, &annotations, invalid));
        let mut node = objects::with_addresses(objects::node_facts(n, invalid), n, invalid);
        node.calico_annotated |= lean.calico_annotated;
        facts.push(node);
    })
    .await?;
    if let Scope::Node(node) = scope
        && no_cilium_nodes
    {
        let ask = Ask {
            metadata_only: true,
            ..Ask::new("nodes", &url, Read::Cache, CLUSTER_MOST)
        };
        let listed = pages(client, ask, progress, |n: LeanNodeMeta| {
            let name = n.metadata.name.clone().unwrap_or_default();
            if name == node {
                return;
            }
            let annotations = n.metadata.annotations.unwrap_or_default();
            annotated.extend(objects::node_annotations(&name, &annotations, invalid));
        })
        .await?;
        if listed.cut {
            let unchecked =
                "Cilium's addresses in the other Nodes' annotations are not all checked";
            invalid.push(cut_list(
                "nodes",
                "(all)".to_owned(),
                CLUSTER_MOST,
                unchecked,
            ));
        }
    }
    Ok((annotated, facts))
}

/// Cilium's configuration, listed by name (what the agent's RBAC allows).
async fn cilium_config(
    client: &kube::Client,
    namespace: &str,
    invalid: &mut Vec<Invalid>,
) -> Result<Option<Arc<CiliumConfig>>, ListError> {
    let url = ConfigMap::url_path(&(), Some(namespace));
    let ask = Ask {
        fields: Some("metadata.name=cilium-config"),
        ..Ask::new("configmaps", &url, Read::Cache, 1)
    };
    let mut config = None;
    pages(client, ask, &mut |_, _, _| {}, |cm: ConfigMap| {
        let data = cm.data.unwrap_or_default();
        config = Some(Arc::new(objects::cilium_config(&data, invalid)));
    })
    .await?;
    Ok(config)
}
