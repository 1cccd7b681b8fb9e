//! Antrea (antrea-io/antrea, read at fc70f2bb): its host gateway holds the
//! first address of the node's podCIDR (antrea PR#971, `gwIP :=
//! NextIP(subnetID)`); its Egress feature binds Egress IPs from an
//! ExternalIPPool on a dummy device, or on a VLAN sub-interface for a pool
//! with a VLAN (`egressDummyDevice`, `vlanInterfacePrefix` in
//! pkg/agent/ipassigner).
//!
//! Its two allocators' pools join the address plan: `IPPool`s (AntreaIPAM:
//! pods of annotated Namespaces and secondary networks), whose webhook
//! checks a pool's ranges against each other and never against another
//! pool's (pkg/controller/ipam/validate.go: two pools overlapping gave pods
//! one address twice, antrea#7306); and `ExternalIPPool`s (Egress IPs,
//! LoadBalancer IPs of ServiceExternalIP), checked against each other only
//! (pkg/controller/externalippool/validate.go), never against nodes or pods.

use serde::Deserialize;

use super::{
    Cni, Device, Holds, Name,
    plan::{Records, ranges, spec},
};
use crate::inventory::{Invalid, IpRange, Planned, Purpose, ip_text::parse_ip};

/// What puts an Egress IP on the node, for the fix of a pod on one.
const EGRESS_FIX: &str = " (Antrea binds its Egress IPs there, from an ExternalIPPool: the pool's \
                          ipRanges overlap a pod range; move them out of every pod range, then \
                          delete the pod)";

/// Antrea.
pub const ANTREA: Cni = Cni {
    name: "Antrea",
    devices: &[
        Device {
            name: Name::Is("antrea-gw0"),
            holds: Holds::Gateway,
            marks: true,
            fix: None,
            about: "the host gateway (`hostGateway`): the first address of the node's podCIDR",
        },
        Device {
            name: Name::Is("antrea-tun0"),
            holds: Holds::NoAddress,
            marks: true,
            fix: None,
            about: "the tunnel port in encap mode",
        },
        Device {
            name: Name::Is("antrea-egress0"),
            holds: Holds::Assigned,
            marks: false,
            fix: Some(EGRESS_FIX),
            about: "Egress IPs this node holds, from an ExternalIPPool",
        },
        Device {
            name: Name::Prefix("antrea-ext."),
            holds: Holds::Assigned,
            marks: false,
            fix: Some(EGRESS_FIX),
            about: "Egress IPs of an ExternalIPPool with a VLAN, on its VLAN sub-interface",
        },
    ],
};

/// AntreaIPAM's pools: `spec.ipRanges` (`{cidr}` or `{start, end}`), the
/// gateway of `spec.subnetInfo` (v1beta1) or of each range (v1alpha2)
/// handed to no pod, a VLAN its own network.
pub const IP_POOLS: Records = Records {
    allocator: "Antrea IPAM",
    group: "crd.antrea.io",
    versions: &["v1beta1", "v1alpha2"],
    kind: "IPPool",
    plural: "ippools",
    read: read_ip_pool,
    only: None,
};

/// Egress' and ServiceExternalIP's pools: `spec.ipRanges`; a VLAN of
/// `spec.subnetInfo` its own network.
pub const EXTERNAL_IP_POOLS: Records = Records {
    allocator: "Antrea",
    group: "crd.antrea.io",
    versions: &["v1beta1", "v1alpha2"],
    kind: "ExternalIPPool",
    plural: "externalippools",
    read: read_external_pool,
    only: None,
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PoolSpec {
    #[serde(default)]
    ip_ranges: Vec<IpRangeSpec>,
    subnet_info: Option<SubnetInfo>,
}

/// One of `ipRanges`; v1alpha2 wrote the subnet's fields into each.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IpRangeSpec {
    cidr: Option<String>,
    start: Option<String>,
    end: Option<String>,
    #[serde(flatten)]
    subnet: SubnetInfo,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubnetInfo {
    gateway: Option<String>,
    #[serde(default)]
    vlan: u16,
}

fn text(r: &IpRangeSpec) -> String {
    match (&r.cidr, &r.start, &r.end) {
        (Some(c), _, _) if !c.is_empty() => c.clone(),
        (_, Some(a), Some(b)) => format!("{a}-{b}"),
        (_, Some(a), None) => a.clone(),
        _ => String::new(),
    }
}

/// A pool's ranges, each on its VLAN (if any), its gateway left out.
fn pool(
    records: &'static Records,
    json: &str,
    purpose: Purpose,
    bad: &mut Vec<Invalid>,
) -> Vec<Planned> {
    let Some((object, spec)) = spec::<PoolSpec>(records, json, bad) else {
        return Vec::new();
    };
    let shared = spec.subnet_info.unwrap_or_default();
    let mut out = Vec::new();
    for r in &spec.ip_ranges {
        let subnet = if r.subnet.gateway.is_some() || r.subnet.vlan != 0 {
            &r.subnet
        } else {
            &shared
        };
        let texts = std::iter::once(text(r));
        for mut p in ranges(records, &object, "spec.ipRanges", purpose, texts, bad) {
            p.domain = (subnet.vlan != 0).then(|| format!("VLAN {}", subnet.vlan));
            if let Some(gw) = subnet.gateway.as_deref().and_then(parse_ip) {
                p.exclude.push(IpRange::of(&gw.into()));
            }
            out.push(p);
        }
    }
    out
}

fn read_ip_pool(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    pool(&IP_POOLS, json, Purpose::Secondary, bad)
}

fn read_external_pool(json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    pool(&EXTERNAL_IP_POOLS, json, Purpose::LoadBalancer, bad)
}

#[cfg(test)]
#[path = "antrea_tests.rs"]
mod tests;
