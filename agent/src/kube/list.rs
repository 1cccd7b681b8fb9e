//! The cluster listed once, as a [`ClusterState`]: every pod, Node,
//! CiliumNode and kube-ovn Subnet, kubelet's sandbox refusals and Cilium's
//! configuration for `ipshadow audit`; what one node needs for `ipshadow
//! check` ([`Scope`]). The agent keeps its state by watches instead.
//!
//! The audit's lists go in pages of [`PAGE`] as kubectl's do (`limit` and
//! `continue`; since Kubernetes 1.31 served from the watch cache), each page
//! converted before the next is asked for: memory holds the inventory's small
//! objects, never a cluster's worth of JSON. The agent's impact lookups
//! ([`routes`] with [`Read::Cache`]) read the watch cache whole instead.

mod calico;
mod custom;

use std::sync::Arc;

use self::custom::{Gvk, custom, custom_objects};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod as K8sPod};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, ListParams, ObjectList},
};

use super::objects;
use crate::inventory::{
    CiliumConfig, CiliumNode, ClusterReads, ClusterState, Invalid, NodeFacts, Pod, Routes,
    SandboxFailure, Subnet,
};

/// Objects per list request.
pub const PAGE: u32 = 500;

/// A list the audit needs failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "listing {what} failed: {source}; check that you may list them cluster-wide \
     (kubectl auth can-i list {what} -A)"
)]
pub struct ListError {
    /// The resource.
    pub what: &'static str,
    /// What the API server said.
    #[source]
    pub source: kube::Error,
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

/// Every page of `api` (filtered by `fields`), each handed to `each` as it comes.
async fn pages<K>(
    api: &Api<K>,
    (what, read): (&'static str, Read),
    fields: Option<&str>,
    progress: Progress<'_>,
    mut each: impl FnMut(K),
) -> Result<usize, ListError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut next: Option<String> = None;
    let mut seen = 0;
    loop {
        // A continue token (a server that pages anyway) goes without a version.
        let mut lp = match (read, &next) {
            (Read::Cache, None) => ListParams::default().match_any(),
            (Read::Pages, _) | (Read::Cache, Some(_)) => ListParams::default().limit(PAGE),
        };
        if let Some(f) = fields {
            lp = lp.fields(f);
        }
        if let Some(token) = &next {
            lp = lp.continue_token(token);
        }
        let page: ObjectList<K> = api
            .list(&lp)
            .await
            .map_err(|source| ListError { what, source })?;
        seen += page.items.len();
        next = page.metadata.continue_.filter(|c| !c.is_empty());
        page.items.into_iter().for_each(&mut each);
        progress(what, seen, next.is_none());
        if next.is_none() {
            return Ok(seen);
        }
    }
}

/// A resource, (group, version, kind, plural); the plural names it in errors.
/// Whose pods a [`cluster_state`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every pod, Node and sandbox refusal, in consistent pages: `audit`.
    Cluster,
    /// The pods of one node and its own Node, from the watch cache, and the
    /// refusals of its pods waiting for an address: `check` on that node.
    Node(&'a str),
}

/// Pods of a node whose sandbox refusals are read at most, as the agent does.
const REFUSALS_OF: u32 = 50;

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
/// place a [`ClusterState`] is read from the API server in one go.
pub async fn cluster_state(
    client: &kube::Client,
    scope: Scope<'_>,
    ListOptions {
        annotation_keys,
        cilium_namespace,
    }: ListOptions<'_>,
    progress: Progress<'_>,
) -> Result<ClusterState, ListError> {
    let (read, pod_fields) = match scope {
        Scope::Cluster => (Read::Pages, None),
        Scope::Node(node) => (Read::Cache, Some(format!("spec.nodeName={node}"))),
    };
    let mut invalid: Vec<Invalid> = Vec::new();
    let mut pods = Vec::new();
    pages(
        &Api::<K8sPod>::all(client.clone()),
        ("pods", read),
        pod_fields.as_deref(),
        progress,
        |p| pods.push(objects::pod(&p, annotation_keys, &mut invalid)),
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
    let sandbox = refusals(client, scope, &pods, progress).await?;
    let config = cilium_config(client, cilium_namespace, &mut invalid).await?;
    let calico = calico::ipam(client, scope, progress, &mut invalid).await;
    Ok(ClusterReads {
        pods: Arc::new(pods),
        cilium_nodes: Arc::new(cilium_nodes),
        annotated_nodes: Arc::new(annotated),
        subnets: Arc::new(subnets),
        nodes: Arc::new(facts),
        sandbox: Arc::new(sandbox),
        cilium_config: config,
        calico,
        invalid,
        // Asked for afterwards, only for the local addresses that shadow a pod.
        ..ClusterReads::default()
    }
    .into())
}

/// Every CiliumNode and kube-ovn Subnet (an absent CRD: none).
async fn crds(
    client: &kube::Client,
    read: Read,
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
) -> Result<(Vec<CiliumNode>, Vec<Subnet>), ListError> {
    let cilium_nodes = custom_objects(
        client,
        ("cilium.io", "v2", "CiliumNode", "ciliumnodes"),
        read,
        progress,
        invalid,
        objects::cilium_node,
    )
    .await?;
    let subnets = custom_objects(
        client,
        ("kubeovn.io", "v1", "Subnet", "subnets"),
        read,
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
) -> Result<(Vec<CiliumNode>, Vec<NodeFacts>), ListError> {
    let (mut annotated, mut facts) = (Vec::new(), Vec::new());
    let api = Api::<Node>::all(client.clone());
    let (read, fields) = match scope {
        Scope::Cluster => (Read::Pages, None),
        Scope::Node(node) => (Read::Cache, Some(format!("metadata.name={node}"))),
    };
    pages(&api, ("nodes", read), fields.as_deref(), progress, |n| {
        let name = n.metadata.name.clone().unwrap_or_default();
        let annotations = n.metadata.annotations.clone().unwrap_or_default();
        annotated.extend(objects::node_annotations(&name, &annotations, invalid));
        let node = objects::node_facts(&n, invalid);
        facts.push(objects::with_addresses(node, &n, invalid));
    })
    .await?;
    if let Scope::Node(node) = scope
        && no_cilium_nodes
    {
        let others = api
            .list_metadata(&ListParams::default().match_any())
            .await
            .map_err(|source| ListError {
                what: "nodes",
                source,
            })?;
        for n in others
            .items
            .iter()
            .filter(|n| n.metadata.name.as_deref() != Some(node))
        {
            let name = n.metadata.name.clone().unwrap_or_default();
            let annotations = n.metadata.annotations.clone().unwrap_or_default();
            annotated.extend(objects::node_annotations(&name, &annotations, invalid));
        }
    }
    Ok((annotated, facts))
}

/// kubelet's refusals: for the audit every core Event of the reason (the one
/// field that narrows them; Events are read from etcd, once); for one node,
/// those of each of its pods waiting without an address, by uid.
async fn refusals(
    client: &kube::Client,
    scope: Scope<'_>,
    pods: &[Pod],
    progress: Progress<'_>,
) -> Result<Vec<SandboxFailure>, ListError> {
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Event>(&());
    let mut sandbox = Vec::new();
    let mut keep = |e: DynamicObject| {
        if let Some(f) = serde_json::to_value(&e)
            .ok()
            .and_then(|v| objects::sandbox_failure(&v))
        {
            sandbox.push(f);
        }
    };
    match scope {
        Scope::Cluster => {
            let events: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let fields = Some("reason=FailedCreatePodSandBox");
            pages(&events, ("events", Read::Pages), fields, progress, keep).await?;
        }
        Scope::Node(_) => {
            let waiting = pods.iter().filter(|p| p.waiting_for_address());
            for p in waiting.take(REFUSALS_OF as usize) {
                let events: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &p.namespace, &resource);
                let fields = format!("involvedObject.uid={},reason=FailedCreatePodSandBox", p.uid);
                let lp = ListParams::default().fields(&fields).limit(REFUSALS_OF);
                let list = events.list(&lp).await.map_err(|source| ListError {
                    what: "events",
                    source,
                })?;
                list.items.into_iter().for_each(&mut keep);
            }
        }
    }
    Ok(sandbox)
}

/// Cilium's configuration, listed by name (what the agent's RBAC allows).
async fn cilium_config(
    client: &kube::Client,
    namespace: &str,
    invalid: &mut Vec<Invalid>,
) -> Result<Option<Arc<CiliumConfig>>, ListError> {
    let list = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields("metadata.name=cilium-config"))
        .await
        .map_err(|source| ListError {
            what: "configmaps",
            source,
        })?;
    Ok(list.items.into_iter().next().map(|cm| {
        Arc::new(objects::cilium_config(
            &cm.data.unwrap_or_default(),
            invalid,
        ))
    }))
}

/// What routes to the pods of `namespaces` (those with findings): their
/// EndpointSlices (one list per namespace), and every webhook configuration
/// and APIService (cluster-wide, a few objects each), read as `read` says. An
/// absent API group is none.
pub async fn routes(
    client: &kube::Client,
    namespaces: &std::collections::BTreeSet<String>,
    read: Read,
    progress: Progress<'_>,
) -> Result<Routes, ListError> {
    use k8s_openapi::api::discovery::v1::EndpointSlice as K8sSlice;
    let mut out = Routes::default();
    for ns in namespaces {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<K8sSlice>(&()));
        pages(&api, ("endpointslices", read), None, progress, |o| {
            if let Ok(v) = serde_json::to_value(&o) {
                out.slices.push(objects::impact::endpoint_slice(&v));
            }
        })
        .await?;
    }
    let callers: [Gvk; 3] = [
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
        ("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
    ];
    for gvk in callers {
        custom(client, gvk, read, progress, |v| {
            let mut v = v.clone();
            // DynamicObject keeps kind in `types`; the converter reads `kind`.
            v["kind"] = gvk.2.into();
            out.callers.extend(objects::impact::callers(&v));
        })
        .await?;
    }
    Ok(out)
}
