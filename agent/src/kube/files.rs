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

/// The objects of a `kubectl get -o json` file: a List's `items`, or one object.
pub fn read_items(path: &Path, resource: &'static str) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.to_owned(),
        resource,
        source,
    })?;
    match v {
        Value::Object(mut o) => match o.remove("items") {
            Some(Value::Array(items)) => Ok(items),
            Some(Value::Null) => Ok(Vec::new()),
            Some(_) => Err(Error::Shape {
                path: path.to_owned(),
                resource,
            }),
            None if o.contains_key("metadata") => Ok(vec![Value::Object(o)]),
            None => Err(Error::Shape {
                path: path.to_owned(),
                resource,
            }),
        },
        _ => Err(Error::Shape {
            path: path.to_owned(),
            resource,
        }),
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
    let items = read_items(path, "pods")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let object = object_name(&item, i);
        match serde_json::from_value::<K8sPod>(item) {
            Ok(p) => out.push(objects::pod(&p, annotation_keys, problems)),
            Err(e) => problems.push(Invalid {
                resource: "pods",
                object,
                problem: format!("not a valid Pod ({e}); skipped"),
            }),
        }
    }
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
    let items = read_items(path, resource)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match convert(item, problems) {
            Ok(v) => out.push(v),
            Err(mut e) => {
                if e.object == "(unnamed)" {
                    e.object = object_name(item, i);
                }
                problems.push(e);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
