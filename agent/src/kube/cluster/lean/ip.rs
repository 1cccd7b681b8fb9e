//! kube-ovn's `ips` records as the confirmations read them, one by name: the
//! pod a record is for and its addresses; serde skips the rest unparsed.

use serde::Deserialize;
use serde_json::Value;

use super::{LeanSpec, cluster_resource};

/// A kube-ovn IP record cut to its name and the spec fields read (any JSON:
/// the reader takes the strings).
pub(in crate::kube) type LeanIp = LeanSpec<IpSpec>;

cluster_resource!(LeanIp, "IP", "kubeovn.io", "v1", "ips");

/// The fields of an IP record's `spec` that name its pod and addresses.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IpSpec {
    pub(in crate::kube) pod_name: Option<Value>,
    pub(in crate::kube) namespace: Option<Value>,
    pub(in crate::kube) v4_ip_address: Option<Value>,
    pub(in crate::kube) v6_ip_address: Option<Value>,
    pub(in crate::kube) ip_address: Option<Value>,
}
