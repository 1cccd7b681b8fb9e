//! kube-ovn's Subnets as the watch holds them (what [`super::subnet`] reads),
//! and its `ips` records as the confirmations read them, one by name: the pod
//! a record is for and its addresses; serde skips the rest unparsed.
//!
//! A Subnet's status grows with its use (conditions, counters, the addresses
//! of its gateways and of the pods of some modes) and its metadata carries
//! managedFields; none of it is read. Held as `DynamicObject`s, every Subnet
//! was a JSON tree of all that, and a list (the fallback where the API server
//! has no streaming lists) held them all at once.

use serde::Deserialize;
use serde_json::Value;

use crate::cni::read::{LeanSpec, cluster_resource};

/// A kube-ovn Subnet cut to its name and the spec fields the converter
/// reads (any JSON: the converter checks their types).
pub(crate) type LeanSubnet = LeanSpec<Spec>;

cluster_resource!(LeanSubnet, "Subnet", "kubeovn.io", "v1", "subnets");

/// The fields of a Subnet's `spec` the converter reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Spec {
    pub(crate) cidr_block: Option<Value>,
    pub(crate) exclude_ips: Option<Value>,
    pub(crate) provider: Option<Value>,
    pub(crate) vpc: Option<Value>,
    pub(crate) vlan: Option<Value>,
    pub(crate) default: Option<Value>,
}

/// A kube-ovn IP record cut to its name and the spec fields read (any JSON:
/// the reader takes the strings).
pub(crate) type LeanIp = LeanSpec<IpSpec>;

cluster_resource!(LeanIp, "IP", "kubeovn.io", "v1", "ips");

/// The fields of an IP record's `spec` that name its pod and addresses.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IpSpec {
    pub(crate) pod_name: Option<Value>,
    pub(crate) namespace: Option<Value>,
    pub(crate) v4_ip_address: Option<Value>,
    pub(crate) v6_ip_address: Option<Value>,
    pub(crate) ip_address: Option<Value>,
}
