//! The fallback where the API server has no streaming lists: a list from the
//! watch cache whose body is parsed **as it arrives**, then a watch from its
//! resourceVersion — kube-runtime's list-then-watch, with the same requests.
//!
//! kube's `Api::list` reads the whole body before parsing it: at 10,000 ENI
//! CiliumNodes (~10 KB each) that is ~100 MB per agent at once, and after a
//! rollout or an API server restart every agent lists together. Here the body
//! goes through `serde_json::from_reader` on a blocking thread, into the lean
//! types one item at a time: what an agent holds is its lean objects and a few
//! buffers, not the body. The list type is our own: kube's `ObjectList`
//! flattens its `TypeMeta`, and serde buffers a whole map it flattens into.

use std::{fmt::Debug, time::Duration};

use futures::{
    StreamExt as _,
    stream::{self, BoxStream},
};
use kube::{
    Api, ResourceExt as _,
    api::{ListParams, VersionMatch, WatchEvent, WatchParams},
    runtime::watcher::{Error, Event},
};
use serde::{Deserialize, de::DeserializeOwned};
use tokio_util::{compat::FuturesAsyncReadCompatExt as _, io::SyncIoBridge};

/// A watch is dead when nothing, not even a bookmark, came for its timeout
/// and this margin (kube-runtime's idle timeout).
const IDLE: Duration = Duration::from_secs(290 + 5);

/// How much of the body is read from the connection at a time.
const READ_BUFFER: usize = 64 * 1024;

/// A list as the API server sends it, minus what is not read.
#[derive(Deserialize)]
#[serde(bound = "K: DeserializeOwned")]
struct Listed<K> {
    #[serde(default)]
    metadata: ListMeta,
    /// `null` for an empty list from some servers.
    #[serde(default)]
    items: Option<Vec<K>>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: Option<String>,
}

type Watching<K> = BoxStream<'static, kube::Result<WatchEvent<K>>>;

/// Where the stream is.
enum State<K> {
    /// (Re)start with a list.
    List,
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
        State::List => match list(api, fields).await {
            Ok((items, rv)) => {
                let mut events = Vec::with_capacity(items.len() + 2);
                events.push(Ok(Event::Init));
                events.extend(items.into_iter().map(|o| Ok(Event::InitApply(o))));
                events.push(Ok(Event::InitDone));
                (events, State::Watch(rv))
            }
            Err(e) => (vec![Err(e)], State::List),
        },
        State::Watch(rv) => {
            let wp = WatchParams {
                field_selector: fields.map(str::to_owned),
                ..WatchParams::default()
            };
            match api.watch(&wp, &rv).await {
                Ok(s) => (Vec::new(), State::Watching(rv, s.boxed())),
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

/// The list from the watch cache (`resourceVersion=0`, unpaged as kube's
/// watcher sends it with `any_semantic`), parsed as it arrives.
pub(super) async fn list<K>(api: &Api<K>, fields: Option<&str>) -> Result<(Vec<K>, String), Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Send + 'static,
{
    let request = request(api.resource_url(), fields)
        .map_err(|e| Error::InitialListFailed(kube::Error::BuildRequest(e)))?;
    let client = api.clone().into_client();
    let body = client
        .request_stream(request)
        .await
        .map_err(Error::InitialListFailed)?;
    // The bridge blocks on the runtime it is made in: made here, read there.
    let reader = SyncIoBridge::new(body.compat());
    tokio::task::spawn_blocking(move || parse(reader))
        .await
        .map_err(|e| Error::InitialListFailed(kube::Error::Service(Box::new(e))))?
}

/// The list request kube's watcher sends with `any_semantic` and no pages.
fn request(
    url: &str,
    fields: Option<&str>,
) -> Result<http::Request<Vec<u8>>, kube::core::request::Error> {
    let lp = ListParams {
        field_selector: fields.map(str::to_owned),
        resource_version: Some("0".into()),
        version_match: Some(VersionMatch::NotOlderThan),
        ..ListParams::default()
    };
    kube::core::Request::new(url).list(&lp)
}

/// A list's items and resourceVersion, read from `reader` one item at a time.
fn parse<K: DeserializeOwned>(reader: impl std::io::Read) -> Result<(Vec<K>, String), Error> {
    let reader = std::io::BufReader::with_capacity(READ_BUFFER, reader);
    let parsed = serde_json::from_reader::<_, Listed<K>>(reader)
        .map_err(|e| Error::InitialListFailed(kube::Error::SerdeError(e)))?;
    match parsed.metadata.resource_version.filter(|v| !v.is_empty()) {
        Some(rv) => Ok((parsed.items.unwrap_or_default(), rv)),
        None => Err(Error::NoResourceVersion),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Item {
        name: String,
    }

    /// A reader that hands out one byte per read: a body as slow as it gets.
    struct Trickle<'a>(&'a [u8]);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some((first, rest)) = self.0.split_first() else {
                return Ok(0);
            };
            let Some(slot) = buf.first_mut() else {
                return Ok(0);
            };
            *slot = *first;
            self.0 = rest;
            Ok(1)
        }
    }

    #[test]
    fn a_list_is_read_item_by_item_whatever_its_chunks() {
        let body = br#"{"apiVersion":"v1","kind":"NodeList","items":[{"name":"a","x":{"deep":[1,2]}},{"name":"b"}],
            "metadata":{"resourceVersion":"42","continue":""}}"#;
        let (items, rv) = parse::<Item>(Trickle(body)).expect("parses");
        assert_eq!(rv, "42");
        assert_eq!(
            items,
            [Item { name: "a".into() }, Item { name: "b".into() }]
        );
    }

    #[test]
    fn odd_lists_are_told_apart() {
        let (none, rv) =
            parse::<Item>(&br#"{"metadata":{"resourceVersion":"7"},"items":null}"#[..])
                .expect("null items");
        assert!(none.is_empty());
        assert_eq!(rv, "7");
        assert!(matches!(
            parse::<Item>(&br#"{"items":[]}"#[..]),
            Err(Error::NoResourceVersion)
        ));
        let cut = parse::<Item>(&br#"{"metadata":{"resourceVersion":"7"},"items":[{"name":"#[..]);
        assert!(matches!(
            cut,
            Err(Error::InitialListFailed(kube::Error::SerdeError(_)))
        ));
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
