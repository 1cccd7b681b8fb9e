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

use std::time::{Duration, Instant};

use kube::Client;
use tokio_util::sync::CancellationToken;

use super::{OnChange, Shared, lock};
use crate::inventory::{Invalid, Pod, SandboxFailure};
use crate::kube::{
    list::refusals::{cut_events, of_one_pod},
    pace::Backoffs,
};

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

/// When each pod's next request is due: at once, then after 1, 2, 4, 8 and
/// every 15 minutes while the pod stays wanted.
pub(super) struct Schedule(Backoffs<String>);

impl Default for Schedule {
    fn default() -> Self {
        Self(Backoffs::new(FIRST_WAIT, LONGEST_WAIT))
    }
}

impl Schedule {
    /// Of the pods `wanted` (by uid), those due now, at most `PER_TICK`, each
    /// scheduled again; pods no longer wanted are forgotten.
    pub(super) fn due<'a>(&mut self, wanted: &[&'a Pod], now: Instant) -> Vec<&'a Pod> {
        self.0.retain(|uid, _| wanted.iter().any(|p| p.uid == *uid));
        let mut due = Vec::new();
        for p in wanted {
            if due.len() == PER_TICK {
                break;
            }
            if self.0.ready(p.uid.as_str(), now) {
                self.0.asked(p.uid.clone(), now);
                due.push(*p);
            }
        }
        due
    }
}

/// Whether `p` has stayed Pending without an address for [`PENDING_FOR`] (`now` in Unix seconds).
fn waiting(p: &Pod, now: i64) -> bool {
    let old_enough = p.created.is_none_or(|c| {
        now.saturating_sub(c) >= i64::try_from(PENDING_FOR.as_secs()).unwrap_or(i64::MAX)
    });
    p.waiting_for_address() && old_enough
}

impl Refusals {
    /// The reads of this node's waiting pods' sandbox refusals, answers into `state`.
    pub(super) fn new(client: Client, state: Shared, on_change: OnChange) -> Self {
        Self {
            client,
            state,
            on_change,
            schedule: Schedule::default(),
        }
    }
}

/// The reads of this node's waiting pods' Events, and where their answers go.
pub(super) struct Refusals {
    client: Client,
    state: Shared,
    on_change: OnChange,
    schedule: Schedule,
}

/// A waiting pod whose Events are due to be read.
struct Due {
    namespace: String,
    name: String,
    uid: String,
}

/// What one read of a pod's Events found: its refusals, and what was cut short.
type Found = (Vec<SandboxFailure>, Vec<Invalid>);

impl Refusals {
    pub(super) async fn run(mut self, token: CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                _ = tick.tick() => {}
            }
            for pod in self.due() {
                let found = refusals(&self.client, &pod).await;
                if self.store(&pod, found) {
                    (self.on_change)();
                }
            }
        }
    }

    /// The waiting pods whose Events are due now (a few at most); the
    /// refusals of pods no longer waiting are dropped.
    fn due(&mut self) -> Vec<Due> {
        let now = crate::report::traffic::unix_now();
        let mut st = lock(&self.state);
        let waiting: Vec<&Pod> = st.pods_here.values().filter(|p| waiting(p, now)).collect();
        let due: Vec<Due> = self
            .schedule
            .due(&waiting, Instant::now())
            .into_iter()
            .map(|p| Due {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                uid: p.uid.clone(),
            })
            .collect();
        let keep: std::collections::HashSet<String> =
            waiting.iter().map(|p| p.uid.clone()).collect();
        let before = st.sandbox.len() + st.sandbox_problems.len();
        st.sandbox.retain(|uid, _| keep.contains(uid));
        st.sandbox_problems.retain(|uid, _| keep.contains(uid));
        if st.sandbox.len() + st.sandbox_problems.len() != before {
            drop(st);
            (self.on_change)();
        }
        due
    }

    /// Keeps the refusals read for `pod` (or marks Events down when the list
    /// failed); whether what detection reads changed.
    fn store(&self, pod: &Due, found: Result<Found, kube::Error>) -> bool {
        let mut st = lock(&self.state);
        match found {
            Ok((found, problems)) => {
                st.up.insert("events", true);
                let old = st.sandbox.get(&pod.uid);
                let mut changed = old.map_or(!found.is_empty(), |o| *o != found);
                if found.is_empty() {
                    st.sandbox.remove(&pod.uid);
                } else {
                    st.sandbox.insert(pod.uid.clone(), found);
                }
                let old = st.sandbox_problems.get(&pod.uid);
                changed |= old.map_or(!problems.is_empty(), |o| *o != problems);
                if problems.is_empty() {
                    st.sandbox_problems.remove(&pod.uid);
                } else {
                    st.sandbox_problems.insert(pod.uid.clone(), problems);
                }
                changed
            }
            Err(e) => {
                let was_up = st.up.insert("events", false) != Some(false);
                if was_up {
                    tracing::warn!(namespace = pod.namespace, pod_uid = pod.uid, error = %e, "listing a waiting pod's sandbox Events failed; retrying later");
                }
                was_up
            }
        }
    }
}

/// The `FailedCreatePodSandBox` refusals ipshadow diagnoses among one pod's
/// Events: the most repeated first, a bounded few; a list or a message cut
/// short named as a problem (counted and logged as invalid objects).
async fn refusals(client: &Client, pod: &Due) -> Result<Found, kube::Error> {
    let mut problems = Vec::new();
    let (mut out, cut) = of_one_pod(client, &pod.namespace, &pod.uid, &mut problems).await?;
    if cut {
        problems.push(cut_events(&pod.namespace, &pod.name));
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.count));
    out.truncate(PER_POD);
    Ok((out, problems))
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

    #[test]
    fn each_pod_is_read_again_later_and_later_and_few_at_a_time() {
        let pods: Vec<Pod> = (0..5)
            .map(|i| pod(&format!("p{i}"), "Pending", 0))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let mut s = Schedule::default();
        let t0 = Instant::now();
        assert_eq!(s.due(&refs, t0).len(), PER_TICK);
        assert_eq!(s.due(&refs, t0).len(), 2, "the rest next tick");
        assert!(s.due(&refs, t0 + Duration::from_secs(30)).is_empty());
        assert_eq!(s.due(&refs, t0 + FIRST_WAIT).len(), PER_TICK);
        // After 1, 2, 4, 8 and 15 minutes the wait stays at 15.
        let mut at = t0;
        let mut waits = Vec::new();
        let one = vec![refs[0]];
        let mut s = Schedule::default();
        for _ in 0..7 {
            let next = s.0.next("p0").unwrap_or(at);
            waits.push(next.saturating_duration_since(at).as_secs() / 60);
            at = next;
            assert_eq!(s.due(&one, at).len(), 1);
        }
        assert_eq!(waits, vec![0, 1, 2, 4, 8, 15, 15]);
        // A pod that starts (or goes) is forgotten.
        assert!(s.due(&[], at).is_empty() && !s.0.contains("p0"));
    }
}
