//! One kube-runtime watcher run until cancelled, with a backoff that grows
//! while it fails.

use std::{fmt::Debug, time::Duration};

use futures::StreamExt as _;
use kube::{
    Api,
    runtime::{utils::Backoff as _, watcher},
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{OnChange, Shared, lock};

/// kube-runtime's jittered exponential backoff (backon's builder). The jitter
/// adds up to the delay itself, so `min`..`max` are the lower edges:
/// `Error` waits 0.5-1 s at first, 20-40 s at most; `NotFound` (a CRD not
/// installed) 15-30 s at first, 2.5-5 minutes at most.
pub fn backoff(kind: Failure) -> kube::runtime::watcher::ExponentialBackoff {
    let (min, max) = match kind {
        Failure::Error => (Duration::from_millis(500), Duration::from_secs(20)),
        Failure::NotFound => (Duration::from_secs(15), Duration::from_secs(150)),
    };
    backon::ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .into()
}

/// Why a request failed, as far as the backoff cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Anything transient.
    Error,
    /// The resource does not exist here (its CRD is not installed).
    NotFound,
}

/// Whether a watcher error means "this resource does not exist here" (CRD not installed).
fn failure(e: &watcher::Error) -> Failure {
    let inner = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(s) if s.code == 404 => return Failure::NotFound,
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => {
            return Failure::Error;
        }
    };
    if matches!(inner, kube::Error::Api(s) if s.code == 404) {
        Failure::NotFound
    } else {
        Failure::Error
    }
}

/// Runs one watcher until `token` is cancelled, applying its events to the
/// shared state and calling `on_change` when what detection reads changed.
pub(super) async fn run<K>(
    api: Api<K>,
    config: watcher::Config,
    source: &'static str,
    state: Shared,
    on_change: OnChange,
    apply: impl Fn(&mut super::State, watcher::Event<K>) -> bool + Send + 'static,
    token: CancellationToken,
) where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    // Our own backoff rather than kube's default_backoff: the watcher yields
    // Ok(Init) before every relist attempt, which resets kube's backoff, so a
    // failing list (an absent CRD, an API outage) would retry every ~1 s forever.
    let mut stream = watcher(api, config).boxed();
    let mut errors = backoff(Failure::Error);
    let mut absent = backoff(Failure::NotFound);
    let mut failing = false;
    loop {
        let item = tokio::select! {
            () = token.cancelled() => return,
            item = stream.next() => item,
        };
        let Some(item) = item else { return };
        match item {
            Ok(event) => {
                let progress = !matches!(event, watcher::Event::Init);
                let changed = {
                    let mut st = lock(&state);
                    let changed = apply(&mut st, event);
                    if progress {
                        st.up.insert(source, true);
                        st.absent.remove(source);
                    }
                    changed
                };
                if progress {
                    errors.reset();
                    absent.reset();
                }
                // A recovery changes the source's status; otherwise only a change of
                // what detection reads is worth a reconcile.
                if progress && failing {
                    tracing::info!(source, "watch recovered");
                    failing = false;
                    on_change();
                } else if changed {
                    on_change();
                }
            }
            Err(e) => {
                let kind = failure(&e);
                {
                    let mut st = lock(&state);
                    st.up.insert(source, false);
                    if kind == Failure::NotFound {
                        st.absent.insert(source);
                    }
                }
                let delay = match kind {
                    Failure::Error => errors.next(),
                    Failure::NotFound => absent.next(),
                }
                .unwrap_or(Duration::from_secs(30));
                if failing {
                    tracing::debug!(source, error = %e, retry_in_ms = delay.as_millis(), "watch still failing");
                } else {
                    if kind == Failure::NotFound {
                        tracing::warn!(
                            source,
                            "resource not found (CRD not installed?); retrying slowly, up to every 5 minutes"
                        );
                    } else {
                        tracing::warn!(source, error = %e, "watch failed; retrying with backoff");
                    }
                    on_change();
                }
                failing = true;
                // The watcher does nothing until polled again: sleeping here is the backoff.
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}
