//! Kubernetes itself: the Service range, as `ServiceCIDR` objects hold it
//! (networking.k8s.io: v1alpha1 from 1.27, v1beta1 1.31, v1 1.33; the
//! default one is named `kubernetes` and mirrors
//! `--service-cluster-ip-range`; several may overlap each other by design).
//! Before ServiceCIDRs (or with the API off) the only record of the range is
//! the `kubernetes` Service in `default`: its cluster IPs are the range's
//! first address + 1, one address of it and not the range. `audit` takes
//! them from its one list of the Services; files hold the Service itself.

use std::net::IpAddr;

use serde::Deserialize;

use super::plan::{Records, ranges, spec_ranges};
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
    let texts = |s: Spec| s.cidrs.into_iter();
    spec_ranges(
        &SERVICE_CIDRS,
        json,
        "spec.cidrs",
        Purpose::Services,
        bad,
        texts,
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
    only: Some(API_SERVICE_NAME),
};

/// The `kubernetes` Service's namespace and name.
pub const API_SERVICE_NAME: (&str, &str) = ("default", "kubernetes");

/// The `kubernetes` Service's cluster IPs as [`API_SERVICE`] reads them, from
/// a list of every Service: `audit` lists them all already, and asks for this
/// one by name only from files.
#[must_use]
pub fn api_service_ips(ips: &[IpAddr]) -> Vec<Planned> {
    let (namespace, name) = API_SERVICE_NAME;
    let texts = ips.iter().map(IpAddr::to_string);
    ranges(
        &API_SERVICE,
        &format!("{namespace}/{name}"),
        "spec.clusterIPs",
        Purpose::Services,
        texts,
        &mut Vec::new(),
    )
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServiceSpec {
    // `clusterIPs`, not camelCase's `clusterIps`: both families.
    #[serde(default, rename = "clusterIPs")]
    cluster_ips: Vec<String>,
    #[serde(default, rename = "clusterIP")]
    cluster_ip: Option<String>,
}

fn read_service(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    let texts = |spec: ServiceSpec| {
        // `clusterIPs` since 1.20; `clusterIP`, its first, before.
        let mut ips = spec.cluster_ips;
        if ips.is_empty() {
            ips.extend(spec.cluster_ip);
        }
        ips.into_iter().filter(|ip| !ip.is_empty() && ip != "None")
    };
    let field = "spec.clusterIPs";
    spec_ranges(&API_SERVICE, json, field, Purpose::Services, bad, texts)
}

/// kube-apiserver's Service IP allocator ("failed to allocate a serviceIP:
/// range is full"): not a sandbox's refusal, whatever its words.
const SERVICE_ALLOCATOR: &str = "allocate a serviceip";

/// kube-apiserver's Service allocator's words are no sandbox's refusal:
/// nothing is read of them (its "range is full" is Cilium's words too).
pub(super) fn not_a_refusal(lower: &str) -> bool {
    lower.contains(SERVICE_ALLOCATOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_services_ips_from_the_services_list_are_the_ranges_its_reader_gives() {
        let json = r#"{"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1", "fd00:10:96::1"]}}"#;
        let read = (API_SERVICE.read)(json, &mut Vec::new());
        let ips = ["10.96.0.1", "fd00:10:96::1"].map(|s| s.parse().expect("ip"));
        assert_eq!(read.len(), 2);
        assert_eq!(api_service_ips(&ips), read);
    }
}
