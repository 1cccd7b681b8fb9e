//! Reading `kubectl get -o json` files.

use super::*;

/// The objects of a file, collected.
fn read_items(path: &Path, resource: &'static str) -> Result<Vec<Value>> {
    let mut items = Vec::new();
    for_each_item(path, resource, |_, v| items.push(v))?;
    Ok(items)
}

/// A temporary file holding `content`, removed on drop.
fn write(content: &str) -> tempfile::TempPath {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    std::io::Write::write_all(&mut f, content.as_bytes()).expect("write temp file");
    f.into_temp_path()
}

#[test]
fn unparsable_json_names_the_file_and_the_command() {
    let f = write("{\"items\": [");
    let err = read_items(&f, "pods").expect_err("bad json").to_string();
    assert!(err.contains(&f.display().to_string()), "{err}");
    assert!(err.contains("kubectl get pods -o json"), "{err}");
}

#[test]
fn a_list_or_a_single_object_is_accepted() {
    let list =
        write(r#"{"kind":"List","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#);
    assert_eq!(read_items(&list, "ciliumnodes").expect("list").len(), 2);
    let one = write(r#"{"kind":"CiliumNode","metadata":{"name":"a"}}"#);
    assert_eq!(read_items(&one, "ciliumnodes").expect("one").len(), 1);
    let wrong = write("[1,2]");
    assert!(read_items(&wrong, "ciliumnodes").is_err());
}

/// What the streaming reader must agree with: the whole tree, then its items.
fn items_of_tree(v: Value) -> Option<Vec<Value>> {
    match v {
        Value::Object(mut o) => match o.remove("items") {
            Some(Value::Array(items)) => Some(items),
            Some(Value::Null) => Some(Vec::new()),
            None if o.contains_key("metadata") => Some(vec![Value::Object(o)]),
            Some(_) | None => None,
        },
        _ => None,
    }
}

#[test]
fn odd_documents_are_named_for_what_they_are() {
    for (doc, items) in [
        (r#"{"items":null}"#, Some(0)),
        (r#"{"kind":"List","items":[]}"#, Some(0)),
        (r#"{"items":5}"#, None),
        (r#"{"items":{"a":1}}"#, None),
        (r#""just a string""#, None),
        (r#"{"kind":"Pod"}"#, None),
    ] {
        let f = write(doc);
        let got = read_items(&f, "pods");
        match items {
            Some(n) => assert_eq!(got.expect(doc).len(), n, "{doc}"),
            None => assert!(matches!(got, Err(Error::Shape { .. })), "{doc}: {got:?}"),
        }
    }
    let f = write(r#"{"items":[]} trailing"#);
    assert!(matches!(read_items(&f, "pods"), Err(Error::Json { .. })));
}

proptest::proptest! {
    #[test]
    fn streaming_reads_what_the_whole_tree_holds(
        v in crate::kube::objects::props::any_json(),
        items in proptest::collection::vec(crate::kube::objects::props::any_json(), 0..5),
        wrap in proptest::bool::ANY,
    ) {
        let doc = if wrap { serde_json::json!({"kind": "List", "items": items}) } else { v };
        let f = write(&doc.to_string());
        let streamed = read_items(&f, "x").ok();
        proptest::prop_assert_eq!(streamed, items_of_tree(doc));
    }
}

#[test]
fn a_malformed_pod_is_skipped_by_name_and_the_rest_kept() {
    let f = write(
        r#"{"items":[
            {"metadata":{"name":"bad","namespace":"ns"},"spec":{"containers":"nope"}},
            {"metadata":{"name":"good","namespace":"ns"},"spec":{"containers":[],"nodeName":"n"},
             "status":{"podIPs":[{"ip":"10.0.0.1"}]}}
        ]}"#,
    );
    let mut problems = vec![];
    let pods = pods(&f, &[], &mut problems).expect("file reads");
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].name, "good");
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].object, "ns/bad");
}
