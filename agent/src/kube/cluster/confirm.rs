//! kube-ovn's own record of an allocation, for a finding that rests on a pod's
//! IP annotation alone. The annotation is written by whoever may edit the pod;
//! the `ips.kubeovn.io` object `<pod>.<namespace>` only by kube-ovn. It is
//! asked for (one GET by name) only for this node's pods whose annotated
//! address detection flags, at once and then on the same widening schedule as
//! the sandbox Events, at most a few per round.

use std::{net::IpAddr, sync::Arc, time::Instant};

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use tokio::sync::watch as channel;
use tokio_util::sync::CancellationToken;

use super::{OnChange, Shared, lock, sandbox::Schedule};
use crate::{
    detect::Finding,
    inventory::{IpSource, Pod},
    kube::objects,
};

/// kube-ovn's IP resource (kubeovn.io/v1, cluster-scoped).
fn ips_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kubeovn.io", "v1", "IP"), "ips")
}

/// The uids of this node's pods that have a finding resting on their annotation.
fn wanted(findings: &[Finding], node: &str) -> Vec<String> {
    let mut uids: Vec<String> = findings
        .iter()
        .filter_map(Finding::site)
        .filter(|s| s.ip_source == IpSource::Annotation && s.node == node)
        .map(|s| s.pod.uid.clone())
        .filter(|u| !u.is_empty())
        .collect();
    uids.sort();
    uids.dedup();
    uids
}

/// Looks up kube-ovn's records for the pods `findings` name, until `token` is cancelled.
pub(super) async fn run(
    client: Client,
    (node, state, on_change): (String, Shared, OnChange),
    mut findings: channel::Receiver<Arc<Vec<Finding>>>,
    token: CancellationToken,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &ips_resource());
    let mut schedule = Schedule::default();
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = token.cancelled() => return,
            changed = findings.changed() => if changed.is_err() { return },
            _ = tick.tick() => {}
        }
        let uids = wanted(&findings.borrow_and_update(), &node);
        let due: Vec<(String, String, String)> = {
            let st = lock(&state);
            let pods: Vec<&Pod> = st
                .pods_here
                .values()
                .filter(|p| uids.contains(&p.uid))
                .collect();
            schedule
                .due(&pods, Instant::now())
                .into_iter()
                .map(|p| (p.namespace.clone(), p.name.clone(), p.uid.clone()))
                .collect()
        };
        for (namespace, name, uid) in due {
            let found = match api.get_opt(&format!("{name}.{namespace}")).await {
                Ok(record) => record.map_or_else(Vec::new, |r| {
                    objects::kube_ovn_ip(
                        &serde_json::to_value(&r).unwrap_or_default(),
                        &namespace,
                        &name,
                    )
                }),
                Err(e) => {
                    tracing::debug!(pod = %format!("{namespace}/{name}"), error = %e, "reading kube-ovn's IP record failed; retrying later");
                    continue;
                }
            };
            let changed = {
                let mut st = lock(&state);
                let old = st.kube_ovn_ips.insert(uid, found.clone());
                old.as_ref() != Some(&found)
            };
            if changed {
                on_change();
            }
        }
        // Records of pods that went or got a status address are dropped.
        let mut st = lock(&state);
        let keep: std::collections::HashSet<String> = st
            .pods_here
            .values()
            .filter(|p| p.ips.iter().any(|i| i.source != IpSource::Status))
            .map(|p| p.uid.clone())
            .collect();
        st.kube_ovn_ips.retain(|uid, _| keep.contains(uid));
    }
}

/// `pods` with every annotated address kube-ovn's record holds marked confirmed.
pub(super) fn confirmed(
    pods: &mut [Pod],
    records: &std::collections::BTreeMap<String, Vec<IpAddr>>,
) {
    for p in pods {
        let Some(held) = records.get(&p.uid) else {
            continue;
        };
        for ip in p
            .ips
            .iter_mut()
            .filter(|i| i.source == IpSource::Annotation)
        {
            if held.contains(&ip.ip) {
                ip.source = IpSource::KubeOvnIp;
            }
        }
    }
}
