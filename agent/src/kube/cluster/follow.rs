//! Following the findings: every lookup they call for (the Services behind a
//! local address, kube-ovn's record of an annotated pod, a waiting pod's
//! sandbox Events, the owner of a bridge's foreign range, what routes to a
//! shadowed pod, the pod holding an address with unexplained traffic) is
//! asked by [`run`], which owns when to ask, the waits after a failure and
//! their logging. A [`Lookup`] says only what it wants, how it asks and where
//! it keeps the answer.

use std::{collections::BTreeMap, fmt::Display, future::Future, hash::Hash, time::Duration};

use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::kube::pace::{Backoffs, Budget};
use crate::kube::ttl::Cache;

/// Keys whose answers are remembered at most: beyond, they are asked again sooner.
const REMEMBERED: usize = 1024;

/// When a lookup asks.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pace {
    /// Each key alone: at once, then after `first` doubling up to `longest`
    /// while it stays wanted; at most `per_round` keys a round, a round every
    /// `tick` and whenever the input changes.
    EachKey {
        first: Duration,
        longest: Duration,
        per_round: usize,
        tick: Duration,
    },
    /// All keys in one ask, when one has no answer or its answer is older
    /// than `refresh` (doubled per answer in a row that found nothing, at most
    /// `quiet_doublings` times); at most one ask per `gap` (doubled per failure
    /// in a row, at most `failure_doublings` times); the first at a random
    /// point of `spread`, so that a rollout does not make every node ask at once.
    AllKeys {
        refresh: Duration,
        gap: Duration,
        quiet_doublings: u32,
        failure_doublings: u32,
        spread: Duration,
    },
    /// Each key alone, once it has news ([`Lookup::news`] changed since its
    /// last ask) and its wait passed: `first` doubling up to `longest`, over
    /// again when an answer found something; across keys `burst` at once,
    /// then `per_minute`. A round whenever the input changes or a wait ends.
    OnNews {
        first: Duration,
        longest: Duration,
        burst: u32,
        per_minute: u32,
    },
}

impl Pace {
    /// All keys in one ask, refreshed every `refresh`, at most one ask per
    /// `gap`, with no doubling and no spread.
    pub(crate) const fn all_keys(refresh: Duration, gap: Duration) -> Self {
        Self::AllKeys {
            refresh,
            gap,
            quiet_doublings: 0,
            failure_doublings: 0,
            spread: Duration::ZERO,
        }
    }
}

/// What a lookup wants, how it asks and where it keeps the answer.
pub(crate) trait Lookup: Send + Sync + 'static {
    /// What it follows: the published findings, or nothing but the clock.
    type Input: Clone + Send + Sync + 'static;
    /// One thing asked about.
    type Key: Ord + Hash + Clone + std::fmt::Debug + Send + Sync;
    type Answer: Send;
    type Error: Display + Send;
    /// What is asked, for the logs ("listing Services …").
    const ASKING: &'static str;
    /// What goes unchecked while asking fails, for the logs.
    const MEANWHILE: &'static str;

    fn pace(&self) -> Pace;
    /// The keys `input` calls for now, most wanted first; forgets what is
    /// kept for keys no longer wanted.
    fn wanted(&mut self, input: &Self::Input) -> Vec<Self::Key>;
    /// Asks about `key` and the `rest` of the ask's keys: none but `key`
    /// ([`Pace::EachKey`], [`Pace::OnNews`]) or all wanted ([`Pace::AllKeys`]).
    fn ask(
        &self,
        key: &Self::Key,
        rest: &[Self::Key],
    ) -> impl Future<Output = Result<Self::Answer, Self::Error>> + Send;
    /// Keeps the answer of the ask of `key` (and the rest); whether it found
    /// anything (an answer that found nothing is asked for ever less often,
    /// see [`Pace::AllKeys`]; one that found something starts a key's waits over).
    fn store(&mut self, key: &Self::Key, answer: Self::Answer) -> bool;
    /// [`Pace::OnNews`]: a count of `key`'s news in `input` that grows with
    /// each; `None` while it must not be asked.
    fn news(&self, _input: &Self::Input, _key: &Self::Key) -> Option<u64> {
        None
    }
    /// Asking failed, the first time in a row.
    fn failed(&mut self) {}
    /// After each round of asks, for the `input` the round served.
    fn settled(&mut self, _input: &Self::Input) {}
}

/// Asks what `lookup` wants of `input` as its [`Pace`] allows, until `token`
/// is cancelled. Once `input`'s sender is gone, the last input stands.
pub(crate) async fn run<L: Lookup>(
    mut lookup: L,
    mut input: watch::Receiver<L::Input>,
    token: CancellationToken,
) {
    let mut pacer = Pacer::new(lookup.pace(), Instant::now());
    let mut input_gone = false;
    loop {
        let current = input.borrow_and_update().clone();
        let wanted = lookup.wanted(&current);
        pacer.news = (wanted.iter())
            .filter_map(|k| Some((k.clone(), lookup.news(&current, k)?)))
            .collect();
        let now = Instant::now();
        for keys in pacer.due(&wanted, now) {
            let Some((key, rest)) = keys.split_first() else {
                continue;
            };
            let answer = tokio::select! {
                () = token.cancelled() => return,
                answer = lookup.ask(key, rest) => answer,
            };
            // A warning for the first failure of a streak, a line when asking works again.
            match answer {
                Ok(answer) => {
                    if pacer.failures > 0 {
                        tracing::info!("{} works again", L::ASKING);
                    }
                    let found = lookup.store(key, answer);
                    pacer.answered(&keys, found, now);
                }
                Err(e) => {
                    if pacer.failures == 0 {
                        tracing::warn!(?keys, error = %e, "{} failed; {}; retrying", L::ASKING, L::MEANWHILE);
                        lookup.failed();
                    }
                    pacer.failures = pacer.failures.saturating_add(1);
                }
            }
        }
        lookup.settled(&current);
        let wake = pacer.wake(&wanted, now);
        tokio::select! {
            () = token.cancelled() => return,
            changed = input.changed(), if !input_gone => input_gone = changed.is_err(),
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// When each key was asked and may be asked again.
struct Pacer<K> {
    pace: Pace,
    /// [`Pace::EachKey`]: when each key may be asked again.
    waits: Backoffs<K>,
    /// [`Pace::AllKeys`]: until when each key's answer stands.
    fresh: Cache<K, ()>,
    /// The last ask of all keys.
    last: Option<Instant>,
    not_before: Instant,
    /// Asks in a row that failed.
    failures: u32,
    /// Answers in a row that found nothing.
    quiet: u32,
    /// [`Pace::OnNews`]: each wanted key's news now, and at its last ask.
    news: BTreeMap<K, u64>,
    asked_at: BTreeMap<K, u64>,
    budget: Option<Budget>,
}

impl<K: Ord + Hash + Clone> Pacer<K> {
    fn new(pace: Pace, now: Instant) -> Self {
        let (first, longest, spread, budget) = match pace {
            Pace::EachKey { first, longest, .. } => (first, longest, Duration::ZERO, None),
            Pace::AllKeys { spread, .. } => (Duration::ZERO, Duration::ZERO, spread, None),
            Pace::OnNews {
                first,
                longest,
                burst,
                per_minute,
            } => {
                let budget = Some(Budget::new(burst, per_minute));
                (first, longest, Duration::ZERO, budget)
            }
        };
        Self {
            pace,
            waits: Backoffs::new(first, longest),
            fresh: Cache::new(REMEMBERED),
            last: None,
            not_before: now + spread.mul_f64(fastrand::f64()),
            failures: 0,
            quiet: 0,
            news: BTreeMap::new(),
            asked_at: BTreeMap::new(),
            budget,
        }
    }

    /// The asks due at `now` of the keys `wanted`, each counted as asked.
    fn due(&mut self, wanted: &[K], now: Instant) -> Vec<Vec<K>> {
        match self.pace {
            Pace::EachKey { per_round, .. } => {
                let std_now = now.into_std();
                self.waits.retain(|k, _| wanted.contains(k));
                let due: Vec<K> = (wanted.iter())
                    .filter(|k| self.waits.ready(*k, std_now))
                    .take(per_round)
                    .cloned()
                    .collect();
                for k in &due {
                    self.waits.asked(k.clone(), std_now);
                }
                due.into_iter().map(|k| vec![k]).collect()
            }
            Pace::AllKeys { .. } => {
                self.fresh.retain(|k| wanted.contains(k));
                if wanted.is_empty() {
                    self.quiet = 0;
                }
                if wanted.iter().all(|k| self.fresh.fresh(k, now)) || now < self.allowed() {
                    return Vec::new();
                }
                self.last = Some(now);
                vec![wanted.to_vec()]
            }
            Pace::OnNews { .. } => self.due_on_news(wanted, now.into_std()),
        }
    }

    /// [`Pace::OnNews`]: the keys with news whose wait passed, as the budget
    /// allows. A key's wait is kept while it is wanted or pending.
    fn due_on_news(&mut self, wanted: &[K], now: std::time::Instant) -> Vec<Vec<K>> {
        let mut due = Vec::new();
        for (k, &news) in wanted.iter().filter_map(|k| Some((k, self.news.get(k)?))) {
            if self.asked_at.get(k) == Some(&news) || !self.waits.ready(k, now) {
                continue;
            }
            if !self.budget.as_mut().is_some_and(Budget::take) {
                break;
            }
            self.asked_at.insert(k.clone(), news);
            self.waits.asked(k.clone(), now);
            due.push(vec![k.clone()]);
        }
        self.waits.retain(|k, at| wanted.contains(k) || now < at);
        self.asked_at.retain(|k, _| self.waits.contains(k));
        due
    }

    /// An answer for `keys` asked at `asked`; `found`: it named something.
    fn answered(&mut self, keys: &[K], found: bool, asked: Instant) {
        self.failures = 0;
        keys.iter()
            .filter(|_| found)
            .for_each(|k| self.waits.reset(k));
        if let Pace::AllKeys {
            refresh,
            quiet_doublings,
            ..
        } = self.pace
        {
            self.quiet = if found {
                0
            } else {
                self.quiet.saturating_add(1)
            };
            let stands = refresh * 2u32.pow(self.quiet.min(quiet_doublings));
            for k in keys {
                self.fresh.put(k.clone(), (), stands, false, asked);
            }
        }
    }

    /// When the next round is due, unless the input changes first.
    fn wake(&self, wanted: &[K], now: Instant) -> Instant {
        match self.pace {
            Pace::EachKey { tick, .. } => now + tick,
            Pace::OnNews { .. } => self.wake_on_news(now),
            Pace::AllKeys { refresh, .. } if wanted.is_empty() => now + refresh,
            Pace::AllKeys { .. } => (wanted.iter())
                .map(|k| self.fresh.fresh_until(k).unwrap_or(now))
                .min()
                .unwrap_or(now)
                .max(self.allowed()),
        }
    }

    /// [`Pace::OnNews`]: when a key with news is due or, while an ask is
    /// refused, the budget allows one again; with neither, a day after `now`.
    fn wake_on_news(&self, now: Instant) -> Instant {
        let per_key = (self.asked_at.iter())
            .filter(|(k, at)| self.news.get(*k).is_some_and(|n| n != *at))
            .filter_map(|(k, _)| self.waits.next(k))
            .min();
        // Only while an ask is refused: a token that came back is no wait.
        let token = self.budget.as_ref().and_then(Budget::ready_at);
        (per_key.max(token)).map_or(now + Duration::from_hours(24), Instant::from_std)
    }

    /// [`Pace::AllKeys`]: when the gap after the last ask (or a failure) has passed.
    fn allowed(&self) -> Instant {
        let Pace::AllKeys {
            gap,
            failure_doublings,
            ..
        } = self.pace
        else {
            return self.not_before;
        };
        let doublings = self.failures.saturating_sub(1).min(failure_doublings);
        let gap = gap * 2u32.pow(if self.failures > 0 { doublings } else { 0 });
        self.last.map_or(self.not_before, |t| t + gap)
    }
}

#[cfg(test)]
#[path = "follow_tests.rs"]
mod tests;
