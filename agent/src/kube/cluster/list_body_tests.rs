//! The list reader's tests: item by item, whatever the chunks, stopped on demand.

use super::*;

/// Why a list could not be used.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// Not the JSON of a list, or cut short.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The list has no `metadata.resourceVersion` to watch from.
    #[error("the list has no metadata.resourceVersion")]
    NoResourceVersion,
}

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
    .expect("parses")
    .resource_version()
    .expect("a resourceVersion");
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
    })?
    .resource_version()
    .ok_or(BodyError::NoResourceVersion)?;
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
    let (none, rv) = all(br#"{"metadata":{"resourceVersion":"7"},"items":null}"#).expect("null");
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
    let body = br#"{"metadata":{"resourceVersion":"1","continue":"c2"},"items":[{"name":"a"},{"name":"b"},{"name":"c"}]}"#;
    let mut seen = 0;
    let r = read_list::<Item>(&body[..], |_| {
        seen += 1;
        seen < 2
    })
    .expect("a stop is no error");
    assert_eq!(seen, 2, "nothing parsed past the stop");
    assert!(r.stopped);
    // What came before the items is known.
    assert_eq!(r.meta.continue_.as_deref(), Some("c2"));
    let whole = read_list::<Item>(&body[..], |_| true).expect("parses");
    assert!(!whole.stopped);
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
        proptest::prop_assert_eq!(read.ok().and_then(BodyRead::resource_version), Some(rv));
        proptest::prop_assert_eq!(got, items);
    }
}
