//! A list response read as it arrives: each item handed on as soon as it is
//! parsed, never the body nor the items held together.
//!
//! A list's items parsed into a `Vec` first would hold every lean object at
//! once — at 10,000 ENI CiliumNodes ~90 MiB per agent more than their
//! converted form, which the allocator keeps after they are freed. Here each
//! item goes to its consumer (the watch's cache, through a bounded channel)
//! while the next one is still on the wire.

use std::{fmt, io::Read, marker::PhantomData};

use serde::{
    Deserialize,
    de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};

/// How much of the body is read from the connection at a time.
const READ_BUFFER: usize = 64 * 1024;

/// Why a list could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum BodyError {
    /// Not the JSON of a list, or cut short.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The list has no `metadata.resourceVersion` to watch from.
    #[error("the list has no metadata.resourceVersion")]
    NoResourceVersion,
}

/// Reads a list from `reader`, calling `each` with every item as it is
/// parsed (`false` from it stops the read: nobody wants the rest), and
/// returns the list's resourceVersion.
pub(super) fn read_list<K: DeserializeOwned>(
    reader: impl Read,
    each: impl FnMut(K) -> bool,
) -> Result<String, BodyError> {
    let reader = std::io::BufReader::with_capacity(READ_BUFFER, reader);
    let mut de = serde_json::Deserializer::from_reader(reader);
    let rv = ListSeed {
        each,
        item: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    rv.filter(|v| !v.is_empty())
        .ok_or(BodyError::NoResourceVersion)
}

/// The list object: `metadata.resourceVersion` kept, `items` handed on, the
/// rest (`kind`, `apiVersion`) skipped.
struct ListSeed<K, F> {
    each: F,
    item: PhantomData<K>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: Option<String>,
}

impl<'de, K: Deserialize<'de>, F: FnMut(K) -> bool> DeserializeSeed<'de> for ListSeed<K, F> {
    type Value = Option<String>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K: Deserialize<'de>, F: FnMut(K) -> bool> Visitor<'de> for ListSeed<K, F> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes list object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut rv = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => {
                    rv = map
                        .next_value::<Option<ListMeta>>()?
                        .and_then(|m| m.resource_version);
                }
                "items" => map.next_value_seed(Items {
                    each: &mut self.each,
                    item: PhantomData,
                })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(rv)
    }
}

/// `items`: `null` (some servers' empty list) or an array, each element to `each`.
struct Items<'a, K, F> {
    each: &'a mut F,
    item: PhantomData<K>,
}

impl<'de, K: Deserialize<'de>, F: FnMut(K) -> bool> DeserializeSeed<'de> for Items<'_, K, F> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, K: Deserialize<'de>, F: FnMut(K) -> bool> Visitor<'de> for Items<'_, K, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the list's items")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<K>()? {
            if !(self.each)(item) {
                return Err(de::Error::custom("the list's reader stopped"));
            }
        }
        Ok(())
    }
}

/// A body that ends with an error once `stop` is cancelled, whether or not
/// the connection sends anything: the parsing thread is never left waiting.
pub(super) struct Stoppable<R> {
    inner: R,
    stopped: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
}

impl<R> Stoppable<R> {
    pub(super) fn new(inner: R, stop: &tokio_util::sync::CancellationToken) -> Self {
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
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Item {
        name: String,
    }

    /// A reader that hands out one byte per read: a body as slow as it gets.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
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

    /// A trickle that tells how much of the body has been read.
    struct Counted<'a>(Trickle<'a>, std::rc::Rc<std::cell::Cell<usize>>);

    impl Read for Counted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.set(self.1.get() + n);
            Ok(n)
        }
    }

    #[test]
    fn each_item_is_handed_on_before_the_rest_of_the_body_is_read() {
        let body = br#"{"metadata":{"resourceVersion":"3"},"items":[{"name":"a"},{"name":"b"},{"name":"c"}],"kind":"List"}"#;
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut at = Vec::new();
        let rv = read_list::<Item>(Counted(Trickle(body), read.clone()), |i| {
            at.push((i.name, read.get()));
            true
        })
        .expect("parses");
        assert_eq!(rv, "3");
        let end_of = |item: &str| {
            let needle = format!(r#"{{"name":"{item}"}}"#);
            body.windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .map(|p| p + needle.len())
        };
        for (name, read) in &at {
            // Handed on once its closing brace is read, at most one byte later.
            let end = end_of(name).expect("item in body");
            assert!(
                *read <= end + 1,
                "{name} handed on after {read} bytes, ends at {end}"
            );
        }
        assert_eq!(at.len(), 3);
    }

    fn all(body: &[u8]) -> Result<(Vec<Item>, String), BodyError> {
        let mut items = Vec::new();
        let rv = read_list(Trickle(body), |i| {
            items.push(i);
            true
        })?;
        Ok((items, rv))
    }

    #[test]
    fn a_list_is_read_item_by_item_whatever_its_chunks_and_key_order() {
        let body = br#"{"apiVersion":"v1","kind":"NodeList","items":[{"name":"a","x":{"deep":[1,2]}},{"name":"b"}],
            "metadata":{"resourceVersion":"42","continue":""}}"#;
        let (items, rv) = all(body).expect("parses");
        assert_eq!(rv, "42");
        assert_eq!(
            items,
            [Item { name: "a".into() }, Item { name: "b".into() }]
        );
    }

    #[test]
    fn odd_lists_are_told_apart() {
        let (none, rv) =
            all(br#"{"metadata":{"resourceVersion":"7"},"items":null}"#).expect("null");
        assert!(none.is_empty());
        assert_eq!(rv, "7");
        assert!(matches!(
            all(br#"{"items":[]}"#),
            Err(BodyError::NoResourceVersion)
        ));
        assert!(matches!(
            all(br#"{"metadata":null,"items":[]}"#),
            Err(BodyError::NoResourceVersion)
        ));
        let cut = all(br#"{"metadata":{"resourceVersion":"7"},"items":[{"name":"#);
        assert!(matches!(cut, Err(BodyError::Json(_))), "{cut:?}");
        let trailing = all(br#"{"metadata":{"resourceVersion":"7"}} {}"#);
        assert!(matches!(trailing, Err(BodyError::Json(_))), "{trailing:?}");
        assert!(matches!(all(b"[1]"), Err(BodyError::Json(_))));
    }

    #[test]
    fn a_consumer_that_stops_ends_the_read() {
        let body = br#"{"metadata":{"resourceVersion":"1"},"items":[{"name":"a"},{"name":"b"},{"name":"c"}]}"#;
        let mut seen = 0;
        let r = read_list::<Item>(&body[..], |_| {
            seen += 1;
            seen < 2
        });
        assert!(matches!(r, Err(BodyError::Json(_))));
        assert_eq!(seen, 2, "nothing parsed past the stop");
    }

    proptest::proptest! {
        /// Whatever the items, the read hands on exactly what a whole parse holds.
        #[test]
        fn the_read_agrees_with_a_whole_parse(
            items in proptest::collection::vec(crate::kube::objects::props::any_json(), 0..6),
            rv in "[0-9]{1,6}",
        ) {
            let doc = serde_json::json!({"kind": "List", "items": items, "metadata": {"resourceVersion": rv}});
            let body = doc.to_string();
            let mut got = Vec::new();
            let read = read_list::<serde_json::Value>(Trickle(body.as_bytes()), |v| { got.push(v); true });
            proptest::prop_assert_eq!(read.ok(), Some(rv));
            proptest::prop_assert_eq!(got, items);
        }
    }
}
