//! The fallback where the API server has no streaming lists: a list from the
//! watch cache whose body is parsed **as it arrives**, then a watch from its
//! resourceVersion — kube-runtime's list-then-watch, with the same requests.
//!
//! kube's `Api::list` reads the whole body before parsing it: at 10,000 ENI
//! CiliumNodes (~10 KB each) that is ~100 MB per agent at once, and after a
//! rollout or an API server restart every agent lists together. Here the body
//! is parsed on a blocking thread ([`super::list_body`]) and each item handed
//! to the watch through a bounded channel as soon as it is read: what an agent
//! holds is its converted objects and a few buffers, not the body nor the
//! list's items. (kube's `ObjectList` could not serve: it flattens its
//! `TypeMeta`, and serde buffers a whole map it flattens into.)

use std::{fmt::Debug, time::Duration};

use futures::{
    StreamExt as _,
    stream::{self, BoxStream},
};
use kube::{
    Api, Client, ResourceExt as _,
    api::{ListParams, WatchEvent, WatchParams},
    runtime::watcher::{Error, Event},
};
use serde::de::DeserializeOwned;

use super::list_body;

/// A watch is dead when nothing, not even a bookmark, came for its timeout
/// and this margin (kube-runtime's idle timeout).
const IDLE: Duration = Duration::from_secs(290 + 5);

type Watching<K> = BoxStream<'static, kube::Result<WatchEvent<K>>>;

/// Where the stream is.
enum State<K> {
    /// (Re)start with a list.
    List,
    /// The list's items as they are parsed, and the parse (its resourceVersion).
    Listing(Listing<K>),
    /// Listed, or the watch ended: watch from `rv`.
    Watch(String),
    Watching(String, Watching<K>),
}

/// Events as kube-runtime's `watcher` yields them (`Init`, `InitApply`…,
/// `InitDone`, then `Apply`/`Delete`), errors included: after an error the
/// stream goes on when polled again (the caller's backoff), relisting after
/// a 410 Gone.
pub(super) fn list_then_watch<K>(
    api: Api<K>,
    fields: Option<String>,
) -> BoxStream<'static, Result<Event<K>, Error>>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    stream::unfold(State::List, move |state| {
        let api = api.clone();
        let fields = fields.clone();
        async move {
            let (events, next) = step(&api, fields.as_deref(), state).await;
            Some((stream::iter(events), next))
        }
    })
    .flatten()
    .boxed()
}

type Step<K> = (Vec<Result<Event<K>, Error>>, State<K>);

async fn step<K>(api: &Api<K>, fields: Option<&str>, state: State<K>) -> Step<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    match state {
        State::List => match open(&api.clone().into_client(), api.resource_url(), fields).await {
            Ok(listing) => (vec![Ok(Event::Init)], State::Listing(listing)),
            Err(e) => (vec![Err(e)], State::List),
        },
        State::Listing(mut listing) => match tokio::time::timeout(IDLE, listing.items.recv()).await
        {
            Ok(Some(o)) => (vec![Ok(Event::InitApply(o))], State::Listing(listing)),
            Ok(None) => match finished(listing.parse).await {
                Ok(rv) => (vec![Ok(Event::InitDone)], State::Watch(rv)),
                Err(e) => (vec![Err(e)], State::List),
            },
            // A connection gone quiet mid-list: list again (the reader stops on drop).
            Err(_) => (
                vec![Err(failed(std::io::ErrorKind::TimedOut.into()))],
                State::List,
            ),
        },
        State::Watch(rv) => {
            let wp = WatchParams {
                field_selector: fields.map(str::to_owned),
                ..WatchParams::default()
            };
            match api.watch(&wp, &rv).await {
                Ok(s) => (Vec::new(), State::Watching(rv, s.boxed())),
                // The resourceVersion left the watch cache before the watch began.
                Err(kube::Error::Api(e)) if e.code == 410 => (
                    vec![Err(Error::WatchStartFailed(kube::Error::Api(e)))],
                    State::List,
                ),
                Err(e) => (vec![Err(Error::WatchStartFailed(e))], State::Watch(rv)),
            }
        }
        State::Watching(rv, mut s) => {
            let next = tokio::time::timeout(IDLE, s.next()).await.ok().flatten();
            watched(next, rv, s)
        }
    }
}

/// What one watch event does to the stream.
fn watched<K: kube::Resource>(
    next: Option<kube::Result<WatchEvent<K>>>,
    rv: String,
    s: Watching<K>,
) -> Step<K> {
    match next {
        Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => applied(o, Event::Apply, s),
        Some(Ok(WatchEvent::Deleted(o))) => applied(o, Event::Delete, s),
        Some(Ok(WatchEvent::Bookmark(b))) => {
            (Vec::new(), State::Watching(b.metadata.resource_version, s))
        }
        // 410 Gone: the resourceVersion left the watch cache; list again.
        Some(Ok(WatchEvent::Error(e))) if e.code == 410 => {
            (vec![Err(Error::WatchError(e.boxed()))], State::List)
        }
        Some(Ok(WatchEvent::Error(e))) => (
            vec![Err(Error::WatchError(e.boxed()))],
            State::Watching(rv, s),
        ),
        Some(Err(e)) => (vec![Err(Error::WatchFailed(e))], State::Watching(rv, s)),
        // Ended (its timeout) or idle past it: watch again from where it was.
        None => (Vec::new(), State::Watch(rv)),
    }
}

/// An object changed: the watch goes on from its resourceVersion (none: a
/// server bug kube-runtime answers with a relist; so do we).
fn applied<K: kube::Resource>(o: K, event: fn(K) -> Event<K>, s: Watching<K>) -> Step<K> {
    match o.resource_version() {
        Some(v) if !v.is_empty() => (vec![Ok(event(o))], State::Watching(v, s)),
        _ => (vec![Err(Error::NoResourceVersion)], State::List),
    }
}

/// A list being read: its items as they are parsed, and the parse.
struct Listing<K> {
    items: tokio::sync::mpsc::Receiver<K>,
    parse: list_body::Parse,
}

/// Starts the list from the watch cache (`resourceVersion=0`, unpaged as
/// kube's watcher sends it with `any_semantic`): its items come as parsed.
async fn open<K>(client: &Client, url: &str, fields: Option<&str>) -> Result<Listing<K>, Error>
where
    K: DeserializeOwned + Send + 'static,
{
    let (tx, items) = tokio::sync::mpsc::channel(list_body::AHEAD);
    let request = request(url, fields).map_err(Error::InitialListFailed)?;
    // A send fails only when the stream was dropped: the read stops.
    let parse = list_body::parse(client, request, move |o| tx.blocking_send(o).is_ok())
        .await
        .map_err(Error::InitialListFailed)?;
    Ok(Listing { items, parse })
}

/// The items `keep` picks of a list of `url` from the watch cache, each
/// picked as it is parsed (the same read as a watch's list: [`open`]).
pub(super) async fn list<K, T>(
    client: &Client,
    url: &str,
    fields: Option<&str>,
    mut keep: impl FnMut(K) -> Option<T>,
) -> Result<Vec<T>, Error>
where
    K: DeserializeOwned + Send + 'static,
{
    // Dropped (a cancelled lookup), the listing stops the read.
    let mut listing = open(client, url, fields).await?;
    let mut kept = Vec::new();
    while let Some(o) = listing.items.recv().await {
        kept.extend(keep(o));
    }
    finished(listing.parse).await?;
    Ok(kept)
}

/// The resourceVersion of a list read to its end.
async fn finished(parse: list_body::Parse) -> Result<String, Error> {
    (parse.finished().await.map_err(Error::InitialListFailed)?)
        .resource_version()
        .ok_or(Error::NoResourceVersion)
}

/// A list that failed on the wire (not a body that is no list).
fn failed(e: std::io::Error) -> Error {
    Error::InitialListFailed(kube::Error::Service(Box::new(e)))
}

/// The list request kube's watcher sends with `any_semantic` and no pages.
fn request(url: &str, fields: Option<&str>) -> kube::Result<http::Request<Vec<u8>>> {
    let lp = ListParams {
        field_selector: fields.map(str::to_owned),
        ..ListParams::default().match_any()
    };
    list_body::list_request(url, &lp, false)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;

    type Next = Option<kube::Result<WatchEvent<ConfigMap>>>;

    fn event(v: serde_json::Value) -> WatchEvent<ConfigMap> {
        serde_json::from_value(v).expect("a watch event")
    }

    fn cm(kind: &str, rv: &str) -> WatchEvent<ConfigMap> {
        event(
            json!({"type": kind, "object": {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "resourceVersion": rv}}}),
        )
    }

    fn status(code: u16) -> WatchEvent<ConfigMap> {
        event(
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
            "status": "Failure", "message": "m", "reason": "r", "code": code}}),
        )
    }

    /// What a step yields and where it goes, in words.
    fn told(step: Step<ConfigMap>) -> (Vec<&'static str>, String) {
        let (events, next) = step;
        let events = events
            .iter()
            .map(|e| match e {
                Ok(Event::Apply(_)) => "apply",
                Ok(Event::Delete(_)) => "delete",
                Ok(_) => "init",
                Err(Error::NoResourceVersion) => "no rv",
                Err(Error::WatchError(_)) => "watch error",
                Err(Error::WatchFailed(_)) => "watch failed",
                Err(_) => "other error",
            })
            .collect();
        let next = match next {
            State::List => "list".to_owned(),
            State::Listing(_) => "listing".to_owned(),
            State::Watch(rv) => format!("watch from {rv}"),
            State::Watching(rv, _) => format!("watching at {rv}"),
        };
        (events, next)
    }

    #[test]
    fn each_watch_event_moves_the_stream_as_kube_runtime_does() {
        let ev = |e: WatchEvent<ConfigMap>| -> Next { Some(Ok(e)) };
        let gone: Next = Some(Err(kube::Error::Service("connection reset".into())));
        for (what, next, want) in [
            (
                "added",
                ev(cm("ADDED", "5")),
                (vec!["apply"], "watching at 5"),
            ),
            (
                "modified",
                ev(cm("MODIFIED", "6")),
                (vec!["apply"], "watching at 6"),
            ),
            (
                "deleted",
                ev(cm("DELETED", "7")),
                (vec!["delete"], "watching at 7"),
            ),
            (
                "no rv: relist",
                ev(cm("ADDED", "")),
                (vec!["no rv"], "list"),
            ),
            (
                "bookmark",
                ev(cm("BOOKMARK", "9")),
                (vec![], "watching at 9"),
            ),
            (
                "410: relist",
                ev(status(410)),
                (vec!["watch error"], "list"),
            ),
            (
                "500: go on",
                ev(status(500)),
                (vec!["watch error"], "watching at 1"),
            ),
            (
                "stream error",
                gone,
                (vec!["watch failed"], "watching at 1"),
            ),
            ("ended: watch again", None, (vec![], "watch from 1")),
        ] {
            let (events, state) = told(watched(next, "1".into(), stream::empty().boxed()));
            assert_eq!((events, state.as_str()), want, "{what}");
        }
    }

    #[test]
    fn the_list_comes_whole_from_the_watch_cache() {
        let r = request("/api/v1/nodes", None).expect("request");
        let q = r.uri().query().unwrap_or_default();
        assert!(q.contains("resourceVersion=0"), "{q}");
        assert!(
            !q.contains("limit="),
            "the watch cache ignores limit for rv=0: {q}"
        );
        let r = request("/api/v1/pods", Some("spec.nodeName=n1")).expect("request");
        let q = r.uri().query().unwrap_or_default();
        assert!(q.contains("fieldSelector=spec.nodeName%3Dn1"), "{q}");
    }
}
