//! What every reader of an object from outside is made of, whichever layer
//! reads it: the lean shapes serde reads an object into ([`shape`],
//! [`bounded`], [`LeanSpec`], `cluster_resource!`), and the bounds and quotes
//! every converter names a bad field with.

pub(crate) mod bounded;
pub(crate) mod shape;

use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use self::shape::Shape;
use crate::inventory::ip_text::parse_ip;

/// Entries read of one list in an object at most; each cap named in a warning.
pub(crate) mod caps {
    /// `CiliumNode.spec.addresses` (a node has a handful).
    pub(crate) const ADDRESSES: usize = 64;
    /// CIDRs of one field (`podCIDRs`, a pool's `cidrs`, `pools.allocated`).
    pub(crate) const CIDRS: usize = 64;
    /// `CiliumNode.status.ipam.used` entries (an ENI node has hundreds).
    pub(crate) const IPAM_USED: usize = 8192;
    /// `Subnet.spec.excludeIps` entries.
    pub(crate) const EXCLUDE_IPS: usize = 4096;
    /// `Pod.status.podIPs` (one per family in a sane object).
    pub(crate) const POD_IPS: usize = 8;
    /// Parts of a comma-separated address field read at most (a dual-stack
    /// value has two).
    pub(crate) const ANNOTATION_PARTS: usize = 4;
}

/// At most `max` of `items`, the cut named in `bad`: bounded work per object
/// from outside, whatever its size.
pub(crate) fn capped<'a, T>(
    items: &'a [T],
    max: usize,
    field: &str,
    bad: &mut dyn FnMut(String),
) -> &'a [T] {
    if items.len() > max {
        bad(format!(
            "{field} has {} entries; only the first {max} are read",
            items.len()
        ));
        &items[..max]
    } else {
        items
    }
}

/// The `Err` of an object of `resource` without a name: unusable.
pub(crate) fn unnamed(resource: &'static str) -> crate::inventory::Invalid {
    crate::inventory::Invalid {
        resource,
        object: "(unnamed)".to_owned(),
        problem: "metadata.name is missing or not a string; object skipped".to_owned(),
    }
}

/// Where a converter names a bad field of `object`: each problem goes to
/// `problems` as an [`Invalid`](crate::inventory::Invalid) of `resource`.
pub(crate) fn reporter<'a>(
    problems: &'a mut Vec<crate::inventory::Invalid>,
    resource: &'static str,
    object: &'a str,
) -> impl FnMut(String) + 'a {
    move |problem| {
        problems.push(crate::inventory::Invalid {
            resource,
            object: object.to_owned(),
            problem,
        });
    }
}

/// Longest value quoted back in a warning: annotations can be megabytes.
const QUOTE_MAX: usize = 64;

/// A string quoted for a message, cut to a readable length.
pub fn quote(s: &str) -> String {
    if s.len() <= QUOTE_MAX {
        format!("{s:?}")
    } else {
        format!("{:?}… ({} bytes)", prefix(s, QUOTE_MAX), s.len())
    }
}

/// The first `max` bytes of `s` at most, cut at a character boundary.
pub(crate) fn prefix(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// `s` cut to `max` bytes, marked `…` when cut: text from outside kept bounded.
pub(crate) fn bounded(s: &str, max: usize) -> String {
    let kept = prefix(s, max);
    if kept.len() < s.len() {
        format!("{kept}…")
    } else {
        s.to_owned()
    }
}

/// An optional IP field: absent or empty is fine, anything else must parse
/// (and be of the family the field names, if it names one).
pub(crate) fn ip_field(
    v: Option<&Value>,
    field: &str,
    want_v6: Option<bool>,
    bad: &mut dyn FnMut(String),
) -> Option<IpAddr> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => {
            let problem = match parse_ip(s) {
                Some(ip) if want_v6.is_some_and(|v6| v6 != ip.is_ipv6()) => {
                    "is of the wrong address family"
                }
                Some(ip) => return Some(ip),
                None => "is not an IP address",
            };
            bad(format!("{field} {} {problem}; ignored", quote(s)));
            None
        }
        Some(other) => {
            let json = other.to_string();
            bad(format!(
                "{field} is {}, not a string; ignored",
                quote(&json)
            ));
            None
        }
    }
}

/// Implements kube's `Resource` for a cluster-scoped lean type holding its
/// `metadata`: the API path is the real kind's, the value ours. `metadata_only`:
/// ask for `PartialObjectMetadata` (kube then sends the Accept header that
/// makes the API server send only the metadata), as `PartialObjectMeta` does.
macro_rules! cluster_resource {
    ($ty:ty, $kind:literal, $group:literal, $version:literal, $plural:literal) => {
        cluster_resource!($ty, $kind, $group, $version, $plural, metadata_only: false);
    };
    ($ty:ty, $kind:literal, $group:literal, $version:literal, $plural:literal,
     metadata_only: $meta:literal) => {
        impl kube::core::Resource for $ty {
            type DynamicType = ();
            type Scope = kube::core::ClusterResourceScope;

            fn metadata_api() -> bool {
                $meta
            }

            fn kind((): &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group((): &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version((): &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural((): &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use cluster_resource;

/// A cluster-scoped object cut to its name and `spec` as `S` (kube-ovn's
/// Subnets, Calico's IPPools and IPAMBlocks); serde skips the other fields
/// unparsed.
#[derive(Clone, Debug)]
pub struct LeanSpec<S> {
    /// Name (when a string), uid and resourceVersion only.
    pub(crate) metadata: ObjectMeta,
    /// The object there, or why not.
    pub(crate) spec: Result<S, String>,
}

impl<'de, S: Deserialize<'de> + Default> Deserialize<'de> for LeanSpec<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Default, Deserialize)]
        #[serde(default, bound(deserialize = "S: Deserialize<'de> + Default"))]
        struct Wire<S> {
            metadata: Shape<Meta>,
            spec: Shape<S>,
        }
        let w = Shape::<Wire<S>>::deserialize(d)?.or_default();
        let spec = match w.spec {
            Shape::Other => Err("spec is not an object".to_owned()),
            spec => Ok(spec.or_default()),
        };
        Ok(Self {
            metadata: w.metadata.object_meta(),
            spec,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Meta {
    name: Option<Value>,
    namespace: Option<Value>,
    uid: Option<Value>,
    resource_version: Option<Value>,
}

impl Shape<Meta> {
    /// What the watcher reads of the metadata (the key, and where to resume):
    /// the strings among name, uid and resourceVersion.
    pub(crate) fn object_meta(&self) -> ObjectMeta {
        let Self::Map(meta) = self else {
            return ObjectMeta::default();
        };
        let text = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).map(str::to_owned);
        ObjectMeta {
            name: text(&meta.name),
            namespace: text(&meta.namespace),
            uid: text(&meta.uid),
            resource_version: text(&meta.resource_version),
            ..ObjectMeta::default()
        }
    }
}

/// Tests only: a file of the real-world corpus (`tests/corpus/realworld/`), read whole.
#[cfg(test)]
macro_rules! corpus {
    ($path:literal) => {
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/corpus/realworld/",
            $path
        ))
        .expect("a file of the corpus")
    };
}
#[cfg(test)]
pub(crate) use corpus;
