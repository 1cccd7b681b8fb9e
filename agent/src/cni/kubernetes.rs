//! Kubernetes itself: the Service range, as `ServiceCIDR` objects hold it
//! (networking.k8s.io: v1alpha1 from 1.27, v1beta1 1.31, v1 1.33; the
//! default one is named `kubernetes` and mirrors
//! `--service-cluster-ip-range`; several may overlap each other by design).
//! Before ServiceCIDRs (or with the API off) the only record of the range is
//! the `kubernetes` Service in `default`: its cluster IPs are the range's
//! first address + 1, one address of it and not the range.

use serde::Deserialize;

use super::plan::{Records, ranges, spec};
use crate::inventory::{Invalid, Planned, Purpose};

/// The Service ranges.
pub const SERVICE_CIDRS: Records = Records {
    allocator: "Kubernetes",
    group: "networking.k8s.io",
    versions: &["v1", "v1beta1", "v1alpha1"],
    kind: "ServiceCIDR",
    plural: "servicecidrs",
    read,
    only: None,
};

#[derive(Deserialize)]
struct Spec {
    #[serde(default)]
    cidrs: Vec<String>,
}

fn read(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    let Some((object, spec)) = spec::<Spec>(&SERVICE_CIDRS, json, bad) else {
        return Vec::new();
    };
    let texts = spec.cidrs.into_iter();
    ranges(
        &SERVICE_CIDRS,
        &object,
        "spec.cidrs",
        Purpose::Services,
        texts,
        bad,
    )
}

/// The `kubernetes` Service: the API server's cluster IP in each family, a
/// one-address Service range (dropped by detection where any ServiceCIDR is
/// read: they hold the whole range).
pub const API_SERVICE: Records = Records {
    allocator: "Kubernetes",
    group: "",
    versions: &["v1"],
    kind: "Service",
    plural: "services",
    read: read_service,
    only: Some(("default", "kubernetes")),
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServiceSpec {
    #[serde(default)]
    cluster_ips: Vec<String>,
    #[serde(default, rename = "clusterIP")]
    cluster_ip: Option<String>,
}

fn read_service(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    let Some((object, spec)) = spec::<ServiceSpec>(&API_SERVICE, json, bad) else {
        return Vec::new();
    };
    // `clusterIPs` since 1.20; `clusterIP`, its first, before.
    let mut ips = spec.cluster_ips;
    if ips.is_empty() {
        ips.extend(spec.cluster_ip);
    }
    let texts = ips.into_iter().filter(|ip| !ip.is_empty() && ip != "None");
    ranges(
        &API_SERVICE,
        &object,
        "spec.clusterIPs",
        Purpose::Services,
        texts,
        bad,
    )
}

/// kube-apiserver's Service IP allocator ("failed to allocate a serviceIP:
/// range is full"): not a sandbox's refusal, whatever its words.
const SERVICE_ALLOCATOR: &str = "allocate a serviceip";

/// kube-apiserver's Service allocator's words are no sandbox's refusal:
/// nothing is read of them (its "range is full" is Cilium's words too).
pub(super) fn not_a_refusal(lower: &str) -> bool {
    lower.contains(SERVICE_ALLOCATOR)
}
