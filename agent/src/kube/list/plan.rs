//! The address plan's objects (`cni::plan::RECORDS`: MetalLB's pools,
//! Cilium's LB-IPAM and pod pools, ServiceCIDRs, attachments), listed for
//! `audit` only, in pages: cluster-wide objects no agent reads. Each kind is
//! asked at its preferred version, then the next where the API server does
//! not serve it (404); a kind no version of which is served (its CRD is not
//! installed) is nothing, said nowhere. A kind of which one object is read
//! (kube-vip's ConfigMap) is listed in its namespace by name: the cluster's
//! other objects of it are never read. The `kubernetes` Service is not asked
//! for here: `audit` takes it from its one list of every Service.

use serde_json::value::RawValue;

use super::{Ask, ListError, Progress, Read, Scope, pages};
use crate::{
    cni::{
        kubernetes::API_SERVICE,
        plan::{RECORDS, Records},
    },
    inventory::{Invalid, Planned, Unlisted},
};

/// Every range of the plan for `Scope::Cluster`, and the kinds that could
/// not be listed; nothing for one node's `check`. Optional, as every source:
/// a kind that cannot be listed (no `list` on it) is warned about, named in
/// the audit's plan and left out, and the rest stands.
pub(super) async fn plan(
    client: &kube::Client,
    scope: Scope<'_>,
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
) -> (Vec<Planned>, Vec<Unlisted>) {
    let mut out = Vec::new();
    let mut unlisted = Vec::new();
    if scope != Scope::Cluster {
        return (out, unlisted);
    }
    // The `kubernetes` Service comes with `audit`'s one list of the Services.
    let api_service = |r: &Records| r.group == API_SERVICE.group && r.kind == API_SERVICE.kind;
    for records in RECORDS.iter().filter(|r| !api_service(r)) {
        if let Err(e) = kind(client, records, progress, invalid, &mut out).await {
            let namespace = records
                .only
                .map_or_else(String::new, |(ns, _)| format!(" -n {ns}"));
            let ask = format!("kubectl auth can-i list {}{namespace}", records.resource());
            tracing::warn!(
                error = %e,
                resource = %records.resource(),
                "listing the address plan's objects failed: their ranges are not checked \
                 (`{ask}`)"
            );
            unlisted.push(Unlisted {
                resource: records.resource(),
                reason: unlisted_reason(&e, &ask),
            });
        }
    }
    (out, unlisted)
}

/// Why a kind was not listed, in a line: the API server's status, and the
/// command that tells whether the audit may list it.
fn unlisted_reason(e: &ListError, ask: &str) -> String {
    match &e.cause {
        kube::Error::Api(s) if s.code == 403 => format!("forbidden (`{ask}`)"),
        kube::Error::Api(s) => format!("{} {} ({})", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

/// The objects of one kind, at the first version served.
async fn kind(
    client: &kube::Client,
    records: &'static Records,
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
    out: &mut Vec<Planned>,
) -> Result<(), ListError> {
    let fields = records
        .only
        .map(|(_, name)| format!("metadata.name={name}"));
    for version in records.versions {
        let url = url(records, version);
        let ask = Ask {
            fields: fields.as_deref(),
            ..Ask::new(records.plural, &url, Read::Pages, usize::MAX)
        };
        let mut read = Vec::new();
        let listed = pages(client, ask, &mut *progress, |item: Box<RawValue>| {
            read.extend((records.read)(item.get(), invalid));
        })
        .await;
        match listed {
            Ok(_) => {
                out.append(&mut read);
                return Ok(());
            }
            Err(ListError {
                cause: kube::Error::Api(s),
                ..
            }) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The collection's path at `version`: in the one object's namespace, if one.
fn url(records: &Records, version: &str) -> String {
    let base = if records.group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{}/{version}", records.group)
    };
    match records.only {
        Some((ns, _)) => format!("{base}/namespaces/{ns}/{}", records.plural),
        None => format!("{base}/{}", records.plural),
    }
}
