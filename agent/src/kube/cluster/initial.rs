//! How a watch gets its initial state without holding a list body whole.
//!
//! A **streaming list** (KEP-3157, kube-runtime's `streaming_lists()`): a watch
//! with `sendInitialEvents=true&resourceVersionMatch=NotOlderThan&
//! resourceVersion=0`, answered from the API server's watch cache with every
//! object as its own event and a BOOKMARK annotated `k8s.io/initial-events-end`
//! — one object in memory at a time, and no list request at all. kube-apiserver
//! serves it where its `WatchList` gate is on: by default in 1.32 and from 1.34
//! on (beta); off by default in 1.27–1.31 (alpha) and in 1.33 (beta, turned back
//! off); elsewhere it answers 422 Invalid (`sendInitialEvents is forbidden for
//! watch unless the WatchList feature gate is enabled`, or before 1.27
//! `resourceVersionMatch is forbidden for watch`). kube-runtime does not fall
//! back by itself: it would ask again forever.
//!
//! The **fallback** is a list from the watch cache (`resourceVersion=0`,
//! unpaged) whose body is parsed as it arrives ([`super::listed`]): the
//! agent holds the lean objects, never the body. It is not paged: the watch cache ignores `limit` for
//! `resourceVersion=0` (kube-apiserver `computeListLimit`, through 1.36), so
//! only a consistent read (no resourceVersion) pages, and its pages come from
//! etcd before 1.31 (all) and until 1.34 (all but the first): after a rollout
//! or an API server restart, thousands of agents would turn one cached list
//! each into tens of etcd reads each. A streaming list still costs the API
//! server less (no list object built per request): where the `WatchList` gate
//! can be turned on (beta since 1.32), turn it on.
//!
//! In `auto` one watch asks first while the others wait for its answer, so a
//! server that refuses is asked once per process; the answer is remembered: no
//! watch asks again, a re-watch resumes from its resourceVersion either way,
//! and only a relist (410 Gone) starts over.

use kube::runtime::watcher;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How watches get their initial state (`--initial-list`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InitialList {
    /// Streaming lists where the API server offers them, else lists (one
    /// watch asks first; its answer holds for the process).
    #[default]
    Auto,
    /// Streaming lists only: a server that refuses them is an error, retried
    /// with backoff.
    Stream,
    /// Lists only, from the watch cache.
    List,
}

/// The agent's flag for its watches.
#[derive(Debug, clap::Args)]
#[group(id = "watches")]
pub struct Args {
    /// How each watch gets its initial state: `stream` (a streaming list,
    /// `sendInitialEvents`: one object at a time, no list body held whole;
    /// kube-apiserver 1.32 and 1.34+ by default), `list` (from the watch cache,
    /// its body parsed as it arrives), or
    /// `auto`: streaming lists until the API server first refuses one, then lists.
    #[arg(long, env = "IPSHADOW_INITIAL_LIST", value_enum, default_value_t = InitialList::Auto)]
    pub initial_list: InitialList,
    /// Seconds after the agent starts within which its first lookup of who owns
    /// a range its bridge still routes falls, at random: after a rollout the
    /// nodes with such a bridge do not list the Nodes all at once.
    #[arg(long, env = "IPSHADOW_OWNER_LOOKUP_SPREAD_SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub owner_lookup_spread_seconds: u64,
}

/// What bounds a watch's initial state.
#[derive(Clone, Debug)]
pub(super) enum Scope {
    /// Everything of a kind: grows with the cluster.
    Cluster,
    /// What a field selector the watch cache indexes picks (one node's pods,
    /// one object by name).
    Selected(String),
}

impl Scope {
    /// The field selector, if any.
    pub(super) fn fields(&self) -> Option<String> {
        match self {
            Self::Cluster => None,
            Self::Selected(f) => Some(f.clone()),
        }
    }
}

/// What `auto` knows of the API server's streaming lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Known {
    /// Nothing yet: the next watch to start asks.
    #[default]
    Unknown,
    /// One watch asked; the others wait for its answer.
    Asking,
    /// It served one.
    Served,
    /// It refused one.
    Refused,
}

/// How one watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Start {
    /// With a streaming list; `asking`: the one whose answer the others await.
    Stream { asking: bool },
    /// With a list.
    List,
}

/// The process's choice of initial state, shared by every watch.
#[derive(Debug, Default)]
pub(super) struct Initial {
    mode: InitialList,
    known: watch::Sender<Known>,
}

impl Initial {
    pub(super) fn new(mode: InitialList) -> Self {
        Self {
            mode,
            known: watch::Sender::new(Known::Unknown),
        }
    }

    /// Whether a watch starting now asks for a streaming list.
    #[cfg(test)]
    fn streams(&self) -> bool {
        match self.mode {
            InitialList::Stream => true,
            InitialList::List => false,
            InitialList::Auto => *self.known.borrow() != Known::Refused,
        }
    }

    /// How a watch starts: in `auto`, the first asks and the others wait for
    /// its answer (`None` if cancelled meanwhile).
    pub(super) async fn start(&self, token: &CancellationToken) -> Option<Start> {
        match self.mode {
            InitialList::Stream => return Some(Start::Stream { asking: false }),
            InitialList::List => return Some(Start::List),
            InitialList::Auto => {}
        }
        let mut known = self.known.subscribe();
        loop {
            let asks = self.shift(&[Known::Unknown], Known::Asking);
            match (asks, *known.borrow_and_update()) {
                (true, _) => return Some(Start::Stream { asking: true }),
                (false, Known::Served) => return Some(Start::Stream { asking: false }),
                (false, Known::Refused) => return Some(Start::List),
                (false, Known::Unknown | Known::Asking) => {}
            }
            tokio::select! {
                () = token.cancelled() => return None,
                changed = known.changed() => changed.ok()?,
            }
        }
    }

    /// A streaming list was served: the others stream too.
    pub(super) fn served(&self) {
        self.shift(&[Known::Unknown, Known::Asking], Known::Served);
    }

    /// The watch that asked got no answer either way (an error, or it
    /// stopped): the next one to start asks.
    pub(super) fn unanswered(&self) {
        self.shift(&[Known::Asking], Known::Unknown);
    }

    /// What is known becomes `to` if it is one of `from`; whether it did.
    fn shift(&self, from: &[Known], to: Known) -> bool {
        self.known.send_if_modified(|k| {
            let shifts = from.contains(k);
            if shifts {
                *k = to;
            }
            shifts
        })
    }

    /// The watcher configuration for a streaming list of `scope`.
    pub(super) fn config(scope: &Scope) -> watcher::Config {
        let config = watcher::Config::default().streaming_lists();
        match scope.fields() {
            None => config,
            Some(fields) => config.fields(&fields),
        }
    }

    /// Whether `e` is the API server refusing a streaming list and, in `auto`,
    /// remembers it (logged once): the caller then starts over with a list.
    pub(super) fn refused(&self, e: &watcher::Error) -> bool {
        if self.mode != InitialList::Auto || !is_refusal(e) {
            return false;
        }
        if self.known.send_replace(Known::Refused) != Known::Refused {
            tracing::info!(
                error = %e,
                "the API server has no streaming lists (WatchList off, or before \
                 Kubernetes 1.27): listing from the watch cache instead"
            );
        }
        true
    }
}

/// A 422 Invalid about `sendInitialEvents` or `resourceVersionMatch` in answer
/// to a watch: how kube-apiserver refuses a streaming list.
fn is_refusal(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchStartFailed(kube::Error::Api(s))
        if s.code == 422
            && (s.message.contains("sendInitialEvents")
                || s.message.contains("resourceVersionMatch")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(code: u16, message: &str) -> watcher::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "reason": "Invalid", "message": message,
        }))
        .unwrap_or_default();
        watcher::Error::WatchStartFailed(kube::Error::Api(status.into()))
    }

    const GATE_OFF: &str = "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: \
        Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
    const BEFORE_1_27: &str = "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: \
        Forbidden: resourceVersionMatch is forbidden for watch";

    #[test]
    fn auto_streams_until_the_first_refusal_then_lists_for_good() {
        let initial = Initial::new(InitialList::Auto);
        assert!(initial.streams());
        assert!(!initial.refused(&refusal(500, "etcd is down")));
        assert!(
            !initial.refused(&refusal(422, "something else is invalid")),
            "only the streaming parameters' refusal counts"
        );
        assert!(initial.streams());
        assert!(initial.refused(&refusal(422, GATE_OFF)));
        assert!(!initial.streams());
        assert!(initial.refused(&refusal(422, BEFORE_1_27)));
        assert!(!initial.streams());
    }

    #[tokio::test]
    async fn one_watch_asks_and_the_others_wait_for_its_answer() {
        let token = CancellationToken::new();
        let initial = std::sync::Arc::new(Initial::new(InitialList::Auto));
        let first = initial.start(&token).await;
        assert_eq!(first, Some(Start::Stream { asking: true }));
        let waiting = tokio::spawn({
            let (initial, token) = (initial.clone(), token.clone());
            async move { initial.start(&token).await }
        });
        // No answer yet: the one that asked got an error, the next to start asks.
        initial.unanswered();
        assert_eq!(
            waiting.await.ok().flatten(),
            Some(Start::Stream { asking: true })
        );
        let waiting = tokio::spawn({
            let (initial, token) = (initial.clone(), token.clone());
            async move { initial.start(&token).await }
        });
        assert!(initial.refused(&refusal(422, GATE_OFF)));
        assert_eq!(waiting.await.ok().flatten(), Some(Start::List));
        assert_eq!(initial.start(&token).await, Some(Start::List));
        // A served streaming list elsewhere changes nothing once refused.
        initial.served();
        assert!(!initial.streams());
    }

    #[tokio::test]
    async fn once_served_every_watch_streams_and_a_waiting_one_can_be_cancelled() {
        let token = CancellationToken::new();
        let initial = std::sync::Arc::new(Initial::new(InitialList::Auto));
        assert_eq!(
            initial.start(&token).await,
            Some(Start::Stream { asking: true })
        );
        let stop = token.child_token();
        stop.cancel();
        assert_eq!(initial.start(&stop).await, None);
        initial.served();
        assert_eq!(
            initial.start(&token).await,
            Some(Start::Stream { asking: false })
        );
    }

    #[test]
    fn forced_modes_never_change() {
        let stream = Initial::new(InitialList::Stream);
        assert!(!stream.refused(&refusal(422, GATE_OFF)));
        assert!(stream.streams());
        let list = Initial::new(InitialList::List);
        assert!(!list.streams());
    }

    #[test]
    fn streaming_lists_keep_the_scope() {
        let cluster = Initial::config(&Scope::Cluster);
        assert_eq!(
            cluster.initial_list_strategy,
            watcher::InitialListStrategy::StreamingList
        );
        assert_eq!(cluster.field_selector, None);
        let one = Initial::config(&Scope::Selected("metadata.name=n1".into()));
        assert_eq!(one.field_selector.as_deref(), Some("metadata.name=n1"));
    }
}
