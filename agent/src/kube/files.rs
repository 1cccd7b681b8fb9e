//! Kubernetes state from files: the JSON `kubectl get … -o json` prints, for
//! clusters the tool cannot reach and for tests.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod as K8sPod;
use serde_json::Value;

use super::objects::{self, Invalid};
use crate::inventory::{CiliumNode, Pod, Subnet};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not valid JSON ({source}); expected the output of `kubectl get {resource} -o json`"
    )]
    Json {
        path: PathBuf,
        resource: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path} holds neither a List (with `items`) nor a single object; expected the output of \
         `kubectl get {resource} -o json`"
    )]
    Shape {
        path: PathBuf,
        resource: &'static str,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Calls `each` with every object of a `kubectl get -o json` file (a List's
/// `items`, or one object) while it is being parsed: one object's JSON tree is
/// alive at a time, not the whole file's (5,000 CiliumNodes are ~20 MiB as
/// trees, and the allocator keeps what a peak took).
pub fn for_each_item(
    path: &Path,
    resource: &'static str,
    each: impl FnMut(usize, Value),
) -> Result<()> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    for_each_item_in(&bytes, path, resource, each)
}

/// [`for_each_item`] over bytes already read; `path` names them in errors.
pub fn for_each_item_in(
    bytes: &[u8],
    path: &Path,
    resource: &'static str,
    each: impl FnMut(usize, Value),
) -> Result<()> {
    let mut shape_ok = true;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let found = serde::de::DeserializeSeed::deserialize(
        stream::Document {
            each,
            shape_ok: &mut shape_ok,
        },
        &mut de,
    )
    .and_then(|found| de.end().map(|()| found))
    .map_err(|source| Error::Json {
        path: path.to_owned(),
        resource,
        source,
    })?;
    if shape_ok && found {
        Ok(())
    } else {
        Err(Error::Shape {
            path: path.to_owned(),
            resource,
        })
    }
}

/// serde visitors for [`for_each_item`].
mod stream {
    use std::fmt;

    use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Value};

    /// The whole document; yields whether it held items or was one object.
    pub struct Document<'a, F> {
        pub each: F,
        pub shape_ok: &'a mut bool,
    }

    impl<'de, F: FnMut(usize, Value)> DeserializeSeed<'de> for Document<'_, F> {
        type Value = bool;
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de, F: FnMut(usize, Value)> Visitor<'de> for Document<'_, F> {
        type Value = bool;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a Kubernetes List or object")
        }

        fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<bool, A::Error> {
            // Everything but `items` is kept, for the single-object form.
            let mut rest = Map::new();
            let mut listed = false;
            while let Some(key) = map.next_key::<String>()? {
                if key == "items" {
                    map.next_value_seed(Items {
                        each: &mut self.each,
                        shape_ok: self.shape_ok,
                    })?;
                    listed = true;
                } else {
                    let v: Value = map.next_value()?;
                    rest.insert(key, v);
                }
            }
            if listed {
                return Ok(true);
            }
            if rest.contains_key("metadata") {
                (self.each)(0, Value::Object(rest));
                return Ok(true);
            }
            Ok(false)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(false)
        }

        fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }
    }

    /// A List's `items`: each element handed over as soon as it is parsed.
    struct Items<'a, F> {
        each: &'a mut F,
        shape_ok: &'a mut bool,
    }

    impl<'de, F: FnMut(usize, Value)> DeserializeSeed<'de> for Items<'_, F> {
        type Value = ();
        fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de, F: FnMut(usize, Value)> Visitor<'de> for Items<'_, F> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of objects")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut i = 0;
            while let Some(v) = seq.next_element::<Value>()? {
                (self.each)(i, v);
                i += 1;
            }
            Ok(())
        }

        /// `"items": null`: an empty List.
        fn visit_unit<E: de::Error>(self) -> Result<(), E> {
            Ok(())
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            *self.shape_ok = false;
            Ok(())
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
            *self.shape_ok = false;
            Ok(())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
            *self.shape_ok = false;
            Ok(())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
            *self.shape_ok = false;
            Ok(())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
            *self.shape_ok = false;
            Ok(())
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
            *self.shape_ok = false;
            Ok(())
        }
    }
}

fn object_name(v: &Value, index: usize) -> String {
    let name = v.pointer("/metadata/name").and_then(Value::as_str);
    match (
        v.pointer("/metadata/namespace").and_then(Value::as_str),
        name,
    ) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        (None, Some(n)) => n.to_owned(),
        _ => format!("items[{index}]"),
    }
}

pub fn pods(
    path: &Path,
    annotation_keys: &[String],
    problems: &mut Vec<Invalid>,
) -> Result<Vec<Pod>> {
    let mut out = Vec::new();
    for_each_item(path, "pods", |i, item| {
        let object = object_name(&item, i);
        match serde_json::from_value::<K8sPod>(item) {
            Ok(p) => out.push(objects::pod(&p, annotation_keys, problems)),
            Err(e) => problems.push(Invalid {
                resource: "pods",
                object,
                problem: format!("not a valid Pod ({e}); skipped"),
            }),
        }
    })?;
    Ok(out)
}

pub fn cilium_nodes(path: &Path, problems: &mut Vec<Invalid>) -> Result<Vec<CiliumNode>> {
    named(path, "ciliumnodes", problems, objects::cilium_node)
}

pub fn subnets(path: &Path, problems: &mut Vec<Invalid>) -> Result<Vec<Subnet>> {
    named(path, "subnets.kubeovn.io", problems, objects::subnet)
}

/// The objects of a file converted by `convert`; an unusable one is skipped with
/// its problem, named by position when it has no name.
fn named<T>(
    path: &Path,
    resource: &'static str,
    problems: &mut Vec<Invalid>,
    convert: fn(&Value, &mut Vec<Invalid>) -> Result<T, Invalid>,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for_each_item(path, resource, |i, item| match convert(&item, problems) {
        Ok(v) => out.push(v),
        Err(mut e) => {
            if e.object == "(unnamed)" {
                e.object = object_name(&item, i);
            }
            problems.push(e);
        }
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The objects of a file, collected.
    fn read_items(path: &Path, resource: &'static str) -> Result<Vec<Value>> {
        let mut items = Vec::new();
        for_each_item(path, resource, |_, v| items.push(v))?;
        Ok(items)
    }

    fn write(content: &str) -> tempfile_path::TempPath {
        tempfile_path::TempPath::with(content)
    }

    /// A file under the target dir's tmp, removed on drop (no extra crate).
    mod tempfile_path {
        use std::path::PathBuf;

        pub struct TempPath(pub PathBuf);
        impl TempPath {
            pub fn with(content: &str) -> Self {
                static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let p = std::env::temp_dir()
                    .join(format!("ipshadow-files-{}-{n}.json", std::process::id()));
                std::fs::write(&p, content).expect("write temp file");
                Self(p)
            }
        }
        impl Drop for TempPath {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn unparsable_json_names_the_file_and_the_command() {
        let f = write("{\"items\": [");
        let err = read_items(&f.0, "pods").expect_err("bad json").to_string();
        assert!(err.contains(&f.0.display().to_string()), "{err}");
        assert!(err.contains("kubectl get pods -o json"), "{err}");
    }

    #[test]
    fn a_list_or_a_single_object_is_accepted() {
        let list = write(
            r#"{"kind":"List","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#,
        );
        assert_eq!(read_items(&list.0, "ciliumnodes").expect("list").len(), 2);
        let one = write(r#"{"kind":"CiliumNode","metadata":{"name":"a"}}"#);
        assert_eq!(read_items(&one.0, "ciliumnodes").expect("one").len(), 1);
        let wrong = write("[1,2]");
        assert!(read_items(&wrong.0, "ciliumnodes").is_err());
    }

    /// What the streaming reader must agree with: the whole tree, then its items.
    fn items_of_tree(v: Value) -> Option<Vec<Value>> {
        match v {
            Value::Object(mut o) => match o.remove("items") {
                Some(Value::Array(items)) => Some(items),
                Some(Value::Null) => Some(Vec::new()),
                Some(_) => None,
                None if o.contains_key("metadata") => Some(vec![Value::Object(o)]),
                None => None,
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
            let got = read_items(&f.0, "pods");
            match items {
                Some(n) => assert_eq!(got.expect(doc).len(), n, "{doc}"),
                None => assert!(matches!(got, Err(Error::Shape { .. })), "{doc}: {got:?}"),
            }
        }
        let f = write(r#"{"items":[]} trailing"#);
        assert!(matches!(read_items(&f.0, "pods"), Err(Error::Json { .. })));
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
            let streamed = read_items(&f.0, "x").ok();
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
        let pods = pods(&f.0, &[], &mut problems).expect("file reads");
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].name, "good");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].object, "ns/bad");
    }
}
