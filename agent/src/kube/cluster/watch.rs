//! One watch run until cancelled, with a backoff that grows while it fails:
//! kube-runtime's watcher started with a streaming list, or our own list then
//! watch ([`super::listed`]) where the server has none ([`super::initial`]).

use std::{fmt::Debug, sync::Arc, time::Duration};

use futures::{StreamExt as _, stream::BoxStream};
use kube::{
    Api,
    runtime::{
        utils::Backoff as _,
        watcher::{self, ExponentialBackoff, watcher},
    },
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{
    OnChange, Shared, Sink,
    initial::{Initial, Scope, Start},
    lock,
};

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
    let not_found = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => matches!(e, kube::Error::Api(s) if s.code == 404),
        watcher::Error::WatchError(s) => s.code == 404,
        watcher::Error::NoResourceVersion => false,
    };
    if not_found {
        Failure::NotFound
    } else {
        Failure::Error
    }
}

type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// The events of a watch of `scope`: kube-runtime's watcher with a streaming
/// list, or a list parsed as it arrives ([`super::listed`]).
fn stream<K>(api: &Api<K>, scope: &Scope, streaming: bool) -> Events<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    if streaming {
        watcher(api.clone(), Initial::config(scope)).boxed()
    } else {
        super::listed::list_then_watch(api.clone(), scope.fields())
    }
}

/// What one watch reads, and the name its failures and metrics carry.
pub(super) struct Watched<K> {
    pub(super) api: Api<K>,
    pub(super) scope: Scope,
    pub(super) source: &'static str,
}

/// Runs one watcher until `token` is cancelled, applying its events to the
/// sink's state and telling the sink when what detection reads changed.
pub(super) async fn run<K>(
    what: Watched<K>,
    sink: Sink,
    apply: impl Fn(&mut super::State, watcher::Event<K>) -> bool + Send + 'static,
    token: CancellationToken,
) where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let Watched { api, scope, source } = what;
    let Sink {
        state, on_change, ..
    } = sink;
    // Our own backoff rather than kube's default_backoff: kube's watcher yields
    // Ok(Init) before every relist attempt, which resets kube's backoff, so a
    // failing list (an absent CRD, an API outage) would retry every ~1 s forever.
    let initial = lock(&state).initial.clone();
    let Some(start) = initial.start(&token).await else {
        return;
    };
    let streaming = start != Start::List;
    Watch {
        stream: stream(&api, &scope, streaming),
        api,
        scope,
        initial,
        streaming,
        asking: start == Start::Stream { asking: true },
        source,
        state,
        on_change,
        apply,
        errors: backoff(Failure::Error),
        absent: backoff(Failure::NotFound),
        failing: false,
    }
    .run(token)
    .await;
}

/// One watcher's stream, where its events go, and its backoffs.
struct Watch<K, F> {
    stream: Events<K>,
    /// What the stream watches, to start it again with a list.
    api: Api<K>,
    scope: Scope,
    initial: Arc<Initial>,
    /// The stream asks for a streaming list.
    streaming: bool,
    /// The first to ask, in `auto`: the other watches wait for its answer.
    asking: bool,
    source: &'static str,
    state: Shared,
    on_change: OnChange,
    apply: F,
    errors: ExponentialBackoff,
    absent: ExponentialBackoff,
    /// The last request failed (warned once until one works).
    failing: bool,
}

impl<K, F> Watch<K, F>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: Fn(&mut super::State, watcher::Event<K>) -> bool,
{
    async fn run(mut self, token: CancellationToken) {
        loop {
            let item = tokio::select! {
                () = token.cancelled() => return,
                item = self.stream.next() => item,
            };
            let Some(item) = item else { return };
            match item {
                Ok(event) => {
                    if std::mem::take(&mut self.asking) {
                        // The first event of a watch the server accepted.
                        self.initial.served();
                    }
                    self.applied(event);
                }
                Err(e) if self.streaming && self.initial.refused(&e) => self.list_instead(),
                Err(e) => {
                    if std::mem::take(&mut self.asking) {
                        self.initial.unanswered();
                    }
                    let delay = self.failed(&e);
                    // The watcher does nothing until polled again: sleeping here is the backoff.
                    tokio::select! {
                        () = token.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// Starts over with a list: the API server refused the streaming list, so
    /// nothing was received; no backoff, the list is a different request.
    fn list_instead(&mut self) {
        tracing::debug!(source = self.source, "streaming list refused: listing");
        self.streaming = false;
        self.asking = false;
        self.stream = stream(&self.api, &self.scope, false);
    }

    /// Applies one event; a reconcile when what detection reads changed or
    /// the watch recovered.
    fn applied(&mut self, event: watcher::Event<K>) {
        let progress = !matches!(event, watcher::Event::Init);
        let changed = {
            let mut st = lock(&self.state);
            let changed = (self.apply)(&mut st, event);
            if progress {
                st.up.insert(self.source, true);
                st.absent.remove(self.source);
            }
            changed
        };
        if progress {
            self.errors.reset();
            self.absent.reset();
        }
        // A recovery changes the source's status; otherwise only a change of
        // what detection reads is worth a reconcile.
        if progress && self.failing {
            tracing::info!(source = self.source, "watch recovered");
            self.failing = false;
            (self.on_change)();
        } else if changed {
            (self.on_change)();
        }
    }

    /// Marks the source down after `e`, warning (and reconciling) on the
    /// first failure of a run; how long to wait before polling again.
    fn failed(&mut self, e: &watcher::Error) -> Duration {
        let source = self.source;
        let kind = failure(e);
        {
            let mut st = lock(&self.state);
            st.up.insert(source, false);
            // Absent only while the server says so: a CRD installed since,
            // then refused (RBAC) or failing, is a source down.
            if kind == Failure::NotFound {
                st.absent.insert(source);
            } else {
                st.absent.remove(source);
            }
        }
        let delay = match kind {
            Failure::Error => self.errors.next(),
            Failure::NotFound => self.absent.next(),
        }
        .unwrap_or(Duration::from_secs(30));
        if self.failing {
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
            (self.on_change)();
        }
        self.failing = true;
        delay
    }
}

impl<K, F> Drop for Watch<K, F> {
    /// A watch stopped while the others waited for its answer: one of them asks.
    fn drop(&mut self) {
        if self.asking {
            self.initial.unanswered();
        }
    }
}
