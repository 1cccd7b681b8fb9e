//! A list response read as it arrives: each item handed on as soon as it is
//! parsed, never the body nor the items held together. The one reader of
//! every list the agent, `check` and `audit` make: a watch's initial list
//! ([`super::listed`]) and every one-shot list ([`each_item`]).
//!
//! A list's items parsed into a `Vec` first would hold every lean object at
//! once — at 10,000 ENI CiliumNodes ~90 MiB per agent more than their
//! converted form, which the allocator keeps after they are freed; kube's
//! `Api::list` holds the body too, and 50 Events of 1.4 MB messages took
//! `check` to 156 MB. Here each item goes to its consumer (through a bounded
//! channel) while the next one is still on the wire, parsed into a lean type
//! that skips every field nobody reads.

use std::{fmt, io::Read, marker::PhantomData};

use serde::{
    Deserialize,
    de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};
use tokio_util::{
    compat::FuturesAsyncReadCompatExt as _, io::SyncIoBridge, sync::CancellationToken,
};

/// How much of the body is read from the connection at a time.
const READ_BUFFER: usize = 64 * 1024;
/// Items parsed ahead of their consumer at most.
pub(super) const AHEAD: usize = 16;
/// What a metadata-only list asks for: `PartialObjectMetadataList`, else
/// (an aggregated API server that cannot) the whole objects, which the lean
/// types read the metadata of all the same. As client-go's metadata client
/// asks (`k8s.io/client-go/metadata`), without protobuf.
const METADATA_ONLY: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// What the reader's error says when its consumer stopped it.
const STOPPED: &str = "the list's reader stopped";

/// What a list says of itself: where a watch resumes, where the next page starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::kube) struct ListMeta {
    /// `metadata.resourceVersion`.
    pub(in crate::kube) resource_version: Option<String>,
    /// `metadata.continue`: the next page's token, if any.
    #[serde(default, rename = "continue")]
    pub(in crate::kube) continue_: Option<String>,
}

/// What reading one list body gave besides its items.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct BodyRead {
    /// The list's metadata, as far as it was read (it comes before the items).
    pub(super) meta: ListMeta,
    /// The consumer stopped the read before the end of the items.
    pub(super) stopped: bool,
}

impl BodyRead {
    /// The resourceVersion a watch resumes from (none: the list has no
    /// `metadata.resourceVersion` to watch from).
    pub(super) fn resource_version(self) -> Option<String> {
        self.meta.resource_version.filter(|v| !v.is_empty())
    }
}

/// Reads a list from `reader`, calling `each` with every item as it is
/// parsed (`false` from it stops the read: nobody wants the rest).
pub(super) fn read_list<K: DeserializeOwned>(
    reader: impl Read,
    each: impl FnMut(K) -> bool,
) -> Result<BodyRead, serde_json::Error> {
    let reader = std::io::BufReader::with_capacity(READ_BUFFER, reader);
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut read = BodyRead::default();
    let parsed = ListSeed {
        each,
        read: &mut read,
        item: PhantomData,
    }
    .deserialize(&mut de);
    match parsed {
        Err(_) if read.stopped => Ok(read),
        Err(e) => Err(e),
        Ok(()) => {
            de.end()?;
            Ok(read)
        }
    }
}

/// The list object: `metadata` kept, `items` handed on, the rest (`kind`,
/// `apiVersion`) skipped.
struct ListSeed<'a, K, F> {
    each: F,
    read: &'a mut BodyRead,
    item: PhantomData<K>,
}

impl<'de, K: Deserialize<'de>, F: FnMut(K) -> bool> DeserializeSeed<'de> for ListSeed<'_, K, F> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: Deserialize<'de>, F: FnMut(K) -> bool> Visitor<'de> for ListSeed<'_, K, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes list object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => {
                    self.read.meta = map.next_value::<Option<ListMeta>>()?.unwrap_or_default();
                }
                "items" => map.next_value_seed(Items {
                    each: &mut self.each,
                    stopped: &mut self.read.stopped,
                    item: PhantomData,
                })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// `items`: `null` (some servers' empty list) or an array, each element to `each`.
struct Items<'a, K, F> {
    each: &'a mut F,
    stopped: &'a mut bool,
    item: PhantomData<K>,
}

impl<'de, K: Deserialize<'de>, F: FnMut(K) -> bool> DeserializeSeed<'de> for Items<'_, K, F> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, K: Deserialize<'de>, F: FnMut(K) -> bool> Visitor<'de> for Items<'_, K, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the list's items")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<K>()? {
            if !(self.each)(item) {
                // Ends the parse here: the rest of the body is never read.
                *self.stopped = true;
                return Err(de::Error::custom(STOPPED));
            }
        }
        Ok(())
    }
}

/// A list body being parsed on a blocking thread; dropped, it stops the read
/// even while the connection is quiet.
pub(super) struct Parse {
    thread: tokio::task::JoinHandle<Result<BodyRead, serde_json::Error>>,
    stop: CancellationToken,
    _stop_on_drop: tokio_util::sync::DropGuard,
}

/// Sends the list `request` and parses its body on a blocking thread, each
/// item to `each` as it is read (`false` from it stops the read).
pub(super) async fn parse<K>(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
    each: impl FnMut(K) -> bool + Send + 'static,
) -> kube::Result<Parse>
where
    K: DeserializeOwned + Send + 'static,
{
    let body = client.request_stream(request).await?;
    let stop = CancellationToken::new();
    // The bridge blocks on the runtime it is made in: made here, read there.
    let reader = SyncIoBridge::new(Stoppable::new(body.compat(), &stop));
    let thread = tokio::task::spawn_blocking(move || read_list(reader, each));
    Ok(Parse {
        thread,
        stop: stop.clone(),
        _stop_on_drop: stop.drop_guard(),
    })
}

impl Parse {
    /// The end of the read: what the list said of itself. A body cut on the
    /// wire is an I/O error (`Service`), one that is no list a `SerdeError`.
    pub(super) async fn finished(self) -> kube::Result<BodyRead> {
        match self.thread.await {
            Ok(Ok(read)) => Ok(read),
            Ok(Err(e)) if e.is_io() => Err(kube::Error::Service(Box::new(std::io::Error::from(e)))),
            Ok(Err(e)) => Err(kube::Error::SerdeError(e)),
            Err(e) => {
                // A panic of the parse (or of a consumer): this list failed.
                tracing::error!(error = %e, "reading a list's body failed");
                Err(kube::Error::Service(Box::new(e)))
            }
        }
    }
}

/// What a one-shot list gave besides its items.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::kube) struct Listed {
    /// The list's metadata (its `continue` for the next page).
    pub(in crate::kube) meta: ListMeta,
    /// Items handed on.
    pub(in crate::kube) items: usize,
    /// More items were there than the caller's cap: the rest were not read.
    pub(in crate::kube) cut: bool,
}

/// The list request for `url` with `params`; `metadata_only` asks for
/// `PartialObjectMetadataList` where the API server serves it.
///
/// # Errors
/// The parameters are invalid (kube's checks).
pub(in crate::kube) fn list_request(
    url: &str,
    params: &kube::api::ListParams,
    metadata_only: bool,
) -> kube::Result<http::Request<Vec<u8>>> {
    let mut request = kube::core::Request::new(url)
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    if metadata_only {
        request.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(METADATA_ONLY),
        );
    }
    Ok(request)
}

/// Sends the list `request` and hands each item, parsed as `K` (a lean type:
/// the fields nobody reads are skipped unparsed), to `each` as it arrives; at
/// most `most` items: past them the read stops and the list is `cut`.
///
/// # Errors
/// The request failed, or its body was cut short or is not a list.
pub(in crate::kube) async fn each_item<K>(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
    most: usize,
    mut each: impl FnMut(K),
) -> kube::Result<Listed>
where
    K: DeserializeOwned + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel(AHEAD);
    // A send fails only once the items are no longer wanted: the read stops.
    let parse = parse(client, request, move |k| tx.blocking_send(k).is_ok()).await?;
    let mut listed = Listed::default();
    while let Some(item) = rx.recv().await {
        if listed.items == most {
            listed.cut = true;
            break;
        }
        listed.items += 1;
        each(item);
    }
    if listed.cut {
        // Enough: neither the rest of the body nor a quiet connection is waited for.
        drop(rx);
        parse.stop.cancel();
        listed.meta = parse.finished().await.map(|r| r.meta).unwrap_or_default();
        return Ok(listed);
    }
    listed.meta = parse.finished().await?.meta;
    Ok(listed)
}

/// A body that ends with an error once `stop` is cancelled, whether or not
/// the connection sends anything: the parsing thread is never left waiting.
pub(super) struct Stoppable<R> {
    inner: R,
    stopped: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl<R> Stoppable<R> {
    pub(super) fn new(inner: R, stop: &CancellationToken) -> Self {
        Self {
            inner,
            stopped: Box::pin(stop.clone().cancelled_owned()),
        }
    }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Stoppable<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.stopped.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(Err(std::io::Error::other(
                "the list's reader was dropped",
            )));
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

#[cfg(test)]
#[path = "list_body_tests.rs"]
mod tests;
