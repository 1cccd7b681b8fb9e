//! Kubernetes itself: the Service range, as `ServiceCIDR` objects hold it
//! (networking.k8s.io: v1alpha1 from 1.27, v1beta1 1.31, v1 1.33; the
//! default one is named `kubernetes` and mirrors
//! `--service-cluster-ip-range`; several may overlap each other by design).

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
