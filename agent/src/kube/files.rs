//! Kubernetes state from files: the JSON `kubectl get … -o json` prints, for
//! clusters the tool cannot reach and for tests.

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
};

use k8s_openapi::api::core::v1::{Node, Pod as K8sPod};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::{Value, value::RawValue};

use super::objects;
use crate::inventory::{
    CiliumConfig, CniNode, Invalid, IpPool, IpamBlock, NodeFacts, Pod, SandboxFailure, Subnet,
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
pub fn for_each_item<T: DeserializeOwned>(
    path: &Path,
    resource: &'static str,
    each: impl FnMut(usize, T),
) -> Result<()> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        cause: source,
    })?;
    for_each_item_in(&bytes, path, resource, each)
}

/// [`for_each_item`] over bytes already read; `path` names them in errors.
pub fn for_each_item_in<T: DeserializeOwned>(
    bytes: &[u8],
    path: &Path,
    resource: &'static str,
    mut each: impl FnMut(usize, T),
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
    let text = |p| v.pointer(p).and_then(Value::as_str);
    name_of(text("/metadata/namespace"), text("/metadata/name"), index)
}

/// `namespace/name`, `name`, or the object's place in the file.
fn name_of(namespace: Option<&str>, name: Option<&str>, index: usize) -> String {
    match (namespace, name) {
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
pub fn cilium_nodes(path: &Path, problems: &mut Vec<Invalid>) -> Result<Vec<CniNode>> {
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

/// The ranges of the address plan in a `kubectl get <kinds> -A -o json`
/// file: each item read by the declaration of its kind (`cni::plan`);
/// an item of another kind is named among the invalid objects, one of a
/// kind whose one object is read (ConfigMaps, Services) and not it is
/// skipped silently (`kubectl get cm -A` prints them all).
pub fn plan(path: &Path, problems: &mut Vec<Invalid>) -> Result<Vec<crate::inventory::Planned>> {
    #[derive(Default, serde::Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct Head {
        api_version: String,
        kind: String,
        metadata: crate::cni::plan::Meta,
    }
    let mut out = Vec::new();
    for_each_item(path, "address plan", |i, item: Box<RawValue>| {
        let kind: Head = serde_json::from_str(item.get()).unwrap_or_default();
        let (ns, name) = (&kind.metadata.namespace, &kind.metadata.name);
        let of = crate::cni::plan::records_of(
            &kind.api_version,
            &kind.kind,
            ns.as_deref(),
            name.as_deref(),
        );
        match of {
            Some(Some(records)) => out.extend((records.read)(item.get(), problems)),
            Some(None) => {}
            None => problems.push(Invalid {
                resource: "address plan",
                object: format!("{}[{i}]", path.display()),
                problem: format!(
                    "{} {} is no kind of the address plan ({}): skipped",
                    kind.api_version,
                    kind.kind,
                    crate::cni::plan::kinds()
                ),
            }),
        }
    })?;
    Ok(out)
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
pub fn nodes(path: &Path, problems: &mut Vec<Invalid>) -> Result<(Vec<CniNode>, Vec<NodeFacts>)> {
    let mut out = Vec::new();
    let mut facts = Vec::new();
    for_each_item(path, "nodes", |i, item| {
        let name = object_name(&item, i);
        let annotations = strings(&item, "/metadata/annotations");
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
    for_each_item(path, "configmaps", |_, item: Value| {
        if data.is_none() || item.pointer("/metadata/name") == Some(&Value::from("cilium-config")) {
            data = Some(strings(&item, "/data"));
        }
    })?;
    Ok(objects::cilium_config(&data.unwrap_or_default(), problems))
}

/// The string entries of the JSON object at `pointer` in `v` (none if it is no object).
fn strings(v: &Value, pointer: &str) -> BTreeMap<String, String> {
    let entries = v.pointer(pointer).and_then(Value::as_object).into_iter();
    (entries.flatten())
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// The objects of a file converted by `convert`; an unusable one is skipped with
/// its problem, named by position when it has no name.
fn named<L: DeserializeOwned + Resource, T>(
    path: &Path,
    resource: &'static str,
    problems: &mut Vec<Invalid>,
    convert: fn(&L, &mut Vec<Invalid>) -> Result<T, Invalid>,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for_each_item(path, resource, |i, item: L| {
        let meta = item.meta();
        let object = name_of(meta.namespace.as_deref(), meta.name.as_deref(), i);
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
#[path = "files_tests.rs"]
mod tests;
