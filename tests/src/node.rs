//! A simulated Kubernetes node laid out as kube-ovn with chained Cilium lays it:
//!
//! ```text
//!  node ns:  lo, cilium_host <-> cilium_net (router IP /32 on cilium_host),
//!            ovn0 (100.64.0.2/16) ─ route 10.244.0.0/16 via 100.64.0.1 dev ovn0, no /32s
//!  ovn ns:   the OVN router stand-in: ovn0 peer (100.64.0.1/16), bridge br-int
//!            (10.244.0.1/16) with one veth per pod
//!  pod ns:   eth0 with the pod IP /16, default via 10.244.0.1
//! ```

use crate::netns::NetNs;

pub const POD_CIDR: &str = "10.244.0.0/16";
pub const POD_GATEWAY: &str = "10.244.0.1";

pub struct SimNode {
    tag: String,
    pub node: NetNs,
    pub ovn: NetNs,
    pub pods: Vec<NetNs>,
}

impl SimNode {
    /// A node whose `cilium_host` carries `router_ip` (as a /32, like Cilium does).
    pub fn kube_ovn(tag: &str, router_ip: &str) -> Self {
        let node = NetNs::new(&format!("{tag}n"));
        let ovn = NetNs::new(&format!("{tag}o"));
        node.add_router_device(router_ip);
        node.ip(&[
            "link", "add", "ovn0", "type", "veth", "peer", "name", "ovn0p", "netns", &ovn.name,
        ]);
        node.ip(&["addr", "add", "100.64.0.2/16", "dev", "ovn0"]);
        node.ip(&["link", "set", "ovn0", "up"]);
        node.ip(&["route", "add", POD_CIDR, "via", "100.64.0.1", "dev", "ovn0"]);
        ovn.ip(&["addr", "add", "100.64.0.1/16", "dev", "ovn0p"]);
        ovn.ip(&["link", "set", "ovn0p", "up"]);
        ovn.ip(&["link", "add", "br-int", "type", "bridge"]);
        ovn.ip(&["addr", "add", &format!("{POD_GATEWAY}/16"), "dev", "br-int"]);
        ovn.ip(&["link", "set", "br-int", "up"]);
        crate::netns::run(ovn.command("sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
        Self {
            tag: tag.to_owned(),
            node,
            ovn,
            pods: Vec::new(),
        }
    }

    /// `kube-ipvs0` as kube-proxy in IPVS mode keeps it, with `vips` (each a
    /// /32, a local route): here a veth, since this kernel has no dummy links.
    pub fn add_vips(&self, vips: &[&str]) {
        self.node.ip(&[
            "link",
            "add",
            "kube-ipvs0",
            "type",
            "veth",
            "peer",
            "name",
            "ipvs0p",
        ]);
        for vip in vips {
            self.node
                .ip(&["addr", "add", &format!("{vip}/32"), "dev", "kube-ipvs0"]);
        }
        self.node.ip(&["link", "set", "kube-ipvs0", "up"]);
    }

    /// A pod namespace with `ip`/16 on eth0, its veth on the OVN bridge.
    pub fn add_pod(&mut self, ip: &str) -> &NetNs {
        let n = self.pods.len();
        let pod = NetNs::new(&format!("{}p{n}", self.tag));
        let host_side = format!("veth{n}");
        self.ovn.ip(&[
            "link", "add", &host_side, "type", "veth", "peer", "name", "eth0", "netns", &pod.name,
        ]);
        self.ovn
            .ip(&["link", "set", &host_side, "master", "br-int", "up"]);
        pod.ip(&["addr", "add", &format!("{ip}/16"), "dev", "eth0"]);
        pod.ip(&["link", "set", "eth0", "up"]);
        pod.ip(&["route", "add", "default", "via", POD_GATEWAY]);
        self.pods.push(pod);
        &self.pods[n]
    }
}
