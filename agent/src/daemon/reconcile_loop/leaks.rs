//! A leaked sandbox is told only once it has outlasted a grace period: a pod
//! deleted with `--force` leaves the API at once, while kubelet still stops
//! its containers (their grace period) and only then tears its sandbox down —
//! meanwhile its namespace holds an address no pod has. A real leak stays; a
//! teardown ends with the veth gone. A leak detection leaves out for a while
//! (it holds back while any pod of the node waits for its address) keeps its
//! age, so a busy node still tells it.

use std::{
    collections::HashMap,
    net::IpAddr,
    time::{Duration, Instant},
};

use crate::detect::Finding;

/// A leak by address and the interface it is held behind.
type Key = (Option<IpAddr>, Option<String>);

/// The leaks seen (when first, when last), and when the youngest held back
/// comes of age.
#[derive(Debug, Default)]
pub(crate) struct Young {
    seen: HashMap<Key, (Instant, Instant)>,
    matures: Option<Instant>,
}

impl Young {
    /// `findings` without the leaked sandboxes first seen less than `grace`
    /// before `now`; a leak unseen for a whole `grace` is forgotten.
    pub(crate) fn hold_back(
        &mut self,
        findings: Vec<Finding>,
        grace: Duration,
        now: Instant,
    ) -> Vec<Finding> {
        let mut seen: HashMap<Key, (Instant, Instant)> = std::mem::take(&mut self.seen)
            .into_iter()
            .filter(|(_, (_, last))| now.saturating_duration_since(*last) < grace)
            .collect();
        let mut matures: Option<Instant> = None;
        let told = findings
            .into_iter()
            .filter(|f| {
                if !f.kind.spec().held_back {
                    return true;
                }
                let key = (f.ip, f.owner.device.clone());
                let first = seen.get(&key).map_or(now, |(first, _)| *first);
                let _ = seen.insert(key, (first, now));
                let due = first + grace;
                if now < due {
                    matures = Some(matures.map_or(due, |m| m.min(due)));
                }
                now >= due
            })
            .collect();
        self.seen = seen;
        self.matures = matures;
        told
    }

    /// When the youngest leak held back comes of age: a reconcile is due then.
    pub(crate) fn recheck_at(&self) -> Option<tokio::time::Instant> {
        self.matures.map(tokio::time::Instant::from_std)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        detect::{FindingKind, detect},
        inventory::{
            fixtures::{ME, pod},
            ptp_fixtures::{PTP_PODS, ptp_inventory},
        },
    };

    /// A ptp node whose third namespace no pod owns (a leak), and a Running pod
    /// no namespace holds (another kind, never held back).
    fn found() -> Vec<Finding> {
        let pods = vec![
            pod("a", ME, &[PTP_PODS[0]]),
            pod("b", ME, &[PTP_PODS[1]]),
            pod("d", ME, &["10.250.1.9"]),
        ];
        let f = detect(&ptp_inventory(pods));
        let kinds: Vec<_> = f.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [
                FindingKind::LeakedSandboxAddress,
                FindingKind::PodAddressNotHeld
            ]
        );
        f
    }

    fn kinds(f: &[Finding]) -> Vec<FindingKind> {
        f.iter().map(|f| f.kind).collect()
    }

    #[test]
    fn a_leak_is_told_once_it_outlasts_the_grace_and_a_teardown_is_never_told() {
        let (grace, t0) = (Duration::from_secs(90), Instant::now());
        let mut young = Young::default();
        // First seen: held back, a recheck due when it comes of age; others pass.
        let told = young.hold_back(found(), grace, t0);
        assert_eq!(kinds(&told), [FindingKind::PodAddressNotHeld]);
        assert_eq!(young.matures, Some(t0 + grace));
        assert_eq!(young.hold_back(found(), grace, t0 + grace / 2).len(), 1);
        // Still there at the end of the grace: told, nothing left to recheck.
        assert_eq!(young.hold_back(found(), grace, t0 + grace).len(), 2);
        assert_eq!(young.matures, None);
        // Left out of one reconcile (a pod of the node was starting): it keeps its age.
        assert!(
            young
                .hold_back(vec![], grace, t0 + grace + grace / 2)
                .is_empty()
        );
        assert_eq!(young.hold_back(found(), grace, t0 + grace * 7 / 4).len(), 2);
        // Gone (torn down) for a whole grace, then a leak of the same address: a new grace.
        assert!(
            young
                .hold_back(vec![], grace, t0 + grace * 11 / 4)
                .is_empty()
        );
        let later = t0 + grace * 4;
        assert_eq!(young.hold_back(found(), grace, later).len(), 1);
        assert_eq!(young.matures, Some(later + grace));
        // No grace: told at once.
        let at_once = Young::default().hold_back(found(), Duration::ZERO, t0);
        assert_eq!(at_once.len(), 2);
    }
}
