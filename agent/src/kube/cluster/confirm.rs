//! kube-ovn's own record of an allocation, for a finding that rests on a pod's
//! IP annotation alone. The annotation is written by whoever may edit the pod;
//! the `ips.kubeovn.io` object `<pod>.<namespace>` only by kube-ovn. It is
//! asked for (one GET by name) only for this node's pods whose annotated
//! address detection flags, at once and then on the same widening schedule as
//! the sandbox Events, at most a few per round.

use std::{collections::BTreeSet, net::IpAddr};

use super::{
    Sink,
    follow::{Lookup, Pace},
    lean::LeanIp,
    lock,
    sandbox::{EACH_POD, PodKey},
};
use crate::report::Published;
use crate::{
    detect::Finding,
    inventory::{IpSource, Pod},
    kube::objects,
};
use kube::Api;

/// The lookups of one node's kube-ovn records, and where their answers go.
pub(super) struct Confirmations {
    pub(super) api: Api<LeanIp>,
    pub(super) sink: Sink,
}

impl Lookup for Confirmations {
    type Input = Published;
    type Key = PodKey;
    type Answer = Vec<IpAddr>;
    type Error = kube::Error;
    const ASKING: &'static str = "reading kube-ovn's IP record of a pod";
    const MEANWHILE: &'static str = "its annotated address stays unconfirmed";

    fn pace(&self) -> Pace {
        EACH_POD
    }

    /// This node's pods with a finding resting on their annotation.
    fn wanted(&mut self, input: &Published) -> Vec<PodKey> {
        let uids: BTreeSet<&str> = (input.findings.iter())
            .filter_map(Finding::site)
            .filter(|s| s.ip_source == IpSource::Annotation && s.node == self.sink.node)
            .map(|s| s.pod.uid.as_str())
            .filter(|u| !u.is_empty())
            .collect();
        let st = lock(&self.sink.state);
        (st.pods_here.values())
            .filter(|p| uids.contains(p.uid.as_str()))
            .map(PodKey::of)
            .collect()
    }

    /// The addresses kube-ovn's record of the pod holds (none without a record).
    async fn ask(&self, pod: &PodKey, _: &[PodKey]) -> kube::Result<Vec<IpAddr>> {
        let PodKey {
            namespace, name, ..
        } = pod;
        let record = self.api.get_opt(&format!("{name}.{namespace}")).await?;
        Ok(record.map_or_else(Vec::new, |r| objects::kube_ovn_ip(&r, namespace, name)))
    }

    /// Keeps what the record holds; a reconcile when that changed. Read again
    /// on the widening schedule whatever it holds.
    fn store(&mut self, pod: &PodKey, found: Vec<IpAddr>) -> bool {
        self.sink.change(|st| {
            let old = st.kube_ovn_ips.insert(pod.uid.clone(), found);
            old.as_ref() != st.kube_ovn_ips.get(&pod.uid)
        });
        false
    }

    /// Drops the records of pods that went or got a status address.
    fn settled(&mut self, _: &Published) {
        let mut st = lock(&self.sink.state);
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
        (p.ips.iter_mut())
            .filter(|i| i.source == IpSource::Annotation && held.contains(&i.ip))
            .for_each(|i| i.source = IpSource::KubeOvnIp);
    }
}
