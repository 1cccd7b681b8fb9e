//! The whole cluster, listed once for `ipshadow audit`: every pod, Node,
//! CiliumNode and kube-ovn Subnet, kubelet's sandbox refusals and Cilium's
//! configuration, as a [`ClusterState`].
//!
//! The audit's lists go in pages of [`PAGE`] as kubectl's do (`limit` and
//! `continue`; since Kubernetes 1.31 served from the watch cache), each page
//! converted before the next is asked for: memory holds the inventory's small
//! objects, never a cluster's worth of JSON. The agent's impact lookups
//! ([`routes`] with [`Read::Cache`]) read the watch cache whole instead.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod as K8sPod};
use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectList},
};
use serde_json::Value;

use super::objects;
use crate::inventory::{ClusterState, Invalid, Routes, with_refused_addresses};

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
type Gvk = (&'static str, &'static str, &'static str, &'static str);

/// A custom resource's pages; an absent CRD (404) is no objects.
async fn custom(
    client: &kube::Client,
    (group, version, kind, plural): Gvk,
    read: Read,
    progress: Progress<'_>,
    mut each: impl FnMut(&Value),
) -> Result<(), ListError> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let listed = pages(&api, (plural, read), None, progress, |o| {
        if let Ok(v) = serde_json::to_value(&o) {
            each(&v);
        }
    })
    .await;
    match listed {
        Err(ListError {
            source: kube::Error::Api(s),
            ..
        }) if s.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// The cluster as the audit reads it. Pod IPs of pods not started yet come from
/// `annotation_keys`; `cilium-config` is read from `cilium_namespace`.
pub async fn cluster_state(
    client: &kube::Client,
    annotation_keys: &[String],
    cilium_namespace: &str,
    progress: Progress<'_>,
) -> Result<ClusterState, ListError> {
    let mut invalid: Vec<Invalid> = Vec::new();
    let mut pods = Vec::new();
    pages(
        &Api::<K8sPod>::all(client.clone()),
        ("pods", Read::Pages),
        None,
        progress,
        |p| pods.push(objects::pod(&p, annotation_keys, &mut invalid)),
    )
    .await?;
    let (mut annotated, mut facts) = (Vec::new(), Vec::new());
    pages(
        &Api::<Node>::all(client.clone()),
        ("nodes", Read::Pages),
        None,
        progress,
        |n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            let annotations = n.metadata.annotations.clone().unwrap_or_default();
            annotated.extend(objects::node_annotations(&name, &annotations, &mut invalid));
            facts.push(objects::node_facts(&n, &mut invalid));
        },
    )
    .await?;
    let mut cilium_nodes = Vec::new();
    custom(
        client,
        ("cilium.io", "v2", "CiliumNode", "ciliumnodes"),
        Read::Pages,
        progress,
        |v| match objects::cilium_node(v, &mut invalid) {
            Ok(c) => cilium_nodes.push(c),
            Err(e) => invalid.push(e),
        },
    )
    .await?;
    let mut subnets = Vec::new();
    custom(
        client,
        ("kubeovn.io", "v1", "Subnet", "subnets"),
        Read::Pages,
        progress,
        |v| match objects::subnet(v, &mut invalid) {
            Ok(s) => subnets.push(s),
            Err(e) => invalid.push(e),
        },
    )
    .await?;
    // kubelet's refusals: core Events by reason, the one field that narrows them
    // (Events are read from etcd; an audit reads them once).
    let mut sandbox = Vec::new();
    let events: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<k8s_openapi::api::core::v1::Event>(&()),
    );
    pages(
        &events,
        ("events", Read::Pages),
        Some("reason=FailedCreatePodSandBox"),
        progress,
        |e| {
            if let Some(f) = serde_json::to_value(&e)
                .ok()
                .and_then(|v| objects::sandbox_failure(&v))
            {
                sandbox.push(f);
            }
        },
    )
    .await?;
    let config = Api::<ConfigMap>::namespaced(client.clone(), cilium_namespace)
        .get_opt("cilium-config")
        .await
        .map_err(|source| ListError {
            what: "configmaps",
            source,
        })?
        .map(|cm| {
            Arc::new(objects::cilium_config(
                &cm.data.unwrap_or_default(),
                &mut invalid,
            ))
        });
    let pods = if sandbox.is_empty() {
        pods
    } else {
        with_refused_addresses(&pods, &sandbox)
    };
    Ok(ClusterState {
        pods: Arc::new(pods),
        cilium_nodes: Arc::new(cilium_nodes),
        annotated_nodes: Arc::new(annotated),
        subnets: Arc::new(subnets),
        nodes: Arc::new(facts),
        sandbox: Arc::new(sandbox),
        cilium_config: config,
        invalid,
        routes: Arc::default(),
        // The audit reads no node's kernel, so no local address to check.
        services: Arc::default(),
    })
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
