//! kubelet's sandbox refusals: for the audit every core Event of the reason
//! (the one field that narrows them; Events are read from etcd, once, in
//! pages); for one node, those of each of its pods waiting without an
//! address, by uid, [`REFUSALS_OF`] at most each. Each Event is read lean,
//! its message to a bounded prefix ([`LeanEvent`]).

use k8s_openapi::api::core::v1::Event;
use kube::{Resource as _, api::ListParams};

use super::{Ask, ListError, Progress, Read, Scope, cut_list, pages};
use crate::{
    inventory::{Invalid, Pod, SandboxFailure},
    kube::cluster::{
        lean::LeanEvent,
        list_body::{each_item, list_request},
    },
};

/// Pods of a node whose sandbox refusals are read at most, and Events read
/// of each, as the agent does.
const REFUSALS_OF: usize = 50;

/// kubelet's refusals as `scope` reads them; what is cut short goes to `invalid`.
pub(super) async fn refusals(
    client: &kube::Client,
    scope: Scope<'_>,
    pods: &[Pod],
    progress: Progress<'_>,
    invalid: &mut Vec<Invalid>,
) -> Result<Vec<SandboxFailure>, ListError> {
    let mut sandbox = Vec::new();
    match scope {
        Scope::Cluster => {
            let url = Event::url_path(&(), None);
            let ask = Ask {
                fields: Some("reason=FailedCreatePodSandBox"),
                ..Ask::new("events", &url, Read::Pages, usize::MAX)
            };
            pages(client, ask, progress, |e: LeanEvent| {
                sandbox.extend(e.refusal(invalid));
            })
            .await?;
        }
        Scope::Node(_) => {
            let waiting = pods.iter().filter(|p| p.waiting_for_address());
            for p in waiting.take(REFUSALS_OF) {
                let (found, cut) = of_one_pod(client, &p.namespace, &p.uid, invalid)
                    .await
                    .map_err(|source| ListError {
                        what: "events",
                        cause: source,
                    })?;
                sandbox.extend(found);
                if cut {
                    invalid.push(cut_events(&p.namespace, &p.name));
                }
            }
        }
    }
    Ok(sandbox)
}

/// The refusals among one pod's `FailedCreatePodSandBox` Events (one
/// request, [`REFUSALS_OF`] at most), and whether it had more.
///
/// # Errors
/// The list failed.
pub(in crate::kube) async fn of_one_pod(
    client: &kube::Client,
    namespace: &str,
    uid: &str,
    invalid: &mut Vec<Invalid>,
) -> kube::Result<(Vec<SandboxFailure>, bool)> {
    let url = Event::url_path(&(), Some(namespace));
    let limit = u32::try_from(REFUSALS_OF).unwrap_or(u32::MAX);
    let fields = format!("involvedObject.uid={uid},reason=FailedCreatePodSandBox");
    let params = ListParams::default().fields(&fields).limit(limit);
    let request = list_request(&url, &params, false)?;
    let mut found = Vec::new();
    let listed = each_item(client, request, REFUSALS_OF, |e: LeanEvent| {
        found.extend(e.refusal(invalid));
    })
    .await?;
    // More than a page: Events are etcd's, paged by `limit`; the rest unread.
    let more = listed.meta.continue_.is_some_and(|c| !c.is_empty());
    Ok((found, listed.cut || more))
}

/// The problem of a pod with more refusals than are read.
pub(in crate::kube) fn cut_events(namespace: &str, pod: &str) -> Invalid {
    let object = format!(
        "{}/{}",
        crate::inventory::text::cleaned(namespace),
        crate::inventory::text::cleaned(pod)
    );
    let unchecked =
        "a refusal only the others name is not seen (the pod's finding rests on those read)";
    cut_list("events", object, REFUSALS_OF, unchecked)
}
