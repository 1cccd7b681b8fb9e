//! The objects the watches and the one-shot lists read, each cut to what its
//! converter reads: serde reads one object at a time straight from the
//! response's bytes into a lean struct and skips every other field unparsed,
//! and the converter reads that struct. CiliumNodes ([`cilium`]), Subnets
//! ([`subnet`]), Nodes ([`node`]), Calico's IPPools ([`ippool`]), pods
//! ([`pod`]), Events ([`event`]), kube-ovn's IP records ([`ip`]).

mod bounded;
mod cilium;
mod event;
mod ip;
mod ippool;
mod node;
mod node_listed;
mod pod;
mod routes;
mod shape;
mod subnet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

pub(in crate::kube) use self::{
    bounded::Text,
    cilium::{LeanCiliumNode, Used},
    event::LeanEvent,
    ip::LeanIp,
    ippool::{Attribute, Checked, LeanIpPool, LeanIpamBlock},
    node::{LeanNode, LeanNodeMeta},
    node_listed::LeanListedNode,
    pod::LeanPod,
    routes::{LeanCaller, LeanSlice, Service},
    shape::Shape,
    subnet::LeanSubnet,
};

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
use cluster_resource;

/// A cluster-scoped object cut to its name and `spec` as `S` (kube-ovn's
/// Subnets, Calico's IPPools and IPAMBlocks); serde skips the other fields
/// unparsed.
#[derive(Clone, Debug)]
pub struct LeanSpec<S> {
    /// Name (when a string), uid and resourceVersion only.
    pub(in crate::kube) metadata: ObjectMeta,
    /// The object there, or why not.
    pub(in crate::kube) spec: Result<S, String>,
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
struct Meta {
    name: Option<Value>,
    namespace: Option<Value>,
    uid: Option<Value>,
    resource_version: Option<Value>,
}

impl Shape<Meta> {
    /// What the watcher reads of the metadata (the key, and where to resume):
    /// the strings among name, uid and resourceVersion.
    fn object_meta(&self) -> ObjectMeta {
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
