//! kubelet's sandbox refusals for this node's pods that stay Pending without
//! an address: the only trace of an address Cilium's own IPAM gave a pod and
//! then refused as in use, or of an allocator with none left.
//!
//! Events have no field selector for the node, and the API server serves them
//! from etcd, not its watch cache: a cluster-wide Event watch from every node
//! would be read thousands of times over. So the agent asks only about a pod of
//! its own that has stayed Pending without an address for [`PENDING_FOR`]: one
//! namespaced list of that pod's `FailedCreatePodSandBox` Events
//! (`involvedObject.uid`, `reason`), again after a wait that doubles up to
//! [`LONGEST_WAIT`] while the pod stays so, and at most [`PER_TICK`] lists
//! every [`TICK`] across all pods. Each list is read as it arrives, its
//! Events lean and their messages to a bounded prefix
//! ([`crate::kube::list::refusals`]): whoever may write Events in the pod's
//! namespace cannot make the agent hold them whole.

use std::time::Duration;

use super::{
    Sink,
    cache::replace,
    follow::{Lookup, Pace},
    lock,
};
use crate::inventory::{Invalid, Pod, SandboxFailure};
use crate::kube::list::refusals::{cut_events, of_one_pod};
use kube::Client;

/// How long a pod stays Pending without an address before its Events are read.
pub(super) const PENDING_FOR: Duration = Duration::from_secs(30);
/// The first wait before a pod's Events are read again …
const FIRST_WAIT: Duration = Duration::from_mins(1);
/// … doubling up to this.
const LONGEST_WAIT: Duration = Duration::from_mins(15);
/// How often the agent looks for such pods.
const TICK: Duration = Duration::from_secs(10);
/// Lists per tick at most, across all pods.
const PER_TICK: usize = 3;
/// Refusals kept per pod (each a distinct Event object).
const PER_POD: usize = 8;

/// When each pod's record or Events are read: at once, then after 1, 2, 4, 8
/// and every 15 minutes while the pod stays wanted, a few per tick.
pub(super) const EACH_POD: Pace = Pace::EachKey {
    first: FIRST_WAIT,
    longest: LONGEST_WAIT,
    per_round: PER_TICK,
    tick: TICK,
};

/// A pod asked about, by uid.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct PodKey {
    pub(super) uid: String,
    pub(super) namespace: String,
    pub(super) name: String,
}

impl PodKey {
    pub(super) fn of(p: &Pod) -> Self {
        Self {
            uid: p.uid.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        }
    }
}

/// Whether `p` has stayed Pending without an address for [`PENDING_FOR`] (`now` in Unix seconds).
fn waiting(p: &Pod, now: i64) -> bool {
    let old_enough = p.created.is_none_or(|c| {
        now.saturating_sub(c) >= i64::try_from(PENDING_FOR.as_secs()).unwrap_or(i64::MAX)
    });
    p.waiting_for_address() && old_enough
}

/// The reads of this node's waiting pods' Events, and where their answers go.
pub(super) struct Refusals(pub(super) Client, pub(super) Sink);

/// What one read of a pod's Events found: its refusals, and what was cut short.
type Found = (Vec<SandboxFailure>, Vec<Invalid>);

impl Lookup for Refusals {
    type Input = ();
    type Key = PodKey;
    type Answer = Found;
    type Error = kube::Error;
    const ASKING: &'static str = "listing a waiting pod's sandbox Events";
    const MEANWHILE: &'static str = "its refusals stay unread";

    fn pace(&self) -> Pace {
        EACH_POD
    }

    /// The waiting pods; the refusals of pods no longer waiting are dropped.
    fn wanted(&mut self, (): &()) -> Vec<PodKey> {
        let now = crate::report::traffic::unix_now();
        let mut wanted = Vec::new();
        self.1.change(|st| {
            wanted = (st.pods_here.values())
                .filter(|p| waiting(p, now))
                .map(PodKey::of)
                .collect();
            let before = st.sandbox.len() + st.sandbox_problems.len();
            let keep = |uid: &String| wanted.iter().any(|k| k.uid == *uid);
            st.sandbox.retain(|uid, _| keep(uid));
            st.sandbox_problems.retain(|uid, _| keep(uid));
            st.sandbox.len() + st.sandbox_problems.len() != before
        });
        wanted
    }

    /// The `FailedCreatePodSandBox` refusals ipshadow diagnoses among the
    /// pod's Events: the most repeated first, a bounded few; a list or a
    /// message cut short named as a problem (counted and logged as invalid objects).
    async fn ask(&self, pod: &PodKey, _: &[PodKey]) -> kube::Result<Found> {
        let mut problems = Vec::new();
        let (mut out, cut) = of_one_pod(&self.0, &pod.namespace, &pod.uid, &mut problems).await?;
        if cut {
            problems.push(cut_events(&pod.namespace, &pod.name));
        }
        out.sort_by_key(|f| std::cmp::Reverse(f.count));
        out.truncate(PER_POD);
        Ok((out, problems))
    }

    /// Keeps the refusals read for the pod; a reconcile when they changed.
    fn store(&mut self, pod: &PodKey, (found, problems): Found) -> bool {
        self.1.change(|st| {
            st.up.insert("events", true);
            replace(&mut st.sandbox, &pod.uid, found)
                | replace(&mut st.sandbox_problems, &pod.uid, problems)
        });
        false
    }

    /// Events read as down while listing them fails; a reconcile when that starts.
    fn failed(&mut self) {
        lock(&self.1.state).up.insert("events", false);
        (self.1.on_change)();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::IpSource;

    fn pod(uid: &str, phase: &str, created: i64) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: uid.into(),
            uid: uid.into(),
            node: Some("n".into()),
            phase: Some(phase.into()),
            created: Some(created),
            ..Pod::default()
        }
    }

    #[test]
    fn only_pods_pending_without_an_address_for_thirty_seconds_wait() {
        let now = 1_000_000;
        assert!(waiting(&pod("a", "Pending", now - 31), now));
        assert!(!waiting(&pod("b", "Pending", now - 5), now));
        assert!(!waiting(&pod("c", "Running", now - 600), now));
        let mut annotated = pod("d", "Pending", now - 600);
        annotated.ips.push(crate::inventory::PodIp {
            ip: "10.0.0.1".parse().expect("ip"),
            source: IpSource::Annotation,
        });
        assert!(waiting(&annotated, now), "an annotation is not an address");
        annotated.ips[0].source = IpSource::Status;
        assert!(!waiting(&annotated, now));
    }
}
