//! kube-ovn's own record of an allocation, for a finding that rests on a pod's
//! IP annotation alone. The annotation is written by whoever may edit the pod;
//! the `ips.kubeovn.io` object `<pod>.<namespace>` only by kube-ovn. It is
//! asked for (one GET by name) only for this node's pods whose annotated
//! address detection flags, at once and then on the same widening schedule as
//! the sandbox Events, at most a few per round.

use std::{net::IpAddr, time::Instant};

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};
use tokio::sync::watch as channel;
use tokio_util::sync::CancellationToken;

use super::{OnChange, Shared, Sink, lock, sandbox::Schedule};
use crate::report::Published;
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

impl Confirmations {
    /// The lookups of kube-ovn's records for the pods `findings` name, answers into `sink`.
    pub(super) fn new(client: Client, sink: Sink, findings: channel::Receiver<Published>) -> Self {
        let Sink {
            node,
            state,
            on_change,
        } = sink;
        Self {
            api: Api::all_with(client, &ips_resource()),
            node,
            state,
            on_change,
            findings,
            schedule: Schedule::default(),
        }
    }
}

/// The lookups of one node's kube-ovn records, and where their answers go.
pub(super) struct Confirmations {
    api: Api<DynamicObject>,
    node: String,
    state: Shared,
    on_change: OnChange,
    findings: channel::Receiver<Published>,
    schedule: Schedule,
}

/// A pod whose record is due to be read.
struct Due {
    namespace: String,
    name: String,
    uid: String,
}

impl Confirmations {
    pub(super) async fn run(mut self, token: CancellationToken) {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                changed = self.findings.changed() => if changed.is_err() { return },
                _ = tick.tick() => {}
            }
            for pod in self.due() {
                if let Some(found) = self.record(&pod).await {
                    self.store(pod.uid, found);
                }
            }
            self.forget_settled();
        }
    }

    /// This node's pods with a finding resting on their annotation whose
    /// record is due now (a few at most).
    fn due(&mut self) -> Vec<Due> {
        let uids = wanted(&self.findings.borrow_and_update().findings, &self.node);
        let st = lock(&self.state);
        let pods: Vec<&Pod> = st
            .pods_here
            .values()
            .filter(|p| uids.contains(&p.uid))
            .collect();
        self.schedule
            .due(&pods, Instant::now())
            .into_iter()
            .map(|p| Due {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                uid: p.uid.clone(),
            })
            .collect()
    }

    /// The addresses kube-ovn's record of `pod` holds (none without a record);
    /// `None` when it could not be read.
    async fn record(&self, pod: &Due) -> Option<Vec<IpAddr>> {
        let Due {
            namespace, name, ..
        } = pod;
        match self.api.get_opt(&format!("{name}.{namespace}")).await {
            Ok(record) => Some(record.map_or_else(Vec::new, |r| {
                objects::kube_ovn_ip(
                    &serde_json::to_value(&r).unwrap_or_default(),
                    namespace,
                    name,
                )
            })),
            Err(e) => {
                tracing::debug!(pod = %format!("{namespace}/{name}"), error = %e, "reading kube-ovn's IP record failed; retrying later");
                None
            }
        }
    }

    /// Keeps what the record of pod `uid` holds; a reconcile when that changed.
    fn store(&self, uid: String, found: Vec<IpAddr>) {
        let changed = {
            let mut st = lock(&self.state);
            let changed = st.kube_ovn_ips.get(&uid) != Some(&found);
            st.kube_ovn_ips.insert(uid, found);
            changed
        };
        if changed {
            (self.on_change)();
        }
    }

    /// Drops the records of pods that went or got a status address.
    fn forget_settled(&self) {
        let mut st = lock(&self.state);
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
