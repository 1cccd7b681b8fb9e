//! Which Service claims a local address of this node that one of its pods'
//! IPs equals: asked only for such findings, never watched.
//!
//! kube-proxy in IPVS mode binds every Service's cluster, external and
//! load-balancer IPs on every node, kube-vip its VIPs on the uplink; any user
//! who may create a Service chooses its external IPs. A local address a
//! Service claims is fixed by removing it there, and the agent never evicts the
//! pod it shadows (a tenant could point at any pod, a system pod too).
//! Services have no field selector for their addresses, so the agent lists
//! them from the API server's watch cache (`resourceVersion=0`) — only while it
//! has such findings, each address again after [`REFRESH`], at most one list
//! per [`MIN_GAP`] — and reads the list as it arrives, one lean Service at a
//! time: a tenant's Services with megabytes of annotations cost the agent
//! nothing but the bytes passing through.

use std::{collections::BTreeSet, net::IpAddr, sync::Arc, time::Duration};

use super::{
    Sink,
    follow::{Lookup, Pace},
    listed, lock,
};
use crate::report::Published;
use crate::{
    detect::{Cause, Finding, Role},
    inventory::{Covered, ServiceAddresses},
    kube::objects,
};
use k8s_openapi::api::core::v1::Service as K8sService;
use kube::{Client, Resource as _, runtime::watcher};

/// How long a lookup's answer for an address stands.
const REFRESH: Duration = Duration::from_mins(10);
/// Lists at most this often, whatever the findings do.
const MIN_GAP: Duration = Duration::from_secs(30);

/// The local addresses of `node` that pods' IPs equal: those of its
/// local-address collisions: a collision's kind follows its owner's role (a Service already named among them, so that the
/// answer is kept while the finding stands).
pub fn local_collisions(findings: &[Finding], node: &str) -> BTreeSet<IpAddr> {
    findings
        .iter()
        .filter(|f| {
            f.owner.node == node
                && f.owner.role == Role::Local
                && matches!(f.cause, Cause::Collision { .. })
        })
        .filter_map(|f| f.ip)
        .collect()
}

/// The claims on `ips` of every Service, listed once (`ipshadow check`,
/// `audit` for the Nodes' and pods' addresses, and the agent's lookups) from
/// the watch cache and read as it arrives ([`listed::list`]): each Service
/// parsed lean (its annotations and the rest skipped unparsed) and dropped
/// once its claims on `ips` and its problem, if any, are kept. Every address
/// of every Service is read; one that cannot be read leaves the answer
/// unknown ([`ServiceAddresses::holders`]).
///
/// # Errors
/// The list failed.
pub async fn services_claiming(
    client: &Client,
    ips: &BTreeSet<IpAddr>,
) -> kube::Result<ServiceAddresses> {
    let url = K8sService::url_path(&(), None);
    let read = listed::list(client, &url, None, |s: objects::LeanService| {
        let mut unreadable = Vec::new();
        let (claims, api_service): (Vec<_>, Vec<_>) =
            objects::service_addresses(&s, &mut unreadable)
                .into_iter()
                .filter(|(ip, a)| ips.contains(ip) || is_api_service(a))
                .partition(|(ip, _)| ips.contains(ip));
        (!claims.is_empty() || !unreadable.is_empty() || !api_service.is_empty()).then_some((
            claims,
            unreadable,
            api_service,
        ))
    })
    .await
    .map_err(|e| match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        other => kube::Error::Service(Box::new(other)),
    })?;
    let mut out = ServiceAddresses {
        covered: Covered::Only(ips.clone()),
        ..ServiceAddresses::default()
    };
    for (claims, unreadable, api_service) in read {
        for (ip, a) in claims {
            if is_api_service(&a) {
                out.api_service.push(ip);
            }
            out.add(ip, a);
        }
        out.unreadable.extend(unreadable);
        out.api_service
            .extend(api_service.into_iter().map(|(ip, _)| ip));
    }
    Ok(out)
}

/// A cluster IP of the `kubernetes` Service: the address plan's record of
/// the Service range (`cni::kubernetes::API_SERVICE`), kept whatever `ips`.
fn is_api_service(a: &crate::inventory::ServiceAddress) -> bool {
    let (namespace, name) = crate::cni::kubernetes::API_SERVICE_NAME;
    a.field == crate::inventory::ServiceField::ClusterIps
        && a.service.namespace == namespace
        && a.service.name == name
}

/// The Service lookups of one node, and where their answers go.
pub(super) struct Lookups(pub(super) Client, pub(super) Sink);

impl Lookup for Lookups {
    type Input = Published;
    type Key = IpAddr;
    type Answer = ServiceAddresses;
    type Error = kube::Error;
    const ASKING: &'static str =
        "listing Services (which may claim this node's shadowing addresses)";
    const MEANWHILE: &'static str = "those collisions stay unchecked and are not remediated";

    fn pace(&self) -> Pace {
        Pace::all_keys(REFRESH, MIN_GAP)
    }

    /// The local collisions' addresses; with none, what was read is stale.
    fn wanted(&mut self, input: &Published) -> Vec<IpAddr> {
        let wanted = local_collisions(&input.findings, &self.1.node);
        let mut st = lock(&self.1.state);
        if wanted.is_empty() && !matches!(st.services.covered, Covered::Nothing) {
            st.services = Arc::default();
        }
        wanted.into_iter().collect()
    }

    async fn ask(&self, ip: &IpAddr, rest: &[IpAddr]) -> kube::Result<ServiceAddresses> {
        let ips = std::iter::once(ip).chain(rest).copied().collect();
        services_claiming(&self.0, &ips).await
    }

    /// Publishes `found`; a reconcile when it changed.
    fn store(&mut self, _: &IpAddr, found: ServiceAddresses) -> bool {
        self.1.set(|st| &mut st.services, Arc::new(found));
        true
    }
}
