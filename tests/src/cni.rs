//! Pods laid out by the real CNI reference plugins (Debian's
//! `containernetworking-plugins`, installed by `cargo xtask setup`), invoked as
//! a container runtime invokes them: from the node's namespace, with
//! `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`, `CNI_PATH` in
//! the environment and the network's config on stdin.

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
};

use serde_json::{Value, json};

use crate::netns::NetNs;

/// Where Debian installs the plugins.
pub const PLUGIN_DIR: &str = "/usr/lib/cni";

/// Why the CNI tests cannot run here, if they cannot: a missing plugin.
pub fn missing() -> Option<String> {
    ["ptp", "bridge", "host-local"]
        .iter()
        .find(|p| !Path::new(PLUGIN_DIR).join(p).exists())
        .map(|p| {
            format!(
                "the CNI plugin {PLUGIN_DIR}/{p} is missing: install Debian's \
                 containernetworking-plugins (cargo xtask setup does)"
            )
        })
}

/// A `ptp` network with `host-local` IPAM over `subnet`, its store in `data_dir`.
pub fn ptp_conf(name: &str, subnet: &str, data_dir: &Path) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": name,
        "type": "ptp",
        "ipam": {"type": "host-local", "subnet": subnet, "dataDir": data_dir},
    })
}

/// A `bridge` network (flannel's layout: `cni0` holding the gateway, one veth
/// per pod enslaved to it, no per-pod routes) with `host-local` IPAM over `subnet`.
pub fn bridge_conf(name: &str, subnet: &str, data_dir: &Path) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": name,
        "type": "bridge",
        "bridge": "cni0",
        "isGateway": true,
        "ipam": {"type": "host-local", "subnet": subnet, "dataDir": data_dir},
    })
}

/// One network on one node: the node's namespace, the config, the IPAM store.
pub struct Network {
    /// The node's namespace, where the runtime runs the plugin.
    pub node: String,
    /// The plugin config (stdin).
    pub conf: Value,
    /// host-local's store, removed on drop.
    pub store: crate::TempDir,
}

/// The outcome of one plugin call.
pub struct Outcome {
    pub ok: bool,
    pub result: Value,
    pub stderr: String,
}

impl Network {
    /// A `ptp` network on `node` over `subnet`.
    pub fn ptp(node: &NetNs, name: &str, subnet: &str) -> Self {
        let store = crate::TempDir::new(&format!("cni-{name}"));
        let conf = ptp_conf(name, subnet, &store.join("ipam"));
        Self {
            node: node.name.clone(),
            conf,
            store,
        }
    }

    /// A `bridge` network on `node` over `subnet`.
    pub fn bridge(node: &NetNs, name: &str, subnet: &str) -> Self {
        let store = crate::TempDir::new(&format!("cni-{name}"));
        let conf = bridge_conf(name, subnet, &store.join("ipam"));
        Self {
            node: node.name.clone(),
            conf,
            store,
        }
    }

    /// `CNI_COMMAND=ADD` for container `id` in `pod`; panics on failure.
    /// Returns the address it gave (without prefix length) and the host veth.
    pub fn add(&self, id: &str, pod: &NetNs) -> (String, String) {
        let out = self.call("ADD", id, pod);
        assert!(out.ok, "CNI ADD {id} failed: {}{}", out.result, out.stderr);
        let ip = out.result["ips"][0]["address"]
            .as_str()
            .and_then(|a| a.split('/').next())
            .unwrap_or_else(|| panic!("no address in {}", out.result))
            .to_owned();
        let host_if = out.result["interfaces"]
            .as_array()
            // The last host-side one: `bridge` lists the bridge (cni0) first.
            .and_then(|is| is.iter().rev().find(|i| i.get("sandbox").is_none()))
            .and_then(|i| i["name"].as_str())
            .unwrap_or_else(|| panic!("no host interface in {}", out.result))
            .to_owned();
        (ip, host_if)
    }

    /// `CNI_COMMAND=DEL` for container `id` in `pod`; panics on failure.
    pub fn del(&self, id: &str, pod: &NetNs) {
        let out = self.call("DEL", id, pod);
        assert!(out.ok, "CNI DEL {id} failed: {}{}", out.result, out.stderr);
    }

    /// One plugin call as a runtime makes it.
    pub fn call(&self, command: &str, id: &str, pod: &NetNs) -> Outcome {
        let plugin = self.conf["type"].as_str().unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.node])
            .arg(Path::new(PLUGIN_DIR).join(plugin))
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", id)
            .env("CNI_NETNS", format!("/var/run/netns/{}", pod.name))
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", PLUGIN_DIR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(&serde_json::to_vec(&self.conf).unwrap())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        Outcome {
            ok: out.status.success(),
            result: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}
