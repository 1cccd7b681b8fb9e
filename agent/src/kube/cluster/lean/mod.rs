//! The objects the watches and the one-shot lists read, each cut to what its
//! converter reads: serde reads one object at a time straight from the
//! response's bytes into a lean struct and skips every other field unparsed,
//! and the converter reads that struct. CiliumNodes ([`cilium`]), Subnets
//! ([`subnet`]), Nodes ([`node`]), Calico's IPPools ([`ippool`]), pods
//! ([`pod`]), Events ([`event`]).

mod bounded;
mod cilium;
mod event;
mod ippool;
mod node;
mod node_listed;
mod pod;
mod routes;
mod shape;
mod subnet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, de};
use serde_json::Value;

pub(in crate::kube) use self::{
    cilium::{LeanCiliumNode, Used},
    event::LeanEvent,
    ippool::{LeanIpPool, LeanIpamBlock},
    node::{LeanNode, LeanNodeMeta},
    node_listed::LeanListedNode,
    pod::LeanPod,
    routes::{LeanCaller, LeanSlice},
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

/// A custom resource cut to what its converter reads, as JSON.
pub(in crate::kube) trait LeanJson {
    /// What the converter reads.
    fn json(&self) -> &Value;
}

impl<S> LeanJson for LeanSpec<S> {
    fn json(&self) -> &Value {
        &self.json
    }
}

/// A cluster-scoped object cut to its name and the fields of its `spec` that
/// `S` names (kube-ovn's Subnets, Calico's IPPools); serde skips the others
/// unparsed, and the leaves are any JSON: the converter checks their types.
#[derive(Clone, Debug, Default)]
pub(in crate::kube) struct LeanSpec<S> {
    /// Name, uid and resourceVersion only.
    pub(in crate::kube) metadata: ObjectMeta,
    /// `{"metadata": {"name"}, "spec": {…}}`: what the converter reads, as JSON.
    pub(super) json: Value,
    spec: std::marker::PhantomData<S>,
}

impl<'de, S: Deserialize<'de> + Serialize + Default> Deserialize<'de> for LeanSpec<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let lean = Shape::<SpecOnly<S>>::deserialize(d)?.or_default();
        let metadata = lean.metadata.object_meta();
        let json = serde_json::to_value(&lean).map_err(de::Error::custom)?;
        Ok(Self {
            metadata,
            json,
            spec: std::marker::PhantomData,
        })
    }
}

/// An object's metadata and `spec` as `S`, each a [`Shape`] so that a wrong
/// type parses.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(
    default,
    bound(
        deserialize = "S: Deserialize<'de> + Default",
        serialize = "S: Serialize + Default"
    )
)]
struct SpecOnly<S> {
    #[serde(skip_serializing_if = "Shape::is_absent")]
    metadata: Shape<Meta>,
    #[serde(skip_serializing_if = "Shape::is_absent")]
    spec: Shape<S>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<Value>,
    #[serde(skip_serializing)]
    namespace: Option<Value>,
    #[serde(skip_serializing)]
    uid: Option<Value>,
    #[serde(skip_serializing)]
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
