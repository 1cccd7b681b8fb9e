//! What routes to the pods with findings: their namespaces' EndpointSlices,
//! and every webhook configuration and APIService, each read lean and kept
//! only where it leads to one of those pods.
//!
//! Anyone who may create EndpointSlices in a namespace decides how many there
//! are and how large (1,000 endpoints each): kept whole, one tenant's
//! namespace would hold the lookup's memory. Kept here: the endpoints that
//! name one of the pods looked up or hold one of their addresses (what
//! [`crate::detect::impact`] matches), and the webhooks and APIServices that
//! call the Services of those; each list read to a cap of items.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use k8s_openapi::api::discovery::v1::EndpointSlice as K8sSlice;
use kube::Resource as _;

use super::{Ask, ListError, Progress, Read, custom::Gvk, custom::custom, pages};
use crate::{
    detect::Finding,
    inventory::{Caller, EndpointSlice, Routes, ServiceRef},
    kube::{
        cluster::lean::{LeanCaller, LeanSlice},
        objects,
    },
};

/// EndpointSlices read of one namespace at most (kube-system of a large
/// cluster has a few hundred).
const SLICES_MOST: usize = 10_000;
/// Webhook configurations (or APIServices) read at most.
const CALLERS_MOST: usize = 10_000;

/// The pods whose routes are looked up: by namespace, their names and the
/// addresses their findings are about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Behind(BTreeMap<String, (BTreeSet<String>, BTreeSet<IpAddr>)>);

impl Behind {
    /// The pods of `findings` (node findings have none).
    pub fn of<'a>(findings: impl IntoIterator<Item = &'a Finding>) -> Self {
        let mut out = Self::default();
        for f in findings {
            if let Some(p) = f.pod() {
                let (names, ips) = out.0.entry(p.namespace.clone()).or_default();
                names.insert(p.name.clone());
                ips.extend(f.ip);
            }
        }
        out
    }

    /// No pod at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(namespace, pod)` of every pod, and `(namespace, address)` of every
    /// address, each as one key.
    pub fn keys(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.0.iter().flat_map(|(ns, (names, ips))| {
            names
                .iter()
                .map(|n| (ns.clone(), n.clone()))
                .chain(ips.iter().map(|ip| (ns.clone(), ip.to_string())))
        })
    }

    /// `slice` with only the endpoints that lead to one of these pods (in
    /// the slice's Service's namespace), if any do.
    fn keep(&self, mut slice: EndpointSlice) -> Option<EndpointSlice> {
        let (names, ips) = self.0.get(&slice.service.as_ref()?.namespace)?;
        slice.endpoints.retain(|(name, addresses)| {
            name.as_ref().is_some_and(|n| names.contains(n))
                || addresses.iter().any(|a| ips.contains(a))
        });
        (!slice.endpoints.is_empty()).then_some(slice)
    }
}

/// What routes to the pods of `behind`: their namespaces' EndpointSlices (one
/// list per namespace), and every webhook configuration and APIService
/// (cluster-wide, a few objects each), read as `read` says; only what leads
/// to those pods is kept. An absent API group is none.
///
/// # Errors
/// A list failed.
pub async fn routes(
    client: &kube::Client,
    behind: &Behind,
    read: Read,
    progress: Progress<'_>,
) -> Result<Routes, ListError> {
    let mut out = Routes::default();
    for ns in behind.0.keys() {
        out.slices
            .extend(slices(client, behind, ns, read, &mut *progress).await?);
    }
    let called: BTreeSet<ServiceRef> = out
        .slices
        .iter()
        .filter_map(|s| s.service.clone())
        .collect();
    out.callers = callers(client, &called, read, progress).await?;
    Ok(out)
}

/// The EndpointSlices of `ns`, each cut to the endpoints leading to `behind`'s pods.
async fn slices(
    client: &kube::Client,
    behind: &Behind,
    ns: &str,
    read: Read,
    progress: Progress<'_>,
) -> Result<Vec<EndpointSlice>, ListError> {
    let mut kept = Vec::new();
    let url = K8sSlice::url_path(&(), Some(ns));
    let ask = Ask::new("endpointslices", &url, read, SLICES_MOST);
    let listed = pages(client, ask, progress, |s: LeanSlice| {
        kept.extend(behind.keep(objects::impact::endpoint_slice(&s)));
    })
    .await?;
    if listed.cut {
        tracing::warn!(
            namespace = ns,
            most = SLICES_MOST,
            "more EndpointSlices than are read in this namespace: a Service behind its pods' findings may be missed (their severity then understated)"
        );
    }
    Ok(kept)
}

/// The webhooks and APIServices that call one of the Services `called`.
async fn callers(
    client: &kube::Client,
    called: &BTreeSet<ServiceRef>,
    read: Read,
    progress: Progress<'_>,
) -> Result<Vec<(Caller, ServiceRef)>, ListError> {
    let kinds: [Gvk; 3] = [
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
    let mut out = Vec::new();
    for gvk in kinds {
        let most = (read, CALLERS_MOST);
        let listed = custom(client, gvk, most, &mut *progress, |c: LeanCaller| {
            let through = objects::impact::callers(&c, gvk.2);
            out.extend(through.into_iter().filter(|(_, s)| called.contains(s)));
        })
        .await?;
        if listed.cut {
            tracing::warn!(
                resource = gvk.3,
                most = CALLERS_MOST,
                "more objects than are read: a caller through the shadowed pods' Services may be missed"
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(ns: &str, endpoints: &[(Option<&str>, &str)]) -> EndpointSlice {
        EndpointSlice {
            service: Some(ServiceRef {
                namespace: ns.into(),
                name: "svc".into(),
            }),
            endpoints: endpoints
                .iter()
                .map(|(n, a)| (n.map(str::to_owned), vec![a.parse().expect("ip")]))
                .collect(),
        }
    }

    #[test]
    fn only_endpoints_leading_to_the_pods_looked_up_are_kept() {
        let mut behind = Behind::default();
        behind.0.insert(
            "t".into(),
            (
                BTreeSet::from(["web-0".to_owned()]),
                BTreeSet::from(["10.0.0.9".parse().expect("ip")]),
            ),
        );
        let kept = behind
            .keep(slice(
                "t",
                &[
                    (Some("web-0"), "10.0.0.1"),
                    (Some("web-1"), "10.0.0.2"),
                    (None, "10.0.0.9"),
                ],
            ))
            .expect("kept");
        assert_eq!(kept.endpoints.len(), 2);
        assert_eq!(behind.keep(slice("t", &[(Some("db-0"), "10.0.0.3")])), None);
        // The same pod name in another namespace is another pod.
        assert_eq!(
            behind.keep(slice("u", &[(Some("web-0"), "10.0.0.9")])),
            None
        );
        let mut no_service = slice("t", &[(Some("web-0"), "10.0.0.1")]);
        no_service.service = None;
        assert_eq!(behind.keep(no_service), None);
        assert_eq!(behind.keys().count(), 2);
    }
}
