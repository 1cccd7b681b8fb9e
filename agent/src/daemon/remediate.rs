//! Opt-in remediation (`--remediate dry-run|evict`, off by default): evicts
//! the pod of a confirmed same-node collision through the Eviction API, with
//! the guards of [`crate::report::remediate`]; every action (or, in dry-run,
//! what it would do) an Event on the pod and a counter.

use std::time::Duration;

use prometheus_client::metrics::{counter::Counter, family::Family};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Published;
use crate::{
    kube::evict::{Eviction, evict, record},
    report::{
        metrics::{Registry, RemediationLabels},
        remediate::{Candidate, Policy, candidates},
    },
};

/// What remediation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Nothing (the default).
    Off,
    /// Say what it would evict (an Event on the pod, a counter), evict nothing.
    DryRun,
    /// Evict through the Eviction API.
    Evict,
}

/// Remediation's flags.
#[derive(Debug, clap::Args)]
#[group(id = "remediation")]
pub struct Args {
    /// Evict the pods of confirmed same-node collisions that have a controller
    /// (through the Eviction API, which keeps PodDisruptionBudgets): off, dry-run or evict.
    #[arg(long, env = "IPSHADOW_REMEDIATE", value_enum, default_value_t = Mode::Off)]
    pub remediate: Mode,
    /// At most one pod per node per this long (10m, 600s, 1h or bare seconds; 5s to 24h),
    /// counted from the agent's start too; a PodDisruptionBudget's refusal
    /// waits for it as well.
    #[arg(long, env = "IPSHADOW_REMEDIATE_INTERVAL", default_value = "10m",
          value_parser = |s: &str| duration(s, Duration::from_secs(5)))]
    pub remediate_interval: Duration,
    /// Never act on a finding younger than this (e.g. 1m, 90s; 0s to 24h).
    #[arg(long, env = "IPSHADOW_REMEDIATE_AFTER", default_value = "1m",
          value_parser = |s: &str| duration(s, Duration::ZERO))]
    pub remediate_after: Duration,
}

/// A duration as jiff's friendly format reads it (`90s`, `10m`, `1h30m`,
/// `1 hour`) or ISO 8601 (`PT10M`), or bare seconds; surrounding whitespace of
/// any kind ignored; from `min` to 24 hours.
fn duration(s: &str, min: Duration) -> Result<Duration, String> {
    let t = s.trim();
    let d = match t.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => t
            .parse::<jiff::SignedDuration>()
            .map_err(|e| format!("{s:?} is not a duration (e.g. 90s, 10m, 1h): {e}"))
            .and_then(|d| Duration::try_from(d).map_err(|_| format!("{s:?} is negative")))?,
    };
    if d < min || d > Duration::from_hours(24) {
        return Err(format!("{s:?} is out of range ({}s to 24h)", min.as_secs()));
    }
    Ok(d)
}

/// Now, in tokio's clock: the real one in the agent, a paused one in tests.
fn clock_now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// The remediation task.
pub(crate) struct RemediateTask {
    /// Without its own retries: a blocked eviction waits for the interval.
    client: kube::Client,
    node: String,
    mode: Mode,
    policy: Policy,
    /// `ipshadow_remediations_total`.
    actions: Family<RemediationLabels, Counter>,
    published: watch::Receiver<Published>,
}

impl RemediateTask {
    pub(crate) fn new(
        client: kube::Client,
        node: &str,
        args: &Args,
        registry: &mut Registry,
        published: watch::Receiver<Published>,
    ) -> Self {
        let actions = Family::<RemediationLabels, Counter>::default();
        registry.register(
            "ipshadow_remediations",
            "Remediation actions (--remediate), by action (dry-run, evict) and result",
            actions.clone(),
        );
        Self {
            client,
            node: node.to_owned(),
            mode: args.remediate,
            policy: Policy::new(args.remediate_after, args.remediate_interval, clock_now()),
            actions,
            published,
        }
    }

    /// Acts until `token` is cancelled.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        tracing::info!(
            mode = ?self.mode,
            first_action_after = ?self.policy.interval(),
            "remediation is on; it acts no sooner than one interval after the start"
        );
        loop {
            let input = self.published.borrow_and_update().clone();
            let current = if input.ready {
                candidates(&input.findings, &self.node)
            } else {
                Vec::new()
            };
            let now = clock_now();
            if let Some(c) = self.policy.next(&current, now) {
                self.policy.acted(&c, now);
                self.act(&c).await;
            }
            let wait = self.policy.wait(clock_now());
            tokio::select! {
                () = token.cancelled() => return,
                r = self.published.changed() => if r.is_err() { return },
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    async fn act(&self, c: &Candidate) {
        let what = format!(
            "pod {} holds {} ({}) on node {}; its controller {} recreates it with another address",
            c.pod, c.ip, c.kind, self.node, c.controller
        );
        let (action, result, event) = match self.mode {
            Mode::Off => return,
            Mode::DryRun => (
                "dry-run",
                "would-evict",
                Some((
                    "IPShadowWouldEvict",
                    format!("ipshadow --remediate dry-run would evict this pod: {what}."),
                )),
            ),
            Mode::Evict => {
                let outcome = evict(&self.client, &c.pod).await;
                let event = match &outcome {
                    Eviction::Evicted => Some((
                        "IPShadowEvicted",
                        format!("ipshadow evicted this pod: {what}."),
                    )),
                    Eviction::Blocked(why) => Some((
                        "IPShadowEvictionBlocked",
                        format!(
                            "ipshadow did not evict this pod: a PodDisruptionBudget allows no disruption now ({why}); it tries again in {:?} at the earliest.",
                            self.policy.interval()
                        ),
                    )),
                    Eviction::Gone | Eviction::Failed(_) => None,
                };
                if let Eviction::Failed(e) = &outcome {
                    tracing::warn!(pod = %c.pod, error = %e, "evicting failed; check that the agent may create pods/eviction");
                }
                ("evict", outcome.result(), event)
            }
        };
        tracing::info!(pod = %c.pod, ip = %c.ip, kind = %c.kind, action, result, "remediation");
        self.actions
            .get_or_create(&RemediationLabels { action, result })
            .inc();
        // The controller's name comes from the pod's owner reference: the tenant's text.
        let event =
            event.map(|(reason, note)| (reason, crate::report::events::truncate_note(&note)));
        if let Some((reason, note)) = event
            && let Err(e) = record(&self.client, &self.node, &c.pod, (reason, note)).await
        {
            tracing::warn!(pod = %c.pod, error = %e, "recording the remediation Event failed");
        }
    }
}

#[cfg(test)]
mod loop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_and_a_range() {
        let min = Duration::from_secs(5);
        assert_eq!(duration("10m", min), Ok(Duration::from_mins(10)));
        assert_eq!(duration("90s", min), Ok(Duration::from_secs(90)));
        assert_eq!(duration("600", min), Ok(Duration::from_mins(10)));
        assert_eq!(duration("1h", min), Ok(Duration::from_hours(1)));
        for bad in ["", "m", "10x", "4s", "25h", "-1m", "99999999999999999999h"] {
            assert!(duration(bad, min).is_err(), "{bad}");
        }
        assert_eq!(duration("0s", Duration::ZERO), Ok(Duration::ZERO));
        // The old hand-written parser cut the untrimmed string at an index of
        // the trimmed one: " 10m" was one minute, a leading wide space panicked.
        assert_eq!(duration(" 10m", min), Ok(Duration::from_mins(10)));
        assert_eq!(duration("\u{3000}10m", min), Ok(Duration::from_mins(10)));
        assert_eq!(duration("1h30m", min), Ok(Duration::from_mins(90)));
    }

    proptest::proptest! {
        /// Any whitespace around any amount in any unit reads as that amount;
        /// any string at all gives an answer, never a panic.
        #[test]
        fn whitespace_never_changes_a_duration(
            n in 0u64..=1440,
            unit in proptest::sample::select(vec![("s", 1u64), ("m", 60), ("h", 3600)]),
            before in "[ \t\u{a0}\u{3000}\u{2003}]{0,3}",
            after in "[ \t\u{a0}\u{3000}\u{2003}]{0,3}",
            any in "\\PC{0,12}",
        ) {
            let text = format!("{before}{n}{}{after}", unit.0);
            let want = Duration::from_secs(n * unit.1);
            let got = duration(&text, Duration::ZERO);
            if want <= Duration::from_hours(24) {
                proptest::prop_assert_eq!(got, Ok(want));
            } else {
                proptest::prop_assert!(got.is_err());
            }
            let _ = duration(&any, Duration::ZERO);
        }
    }
}
