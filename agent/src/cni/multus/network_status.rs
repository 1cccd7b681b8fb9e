//! Multus' record of a pod's networks: the `k8s.v1.cni.cncf.io/network-status`
//! annotation (`networks-status` before Multus 3.7), a JSON list of
//! `{name, interface, ips, mac, default, dns}`. The default network's entry
//! is the pod's primary address (in `status.podIPs`); the others are its
//! secondary addresses. Bounded: at most [`ENTRIES`] networks and
//! [`IPS`] addresses each are read.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::inventory::{SecondaryIp, ip_text::parse_ip, text::cleaned};

/// The annotation, and its name before Multus 3.7.
const KEYS: [&str; 2] = [
    "k8s.v1.cni.cncf.io/network-status",
    "k8s.v1.cni.cncf.io/networks-status",
];
/// Networks read per pod.
const ENTRIES: usize = 16;
/// Addresses read per network.
const IPS: usize = 8;

#[derive(Default, Deserialize)]
#[serde(default)]
struct Entry {
    name: String,
    interface: Option<String>,
    ips: Vec<String>,
    default: bool,
}

/// The secondary addresses `annotations` record for a pod of `namespace`;
/// what cannot be read is named through `bad`.
pub(crate) fn secondary(
    annotations: &BTreeMap<String, String>,
    namespace: &str,
    bad: &mut dyn FnMut(String),
) -> Vec<SecondaryIp> {
    let Some((key, value)) = KEYS
        .iter()
        .find_map(|k| annotations.get(*k).map(|v| (*k, v)))
    else {
        return Vec::new();
    };
    let entries: Vec<Entry> = match serde_json::from_str(value) {
        Ok(e) => e,
        Err(e) => {
            bad(format!(
                "annotation {key} is not Multus' list of networks ({e}): its secondary addresses \
                 are not checked"
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for e in entries.iter().filter(|e| !e.default).take(ENTRIES) {
        // A network of the pod's own namespace is named without it.
        let network = if e.name.contains('/') {
            cleaned(&e.name)
        } else {
            cleaned(&format!("{namespace}/{}", e.name))
        };
        for text in e.ips.iter().take(IPS) {
            match parse_ip(text) {
                Some(ip) => out.push(SecondaryIp {
                    network: network.clone(),
                    interface: e.interface.as_deref().map(cleaned),
                    ip,
                }),
                None => bad(format!(
                    "annotation {key}: {text:?} of network {network} is no address: not checked"
                )),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real values of tests/corpus/realworld/multus/annotation-values-network-status.json.
    #[test]
    fn multus_real_records_give_the_secondary_addresses_only() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/corpus/realworld/multus/annotation-values-network-status.json"
        );
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("corpus")).expect("json");
        let mut seen = Vec::new();
        for v in doc["values"].as_array().expect("values") {
            let key = v["annotation"].as_str().expect("key");
            if !KEYS.contains(&key) {
                continue;
            }
            let annotations = BTreeMap::from([(
                key.to_owned(),
                v["value"].as_str().expect("value").to_owned(),
            )]);
            let mut problems = Vec::new();
            let got = secondary(&annotations, "default", &mut |p| problems.push(p));
            assert!(problems.is_empty(), "{problems:?}");
            seen.extend(
                got.into_iter()
                    .map(|s| (s.network, s.interface, s.ip.to_string())),
            );
        }
        assert!(seen.contains(&(
            "default/macvlan-conf".to_owned(),
            Some("net1".to_owned()),
            "192.168.1.205".to_owned()
        )));
        assert!(seen.contains(&(
            "harvester-system/storagenetwork-58mfl".to_owned(),
            Some("lhnet1".to_owned()),
            "192.168.50.4".to_owned()
        )));
        // No default network's address.
        assert!(
            !seen
                .iter()
                .any(|(_, _, ip)| ip == "10.244.1.73" || ip == "10.52.0.67")
        );
    }

    #[test]
    fn a_record_that_is_not_a_list_of_networks_is_named_and_read_as_none() {
        let annotations = BTreeMap::from([(KEYS[0].to_owned(), "{\"name\": 1}".to_owned())]);
        let mut problems = Vec::new();
        assert!(secondary(&annotations, "ns", &mut |p| problems.push(p)).is_empty());
        assert_eq!(problems.len(), 1);
        let bad_ip = BTreeMap::from([(
            KEYS[1].to_owned(),
            r#"[{"name":"a","interface":"net1","ips":["10.0.0.1","x"]}]"#.to_owned(),
        )]);
        let mut problems = Vec::new();
        let got = secondary(&bad_ip, "ns", &mut |p| problems.push(p));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].network, "ns/a");
        assert_eq!(problems.len(), 1);
    }
}
