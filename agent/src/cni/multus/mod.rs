//! Multus' NetworkAttachmentDefinitions: the ranges of secondary networks.
//! `spec.config` is a string holding a CNI config (one plugin or a
//! `plugins` conflist); the first plugin with an `ipam` object decides. Three
//! IPAMs write their ranges there: whereabouts, host-local and static
//! ([`ipam`]). Others (dhcp, Antrea's `ippools`, calico-ipam) keep them
//! elsewhere: nothing is read from those. A NAD without `spec.config` takes
//! its config from files on the nodes, out of reach here.

mod ipam;
mod network_status;

pub(crate) use self::network_status::secondary;

use std::collections::BTreeMap;

use serde_json::Value;

use super::plan::{Meta, Records, invalid};

/// Multus' annotation that replaces a pod's default network (its `eth0`).
pub(crate) const DEFAULT_NETWORK: &str = "v1.multus-cni.io/default-network";
use crate::inventory::{Invalid, IpRange, PlanOwner, Planned, Purpose};

/// NetworkAttachmentDefinitions (`k8s.cni.cncf.io/v1`).
pub const ATTACHMENTS: Records = Records {
    allocator: "Multus",
    group: "k8s.cni.cncf.io",
    versions: &["v1"],
    kind: "NetworkAttachmentDefinition",
    plural: "network-attachment-definitions",
    read,
    only: None,
};

/// Ranges read from one object at most: a config is written by hand, and a
/// longer list is a mistake or an attack, not a plan to check in full.
const MAX_RANGES: usize = 64;

/// The domain of a macvlan or ipvlan without `master`: the plugins take the
/// interface of the node's default route.
const DEFAULT_ROUTE: &str = "the node's default-route interface";

/// The annotation naming a device plugin's resource (SR-IOV VFs).
const RESOURCE_NAME: &str = "k8s.v1.cni.cncf.io/resourceName";

/// The lean NetworkAttachmentDefinition.
#[derive(Debug, Default, serde::Deserialize)]
struct Nad {
    #[serde(default)]
    metadata: NadMeta,
    spec: Option<Spec>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct NadMeta {
    #[serde(flatten)]
    meta: Meta,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct Spec {
    config: Option<String>,
}

/// What one object gives while it is read: the ranges so far and where they live.
struct Reader<'a> {
    object: String,
    domain: String,
    /// A macvlan or ipvlan: its pods' addresses sit on the node's interface.
    on_node_interface: bool,
    out: Vec<Planned>,
    /// Entries looked at, read or not: bounded by [`MAX_RANGES`].
    seen: usize,
    invalid: &'a mut Vec<Invalid>,
}

impl Reader<'_> {
    /// Whether one more entry may be read; the first refused one is named.
    fn room(&mut self) -> bool {
        self.seen += 1;
        if self.seen == MAX_RANGES + 1 {
            let problem = format!(
                "spec.config declares more than {MAX_RANGES} ranges: only the first \
                 {MAX_RANGES} are checked"
            );
            self.invalid
                .push(invalid(&ATTACHMENTS, self.object.clone(), problem));
        }
        self.seen <= MAX_RANGES
    }

    /// One range as the IPAM `allocator` declares it in `field`, on this
    /// object's network: the caller sets what it excludes and shares.
    fn push(
        &mut self,
        allocator: &'static str,
        field: &'static str,
        range: IpRange,
        text: String,
    ) -> &mut Planned {
        // The IPAM plugin named, and a namespace's admin may have written it.
        let owner = PlanOwner {
            allocator,
            tenant: true,
            ..ATTACHMENTS.owner(&self.object, field)
        };
        let mut p = Planned::new(owner, Purpose::Secondary, range, text);
        p.domain = Some(self.domain.clone());
        p.on_node_interface = self.on_node_interface;
        self.out.push(p);
        let last = self.out.len() - 1;
        &mut self.out[last]
    }

    /// An entry not read: the field, the value and why.
    fn bad(&mut self, field: &str, value: &str, why: &str) {
        let problem = format!("{field} {value:?} {why}: this range is not checked");
        self.invalid
            .push(invalid(&ATTACHMENTS, self.object.clone(), problem));
    }
}

/// One NetworkAttachmentDefinition's JSON as the ranges its IPAM hands out.
fn read(json: &str, invalid_out: &mut Vec<Invalid>) -> Vec<Planned> {
    let nad: Nad = match serde_json::from_str(json) {
        Ok(n) => n,
        Err(e) => {
            let problem = format!("is not a NetworkAttachmentDefinition ({e}): skipped");
            invalid_out.push(invalid(&ATTACHMENTS, name_of(json), problem));
            return Vec::new();
        }
    };
    let object = nad.metadata.meta.object();
    let Some(text) = nad.spec.and_then(|s| s.config) else {
        return Vec::new();
    };
    let Some(config) = parse_config(&text, &object, invalid_out) else {
        return Vec::new();
    };
    let Some((plugin, ipam)) = ipam_plugin(&config) else {
        return Vec::new();
    };
    let name = str_at(&config, "name").unwrap_or("");
    let resource = nad.metadata.annotations.get(RESOURCE_NAME);
    let mut r = Reader {
        object,
        domain: domain(plugin, name, resource.map(String::as_str)),
        // A master named as a VLAN sub-interface (`eth0.100`) is a network of
        // its own, apart from the node's addresses.
        on_node_interface: matches!(str_at(plugin, "type"), Some("macvlan" | "ipvlan"))
            && !str_at(plugin, "master").is_some_and(|m| m.contains('.')),
        out: Vec::new(),
        seen: 0,
        invalid: invalid_out,
    };
    match str_at(ipam, "type").unwrap_or("") {
        "whereabouts" => ipam::whereabouts(ipam, &mut r),
        "host-local" => ipam::host_local(ipam, &mut r),
        "static" => ipam::static_addresses(ipam, &mut r),
        _ => {}
    }
    r.out
}

/// The config in `text`, or why not (a template, not JSON) in the invalid
/// objects. Blank: the config is in files on the nodes.
fn parse_config(text: &str, object: &str, invalid_out: &mut Vec<Invalid>) -> Option<Value> {
    if text.trim().is_empty() {
        return None;
    }
    let problem = if text.contains("{{") || text.contains("{%") {
        "spec.config is a template ({{ … }}), not a CNI config: its ranges are not read".to_owned()
    } else {
        match serde_json::from_str::<Value>(text) {
            Ok(v) if v.is_object() => return Some(v),
            Ok(_) => "spec.config is JSON but no object: its ranges are not read".to_owned(),
            Err(e) => format!(
                "spec.config is not valid JSON ({e}): its ranges are not read, and Multus \
                 cannot use it either; fix the config"
            ),
        }
    };
    invalid_out.push(invalid(&ATTACHMENTS, object.to_owned(), problem));
    None
}

/// The first plugin with an `ipam` object (of a conflist, or the config
/// itself) and that object.
fn ipam_plugin(config: &Value) -> Option<(&Value, &Value)> {
    let plugins = match config.get("plugins").and_then(Value::as_array) {
        Some(list) => list.iter().collect(),
        None => vec![config],
    };
    plugins
        .into_iter()
        .find_map(|p| p.get("ipam").filter(|i| i.is_object()).map(|i| (p, i)))
}

/// Where the plugin's addresses meet on one L2, so that ranges in different
/// domains never collide:
/// - macvlan, ipvlan: the `master` interface (absent: the node's
///   default-route interface);
/// - bridge: the `bridge` (default `cni0`), with ` vlan <n>` when `vlan` is set;
/// - sriov, host-device: the device plugin's resource (the
///   `k8s.v1.cni.cncf.io/resourceName` annotation), else `device`, with its
///   ` vlan <n>`;
/// - ovs: the `bridge`, with its ` vlan <n>`;
/// - anything else: the plugin's `type` and the config's `name`.
///
/// Interfaces of the same name on different nodes count as one domain: a
/// secondary network is cabled alike on every node it reaches.
/// `on` and the plugin's VLAN, where it sets one (each VLAN is an L2 of its own).
fn with_vlan(on: &str, plugin: &Value) -> String {
    match plugin.get("vlan").and_then(Value::as_u64) {
        Some(vlan) if vlan != 0 => format!("{on} vlan {vlan}"),
        _ => on.to_owned(),
    }
}

fn domain(plugin: &Value, name: &str, resource: Option<&str>) -> String {
    let field = |k| str_at(plugin, k).filter(|s| !s.is_empty());
    let kind = field("type").unwrap_or("");
    let named = match kind {
        "macvlan" | "ipvlan" => Some(field("master").unwrap_or(DEFAULT_ROUTE).to_owned()),
        "bridge" => Some(with_vlan(field("bridge").unwrap_or("cni0"), plugin)),
        "sriov" | "host-device" => resource
            .filter(|r| !r.is_empty())
            .or_else(|| field("device"))
            .map(|d| with_vlan(d, plugin)),
        "ovs" => field("bridge").map(|b| with_vlan(b, plugin)),
        _ => None,
    };
    named.unwrap_or_else(|| format!("{kind} {name}").trim().to_owned())
}

/// The name of an object of the wrong shape, if its metadata can be read.
fn name_of(json: &str) -> String {
    serde_json::from_str::<Value>(json)
        .ok()
        .and_then(|v| serde_json::from_value::<Meta>(v.get("metadata")?.clone()).ok())
        .map_or_else(|| "(unreadable)".to_owned(), |m| m.object())
}

/// A string field.
fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A field as text: a string as is, another value as its JSON (so that a
/// number where an address belongs is named as written); null as absent.
fn text_at(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
