//! ovn-kubernetes' config file where the cluster keeps it: the ConfigMap
//! `ovnkube-config`, an INI file in a data key (`ovn_k8s.conf` in
//! ovn-kubernetes' own README, `ovnkube.conf` as OpenShift's network operator
//! renders it in `openshift-ovn-kubernetes`). Its keys are ovnkube's
//! (go-controller/pkg/config/config.go `gcfg` tags, read at 6c366bb4;
//! sections and keys case-insensitive): `[default] cluster-subnets`, the pod
//! network (`10.128.0.0/14/23`: a CIDR and each node's prefix length, comma
//! separated); `[gateway] v4-join-subnet`, `v6-join-subnet`,
//! `v4-masquerade-subnet`, `v6-masquerade-subnet`; `[clustermanager]
//! v4-transit-switch-subnet`, `v6-transit-switch-subnet` (`v4-transit-subnet`
//! since 2025-10). OpenShift writes the join subnet only where it is not the
//! default. Upstream's own manifests pass these as flags instead, so only
//! what a ConfigMap holds is read, and each ConfigMap by name alone.

use super::{Internal, JOIN, MASQUERADE, TRANSIT, shared};
use crate::cni::plan::{Records, config_map, invalid, parse_entry};
use crate::inventory::{Invalid, Planned, Purpose};

/// The ConfigMap of ovn-kubernetes' README (namespace `ovn-kubernetes`).
pub const CONFIG: Records = Records {
    allocator: "ovn-kubernetes",
    group: "",
    versions: &["v1"],
    kind: "ConfigMap",
    plural: "configmaps",
    read: |json, bad| read(&CONFIG, json, bad),
    only: Some(("ovn-kubernetes", "ovnkube-config")),
};

/// The ConfigMap OpenShift's network operator renders.
pub const OPENSHIFT_CONFIG: Records = Records {
    read: |json, bad| read(&OPENSHIFT_CONFIG, json, bad),
    only: Some(("openshift-ovn-kubernetes", "ovnkube-config")),
    ..CONFIG
};

/// The data keys the file is kept in (the README's, OpenShift's).
const FILES: [&str; 2] = ["ovn_k8s.conf", "ovnkube.conf"];

/// The keys read, as their field is named (`[section] key`), and what the
/// range is.
const KEYS: [(&str, Option<&Internal>); 9] = [
    ("[default] cluster-subnets", None),
    ("[gateway] v4-join-subnet", Some(&JOIN)),
    ("[gateway] v6-join-subnet", Some(&JOIN)),
    ("[gateway] v4-masquerade-subnet", Some(&MASQUERADE)),
    ("[gateway] v6-masquerade-subnet", Some(&MASQUERADE)),
    ("[clustermanager] v4-transit-switch-subnet", Some(&TRANSIT)),
    ("[clustermanager] v6-transit-switch-subnet", Some(&TRANSIT)),
    ("[clustermanager] v4-transit-subnet", Some(&TRANSIT)),
    ("[clustermanager] v6-transit-subnet", Some(&TRANSIT)),
];

/// The fields of the config file [`KEYS`] name for `internal`.
pub fn fields_of(internal: &Internal) -> impl Iterator<Item = &'static str> + '_ {
    KEYS.iter()
        .filter(move |k| k.1 == Some(internal))
        .map(|k| k.0)
}

fn read(records: &'static Records, json: &str, bad: &mut Vec<Invalid>) -> Vec<Planned> {
    let Some((object, files)) = config_map(records, json, bad) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for text in files
        .iter()
        .filter(|(k, _)| FILES.contains(&k.as_str()))
        .filter_map(|(_, v)| v.as_str())
    {
        for (section, key, value) in ini(text) {
            let named = |field: &str| {
                let names = field.strip_prefix('[').and_then(|f| f.split_once("] "));
                names == Some((section.as_str(), key.as_str()))
            };
            let Some(&(field, internal)) = KEYS.iter().find(|k| named(k.0)) else {
                continue;
            };
            for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                match planned(records, &object, internal, field, entry) {
                    Some(p) => out.push(p),
                    None => bad.push(invalid(
                        records,
                        object.clone(),
                        format!("{field} {entry:?} is no CIDR: it is not checked"),
                    )),
                }
            }
        }
    }
    out
}

/// One entry as a range: a cluster subnet's node prefix length
/// (`10.128.0.0/14/23`) is no part of its range.
fn planned(
    records: &'static Records,
    object: &str,
    internal: Option<&Internal>,
    field: &'static str,
    entry: &str,
) -> Option<Planned> {
    let cidr = match (internal, entry.match_indices('/').nth(1)) {
        (None, Some((at, _))) => &entry[..at],
        _ => entry,
    };
    let range = parse_entry(cidr).filter(|_| cidr.contains('/'))?;
    let owner = records.owner(object, field);
    let purpose = internal.map_or(Purpose::Pods, |_| Purpose::Internal);
    Some(Planned {
        shared: internal.map(shared),
        ..Planned::new(owner, purpose, range, cidr.to_owned())
    })
}

/// The `(section, key, value)` of an INI text, names in lower case and the
/// value unquoted (gcfg's reading; comments start with `;` or `#`).
fn ini(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with([';', '#']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_ascii_lowercase();
        } else if let Some((k, v)) = line.split_once('=') {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            out.push((section.clone(), k.trim().to_ascii_lowercase(), v.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_file(file: &str) -> Vec<Planned> {
        let path = format!(
            "{}/../tests/corpus/realworld/ovn-kubernetes-config/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("corpus")).expect("json");
        let mut bad = Vec::new();
        let out = (CONFIG.read)(&v["items"][0].to_string(), &mut bad);
        assert!(bad.is_empty(), "{bad:?}");
        out
    }

    #[test]
    fn the_readmes_config_file_gives_the_pod_network_without_its_node_prefix() {
        let got = read_file("configmap-ovnkube-config-readme-2019-ini-cluster-subnets.json");
        let got: Vec<_> = got
            .iter()
            .map(|p| {
                (
                    p.owner.object.as_str(),
                    p.owner.field,
                    p.purpose,
                    p.text.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [(
                "ovn-kubernetes/ovnkube-config",
                "[default] cluster-subnets",
                Purpose::Pods,
                "10.128.0.0/14"
            )]
        );
    }

    #[test]
    fn openshifts_rendered_file_gives_each_internal_subnet_shared_by_name() {
        let conf = "[default]\nmtu=\"1400\"\ncluster-subnets=\"10.128.0.0/14/23,fd01::/48/64\"\n\
                    [gateway]\nmode=shared\nv4-join-subnet=\"100.65.0.0/16\"\n\
                    [hybridoverlay]\ncluster-subnets=\"10.132.0.0/14\"\n\
                    [ClusterManager]\nv4-transit-switch-subnet=\"100.89.0.0/16\"\n";
        let json = serde_json::json!({"metadata": {"name": "ovnkube-config",
            "namespace": "openshift-ovn-kubernetes"}, "data": {"ovnkube.conf": conf}});
        let mut bad = Vec::new();
        let got = (OPENSHIFT_CONFIG.read)(&json.to_string(), &mut bad);
        assert!(bad.is_empty(), "{bad:?}");
        let texts: Vec<(&str, Option<&str>)> = got
            .iter()
            .map(|p| (p.text.as_str(), p.shared.as_deref()))
            .collect();
        // The hybrid overlay's subnets are not ovn-kubernetes' pod network.
        assert_eq!(
            texts,
            [
                ("10.128.0.0/14", None),
                ("fd01::/48", None),
                ("100.65.0.0/16", Some("ovn-kubernetes join subnet")),
                (
                    "100.89.0.0/16",
                    Some("ovn-kubernetes transit switch subnet")
                ),
            ]
        );
        let junk = json.to_string().replace("100.65.0.0/16", "100.65.0.0");
        assert_eq!((OPENSHIFT_CONFIG.read)(&junk, &mut bad).len(), 3);
        assert_eq!(bad.len(), 1, "{bad:?}");
    }
}
