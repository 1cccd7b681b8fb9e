//! The objects in which allocators keep their ranges, declared once each:
//! which API kind to read and how one object becomes ranges of the address
//! plan. `audit` lists each kind that exists (or reads `--address-plan`
//! files) and hands every object to its declaration's `read`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::inventory::{
    Invalid, IpRange, PlanOwner, Planned, Purpose,
    ip_text::{parse_cidr, parse_ip},
};

/// An API kind that holds ranges of the address plan.
#[derive(Debug)]
pub struct Records {
    /// The allocator or component (`MetalLB`).
    pub allocator: &'static str,
    /// The API group (`metallb.io`; empty for the core group).
    pub group: &'static str,
    /// The versions to list, the preferred first: the next is tried where
    /// the API server does not serve one.
    pub versions: &'static [&'static str],
    /// The kind (`IPAddressPool`).
    pub kind: &'static str,
    /// The resource (`ipaddresspools`), as lists and errors name it.
    pub plural: &'static str,
    /// One object's JSON as ranges; what it cannot read is named in the
    /// invalid objects (the object's name, the field, what was skipped).
    pub read: fn(&str, &mut Vec<Invalid>) -> Vec<Planned>,
    /// The one object read (namespace, name), for a kind whose other objects
    /// hold no ranges (ConfigMaps): only it is asked for, and the others of a
    /// file are skipped. `None`: every object of the kind.
    pub only: Option<(&'static str, &'static str)>,
}

impl Records {
    /// Whether an object of `api_version` and `kind` is one of these.
    #[must_use]
    pub fn holds(&self, api_version: &str, kind: &str) -> bool {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        group == self.group && kind == self.kind
    }

    /// Whether the object `namespace/name` of this kind is read.
    #[must_use]
    pub fn selects(&self, namespace: Option<&str>, name: Option<&str>) -> bool {
        self.only
            .is_none_or(|(ns, n)| namespace == Some(ns) && name == Some(n))
    }

    /// Whose a range written in `object`'s `field` is: this allocator's.
    #[must_use]
    pub fn owner(&self, object: &str, field: &'static str) -> PlanOwner {
        PlanOwner {
            allocator: self.allocator,
            kind: self.kind,
            object: object.to_owned(),
            tenant: false,
            field,
        }
    }

    /// `plural.group`, as kubectl names the resource.
    #[must_use]
    pub fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// Every kind read for the address plan.
pub const RECORDS: [&Records; 11] = [
    &super::metallb::POOLS,
    &super::cilium::LB_POOLS,
    &super::cilium::POD_POOLS,
    &super::kubernetes::SERVICE_CIDRS,
    &super::kubernetes::API_SERVICE,
    &super::multus::ATTACHMENTS,
    &super::kube_vip::CONFIG,
    &super::antrea::IP_POOLS,
    &super::antrea::EXTERNAL_IP_POOLS,
    &super::ovn_kubernetes::config::CONFIG,
    &super::ovn_kubernetes::config::OPENSHIFT_CONFIG,
];

/// The kinds read, as `IPAddressPool.metallb.io, …, ConfigMap
/// kube-system/kubevip`, for messages.
#[must_use]
pub fn kinds() -> String {
    RECORDS
        .iter()
        .map(|r| match r.only {
            Some((ns, name)) => format!("{} {ns}/{name}", r.kind),
            None if r.group.is_empty() => r.kind.to_owned(),
            None => format!("{}.{}", r.kind, r.group),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The declaration that reads the object `namespace/name` of `api_version`
/// and `kind`: `None` for a kind of no declaration, `Some(None)` for an
/// object no declaration of its kind reads (another ConfigMap).
#[must_use]
pub fn records_of(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Option<Option<&'static Records>> {
    let mut of_kind = RECORDS
        .iter()
        .copied()
        .filter(|r| r.holds(api_version, kind))
        .peekable();
    of_kind.peek()?;
    Some(of_kind.find(|r| r.selects(namespace, name)))
}

/// The metadata the readers need.
#[derive(Debug, Default, Deserialize)]
pub struct Meta {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
}

impl Meta {
    /// `namespace/name` or `name`, as the invalid objects and the plan name it.
    #[must_use]
    pub fn object(&self) -> String {
        let name = self.name.as_deref().unwrap_or("(no name)");
        match &self.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_owned(),
        }
    }
}

/// A CIDR (host bits allowed, as Go's `ParseCIDR` reads it) or a `first-last`
/// range (spaces around `-` allowed, one family) as the addresses it covers.
#[must_use]
pub fn parse_entry(s: &str) -> Option<IpRange> {
    let s = s.trim();
    if let Some((a, b)) = s.split_once('-') {
        let (first, last) = (parse_ip(a.trim())?, parse_ip(b.trim())?);
        return (first.is_ipv4() == last.is_ipv4() && first <= last)
            .then_some(IpRange { first, last });
    }
    if s.contains('/') {
        return parse_cidr(s).map(|c| IpRange::of(&c.net));
    }
    parse_ip(s).map(|ip| IpRange::of(&ip.into()))
}

/// An object skipped, or a field of it, named for the invalid objects.
#[must_use]
pub fn invalid(records: &Records, object: String, problem: String) -> Invalid {
    Invalid {
        resource: records.plural,
        object,
        problem,
    }
}

/// A ConfigMap as its readers parse it: its metadata and `data` (values, not
/// strings: a hand-written map with YAML booleans reaches files unrefused).
#[derive(Deserialize)]
struct ConfigMap {
    #[serde(default)]
    metadata: Meta,
    data: Option<BTreeMap<String, Value>>,
}

/// A ConfigMap's name and `data`; `None` (named in `bad`) when unreadable.
pub fn config_map(
    records: &Records,
    json: &str,
    bad: &mut Vec<Invalid>,
) -> Option<(String, BTreeMap<String, Value>)> {
    match serde_json::from_str::<ConfigMap>(json) {
        Ok(cm) => Some((cm.metadata.object(), cm.data.unwrap_or_default())),
        Err(e) => {
            let problem = format!("skipped: {e}");
            bad.push(invalid(records, "(unreadable)".into(), problem));
            None
        }
    }
}

/// An object of the plan as its readers parse it: its metadata and `spec`.
#[derive(Deserialize)]
struct Object<S> {
    #[serde(default)]
    metadata: Meta,
    #[serde(default = "Option::default")]
    spec: Option<S>,
}

/// The object's name and its `spec`; `None` (named in `bad`) when unreadable
/// or without one.
pub fn spec<S: serde::de::DeserializeOwned>(
    records: &Records,
    json: &str,
    bad: &mut Vec<Invalid>,
) -> Option<(String, S)> {
    match serde_json::from_str::<Object<S>>(json) {
        Ok(Object {
            metadata,
            spec: Some(spec),
        }) => Some((metadata.object(), spec)),
        Ok(Object { .. }) => None,
        Err(e) => {
            // The name, where the metadata alone is readable.
            let object = serde_json::from_str::<Named>(json)
                .map_or_else(|_| "(unnamed)".to_owned(), |n| n.metadata.object());
            let problem = format!(
                "is not in the shape {} writes ({e}): its ranges are not checked",
                records.allocator
            );
            bad.push(invalid(records, object, problem));
            None
        }
    }
}

/// The ranges an object's `spec` writes in `field`, as `texts` takes them out
/// of it; none where the object has no readable `spec`.
pub fn spec_ranges<S: serde::de::DeserializeOwned, T: Iterator<Item = String>>(
    records: &'static Records,
    json: &str,
    field: &'static str,
    purpose: Purpose,
    bad: &mut Vec<Invalid>,
    texts: impl FnOnce(S) -> T,
) -> Vec<Planned> {
    let Some((object, spec)) = spec::<S>(records, json, bad) else {
        return Vec::new();
    };
    ranges(records, &object, field, purpose, texts(spec), bad)
}

/// The ranges written as `texts` in `field` of `object`.
pub fn ranges(
    records: &'static Records,
    object: &str,
    field: &'static str,
    purpose: Purpose,
    texts: impl Iterator<Item = String>,
    bad: &mut Vec<Invalid>,
) -> Vec<Planned> {
    let mut out = Vec::new();
    for text in texts {
        let Some(range) = parse_entry(&text) else {
            bad.push(invalid(
                records,
                object.to_owned(),
                format!("{field} {text:?} is no CIDR or range: it is not checked"),
            ));
            continue;
        };
        out.push(Planned::new(
            records.owner(object, field),
            purpose,
            range,
            text,
        ));
    }
    out
}

#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    metadata: Meta,
}
