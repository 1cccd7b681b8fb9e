//! A node whose pods the real CNI reference plugins laid out, for the
//! kernel-truth tests (`ipshadow check` and the agent on it).

use std::process::Output;

use serde_json::Value;

use crate::{
    can_run_netns_tests,
    check::Files,
    cni, guard, ipshadow_bin, kernel_at_least,
    lab::ME,
    netns::NetNs,
    objects::{list, pod},
};

/// A node with `n` pods laid out by `ptp` over 10.250.1.0/24.
pub struct CniNode {
    pub tag: String,
    pub node: NetNs,
    pub pods: Vec<NetNs>,
    pub net: cni::Network,
    /// Each pod's (address, host veth), in order.
    pub laid: Vec<(String, String)>,
}

impl CniNode {
    /// `None` (and the test recorded as skipped) where the test cannot run.
    pub fn new(test: &str, tag: &str, pods: usize) -> Option<Self> {
        Self::laid_by(test, tag, pods, cni::Network::ptp)
    }

    /// A node whose `pods` are laid out by the network `plugin` makes.
    pub fn laid_by(
        test: &str,
        tag: &str,
        pods: usize,
        plugin: fn(&NetNs, &str, &str) -> cni::Network,
    ) -> Option<Self> {
        Self::laid_over(test, tag, pods, plugin, "10.250.1.0/24")
    }

    /// As [`Self::laid_by`], over `subnet`.
    pub fn laid_over(
        test: &str,
        tag: &str,
        pods: usize,
        plugin: fn(&NetNs, &str, &str) -> cni::Network,
        subnet: &str,
    ) -> Option<Self> {
        if !can_run_netns_tests(test) || !kernel_at_least(4, 20, test, "IFA_TARGET_NETNSID dumps") {
            return None;
        }
        if let Some(why) = cni::missing() {
            guard(test, Some(&why));
            return None;
        }
        let node = NetNs::new(&format!("{tag}n"));
        // The node's uplink and default route, as a real node has: a pod address
        // no route names goes there (no blackhole), as it would on a node.
        node.add_veth("eth0", "uplink");
        node.ip(&["addr", "add", "192.168.100.11/24", "dev", "eth0"]);
        node.ip(&["link", "set", "eth0", "up"]);
        node.ip(&["link", "set", "uplink", "up"]);
        node.ip(&["route", "add", "default", "via", "192.168.100.1"]);
        let net = plugin(&node, tag, subnet);
        let mut n = Self {
            tag: tag.to_owned(),
            node,
            pods: Vec::new(),
            net,
            laid: Vec::new(),
        };
        for _ in 0..pods {
            n.add_pod();
        }
        Some(n)
    }

    /// One more pod, ADDed as the runtime does.
    pub fn add_pod(&mut self) {
        let pod = NetNs::new(&format!("{}p", self.tag));
        let id = format!("{}-c{}", self.tag, self.pods.len());
        self.laid.push(self.net.add(&id, &pod));
        self.pods.push(pod);
    }

    pub fn ip(&self, i: usize) -> &str {
        &self.laid[i].0
    }

    pub fn veth(&self, i: usize) -> &str {
        &self.laid[i].1
    }

    /// `check` with the API's pods: `names[i]` at pod `i`'s address, Running on this node.
    pub fn check(&self, names: &[&str], output: &str) -> Output {
        let pods: Vec<Value> = names
            .iter()
            .enumerate()
            .map(|(i, n)| pod("tenant", n, ME, &[self.ip(i)]))
            .collect();
        self.check_pods(pods, output)
    }

    /// `check` with these pods as the API's.
    pub fn check_pods(&self, pods: Vec<Value>, output: &str) -> Output {
        let files = Files::new("cni-ptp");
        let path = files.write("pods.json", &list(pods));
        self.node
            .command(ipshadow_bin().to_str().unwrap())
            .args(["check", "--node", ME, "--output", output, "--pods"])
            .arg(path)
            .output()
            .unwrap()
    }

    pub fn json(&self, names: &[&str]) -> (Option<i32>, Value) {
        let out = self.check(names, "json");
        let v = crate::json_stdout(&out);
        (out.status.code(), v)
    }
}

impl Drop for CniNode {
    fn drop(&mut self) {
        // As the runtime tears sandboxes down; a pod already torn down is fine.
        for (i, p) in self.pods.iter().enumerate() {
            let _ = self.net.call(
                "DEL",
                &format!("{}-c{i}", self.net.conf["name"].as_str().unwrap()),
                p,
            );
        }
    }
}
