//! Kubernetes state from files: the JSON `kubectl get … -o json` prints, for
//! clusters the tool cannot reach and for tests.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use k8s_openapi::api::core::v1::{Node, Pod as K8sPod};
use serde_json::{Value, value::RawValue};

use super::objects;
use crate::inventory::{
    CiliumConfig, CiliumNode, Invalid, IpPool, IpamBlock, NodeFacts, Pod, SandboxFailure, Subnet,
};
use crate::report::chain::Chain;

/// An input file that cannot be used at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// It could not be read.
    #[error("reading {path}: {}", Chain(.cause))]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        cause: std::io::Error,
    },
    #[error(
        "{path} is not valid JSON ({}); expected the output of `kubectl get {resource} -o json`",
        Chain(.cause)
    )]
    /// It is not JSON.
    Json {
        /// The file.
        path: PathBuf,
        /// The resource it should hold.
        resource: &'static str,
        /// serde_json's error.
        cause: serde_json::Error,
    },
    #[error(
        "{path} holds neither a List (with `items`) nor a single object; expected the output of \
         `kubectl get {resource} -o json`"
    )]
    /// It is JSON, but no List or object.
    Shape {
        /// The file.
        path: PathBuf,
        /// The resource it should hold.
        resource: &'static str,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Calls `each` with every object of a `kubectl get -o json` file (a List's
/// `items`, or one object), each a borrowed slice until parsed: one object's
/// JSON tree alive at a time (5,000 CiliumNodes are ~20 MiB as trees).
pub fn for_each_item(
    path: &Path,
    resource: &'static str,
    each: impl FnMut(usize, Value),
) -> Result<()> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        cause: source,
    })?;
    for_each_item_in(&bytes, path, resource, each)
}

/// [`for_each_item`] over bytes already read; `path` names them in errors.
pub fn for_each_item_in(
    bytes: &[u8],
    path: &Path,
    resource: &'static str,
    mut each: impl FnMut(usize, Value),
) -> Result<()> {
    let json = |source| Error::Json {
        path: path.to_owned(),
        resource,
        cause: source,
    };
    let shape = || Error::Shape {
        path: path.to_owned(),
        resource,
    };
    // The whole document first: valid JSON, nothing trailing.
    let doc: &RawValue = serde_json::from_slice(bytes).map_err(json)?;
    if !doc.get().starts_with('{') {
        return Err(shape());
    }
    // Top-level keys own their names (a few); values stay borrowed, unparsed.
    let parts: HashMap<String, &RawValue> = serde_json::from_str(doc.get()).map_err(json)?;
    match (parts.get("items"), parts.contains_key("metadata")) {
        (Some(items), _) if items.get() == "null" => Ok(()),
        (Some(items), _) if items.get().starts_with('[') => {
            let items: Vec<&RawValue> = serde_json::from_str(items.get()).map_err(json)?;
            for (i, item) in items.into_iter().enumerate() {
                each(i, serde_json::from_str(item.get()).map_err(json)?);
            }
            Ok(())
        }
        (Some(_), _) | (None, false) => Err(shape()),
        (None, true) => {
            each(0, serde_json::from_str(doc.get()).map_err(json)?);
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

/// The pods of a `kubectl get pods -A -o json` file.
pub fn pods(
    path: &Path,
    annotation_keys: &[String],
    problems: &mut Vec<Invalid>,
) -> Result<Vec<Pod>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for_each_item(path, "pods", |i, item| {
        let object = object_name(&item, i);
        if !seen.insert(object.clone()) {
            problems.push(listed_twice("pods", object));
            return;
        }
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

/// The CiliumNodes of a `kubectl get ciliumnodes -o json` file.
pub fn cilium_nodes(path: &Path, problems: &mut Vec<Invalid>) -> Result<Vec<CiliumNode>> {
    named(path, "ciliumnodes", problems, objects::cilium_node)
}

/// The Subnets of a `kubectl get subnets.kubeovn.io -o json` file.
pub fn subnets(path: &Path, problems: &mut Vec<Invalid>) -> Result<Vec<Subnet>> {
    named(path, "subnets.kubeovn.io", problems, objects::subnet)
}

/// The IPAMBlocks of a `kubectl get ipamblocks.crd.projectcalico.org -o json` file.
pub fn ipam_blocks(path: &Path, problems: &mut Vec<Invalid>) -> Result<Vec<IpamBlock>> {
    named(
        path,
        "ipamblocks.crd.projectcalico.org",
        problems,
        objects::ipam_block,
    )
}

/// The IPPools of a `kubectl get ippools.crd.projectcalico.org -o json` file.
pub fn ip_pools(path: &Path, problems: &mut Vec<Invalid>) -> Result<Vec<IpPool>> {
    named(
        path,
        "ippools.crd.projectcalico.org",
        problems,
        objects::ip_pool,
    )
}

/// The addresses Services claim, from `kubectl get services -A -o json`: the
/// whole list, so every address is covered unless a Service could not be read.
pub fn services(path: &Path) -> Result<crate::inventory::ServiceAddresses> {
    let (mut claims, mut unreadable) = (Vec::new(), Vec::new());
    for_each_item(path, "services", |_, item| {
        claims.extend(objects::service_json(&item, &mut unreadable));
    })?;
    Ok(crate::inventory::ServiceAddresses::whole(claims).with_unreadable(unreadable))
}

/// The sandbox refusals in a `kubectl get events -A -o json` file: kubelet's
/// `FailedCreatePodSandBox` Events about pods, where the CNI refused an address
/// as in use or had none left (every other Event is skipped).
pub fn sandbox_failures(path: &Path) -> Result<Vec<SandboxFailure>> {
    let mut out = Vec::new();
    for_each_item(path, "events", |_, item| {
        out.extend(objects::sandbox_failure(&item));
    })?;
    Ok(out)
}

/// The Nodes of a `kubectl get nodes -o json` file: Cilium's addresses in their
/// annotations (Nodes without them are left out), and each Node's facts.
pub fn nodes(
    path: &Path,
    problems: &mut Vec<Invalid>,
) -> Result<(Vec<CiliumNode>, Vec<NodeFacts>)> {
    let mut out = Vec::new();
    let mut facts = Vec::new();
    for_each_item(path, "nodes", |i, item| {
        let name = object_name(&item, i);
        let annotations: std::collections::BTreeMap<String, String> = item
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .map(|a| {
                a.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        out.extend(objects::node_annotations(&name, &annotations, problems));
        match serde_json::from_value::<Node>(item) {
            Ok(n) => facts.push(objects::with_addresses(
                objects::node_facts(&n, problems),
                &n,
                problems,
            )),
            Err(e) => problems.push(Invalid {
                resource: "nodes",
                object: name,
                problem: format!("not a valid Node ({e}); its spec and status skipped"),
            }),
        }
    })?;
    Ok((out, facts))
}

/// Cilium's configuration from `kubectl get cm -n kube-system cilium-config -o json`.
pub fn cilium_config(path: &Path, problems: &mut Vec<Invalid>) -> Result<CiliumConfig> {
    let mut data = None;
    for_each_item(path, "configmaps", |_, item| {
        if data.is_none() || item.pointer("/metadata/name") == Some(&Value::from("cilium-config")) {
            data = Some(
                item.get("data")
                    .and_then(Value::as_object)
                    .map(|d| {
                        d.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                            .collect()
                    })
                    .unwrap_or_default(),
            );
        }
    })?;
    Ok(objects::cilium_config(&data.unwrap_or_default(), problems))
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
    let mut seen = std::collections::HashSet::new();
    for_each_item(path, resource, |i, item| {
        let object = object_name(&item, i);
        if !seen.insert(object.clone()) {
            problems.push(listed_twice(resource, object));
            return;
        }
        match convert(&item, problems) {
            Ok(v) => out.push(v),
            Err(mut e) => {
                if e.object == "(unnamed)" {
                    e.object = object;
                }
                problems.push(e);
            }
        }
    })?;
    Ok(out)
}

/// The warning for a second copy of an object in one file (named once however
/// many copies there are: warnings are counted per distinct problem).
fn listed_twice(resource: &'static str, object: String) -> Invalid {
    Invalid {
        // `subnets.kubeovn.io` is `subnets` in warnings and metrics.
        resource: resource.split('.').next().unwrap_or(resource),
        object,
        problem: "is listed more than once in the file; the first is used".to_owned(),
    }
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
        let list = write(
            r#"{"kind":"List","items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#,
        );
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
}
