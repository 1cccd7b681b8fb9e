//! A network namespace that exists while its guard lives.

use std::{
    fs::File,
    os::fd::AsRawFd as _,
    process::{Command, Output},
    sync::atomic::{AtomicU32, Ordering},
};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A named network namespace (`ip netns add`), deleted on drop. Deleting the
/// namespace destroys the interfaces in it and their veth peers elsewhere.
pub struct NetNs {
    pub name: String,
}

impl NetNs {
    /// A fresh namespace named `ips-<tag>-<pid>-<n>`, with `lo` up and no IPv6 DAD.
    pub fn new(tag: &str) -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("ips-{tag}-{}-{n}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Self { name };
        // No IPv6 duplicate address detection: each link's address would turn
        // from tentative to permanent a second or so after the link came up,
        // a netlink notification (and a reconcile) at a moment nobody chose.
        // Without it, the namespace is settled when its setup returns.
        run(ns.command("sysctl").args([
            "-qw",
            "net.ipv6.conf.all.accept_dad=0",
            "net.ipv6.conf.default.accept_dad=0",
        ]));
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n <ns> <args>`, which must succeed.
    pub fn ip(&self, args: &[&str]) {
        run(Command::new("ip").arg("-n").arg(&self.name).args(args));
    }

    /// A veth pair `name` / `peer` (this kernel has no dummy devices).
    pub fn add_veth(&self, name: &str, peer: &str) {
        self.ip(&["link", "add", name, "type", "veth", "peer", "name", peer]);
    }

    /// Calico's VXLAN device as calico-node lays it: a real `vxlan` device
    /// named `vxlan.calico` (VNI 4096, port 4789) holding `address`/32, up.
    pub fn add_calico_vxlan(&self, address: &str) {
        self.ip(&[
            "link",
            "add",
            "vxlan.calico",
            "type",
            "vxlan",
            "id",
            "4096",
            "dstport",
            "4789",
        ]);
        self.ip(&[
            "addr",
            "add",
            &format!("{address}/32"),
            "dev",
            "vxlan.calico",
        ]);
        self.ip(&["link", "set", "vxlan.calico", "up"]);
    }

    /// ovn-kubernetes' management port (an OVS internal port; a veth named
    /// `ovn-k8s-mp0` stands in) holding `address` (`.2` of the node subnet,
    /// with its prefix), up; with `cluster` (the cluster network), routed via
    /// the node switch's gateway `gateway` as ovn-kubernetes routes it.
    pub fn add_ovn_management_port(&self, address: &str, cluster: Option<(&str, &str)>) {
        self.add_veth("ovn-k8s-mp0", "mp0-peer");
        self.ip(&["addr", "add", address, "dev", "ovn-k8s-mp0"]);
        self.ip(&["link", "set", "ovn-k8s-mp0", "up"]);
        if let Some((cluster, gateway)) = cluster {
            self.ip(&[
                "route",
                "add",
                cluster,
                "via",
                gateway,
                "dev",
                "ovn-k8s-mp0",
            ]);
        }
    }

    /// `ip -n <ns> -batch -`: many commands in one process, as fast as ip sends them.
    pub fn ip_batch(&self, batch: &str) {
        use std::io::Write as _;
        let mut ip = Command::new("ip")
            .arg("-n")
            .arg(&self.name)
            .args(["-batch", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        ip.stdin
            .take()
            .unwrap()
            .write_all(batch.as_bytes())
            .unwrap();
        assert!(ip.wait().unwrap().success(), "ip -batch failed");
    }

    /// `ip -n <ns> <args>`, its output whatever the status.
    pub fn ip_output(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .arg("-n")
            .arg(&self.name)
            .args(args)
            .output()
            .unwrap()
    }

    /// A command to run inside the namespace (`ip netns exec`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Cilium's device pair, `cilium_host` carrying `router_ip` as a /32 as Cilium lays it.
    pub fn add_router_device(&self, router_ip: &str) {
        self.ip(&[
            "link",
            "add",
            "cilium_host",
            "type",
            "veth",
            "peer",
            "name",
            "cilium_net",
        ]);
        self.ip(&[
            "addr",
            "add",
            &format!("{router_ip}/32"),
            "dev",
            "cilium_host",
        ]);
        self.ip(&["link", "set", "cilium_host", "up"]);
        self.ip(&["link", "set", "cilium_net", "up"]);
    }

    /// Moves the calling thread into the namespace until the guard drops.
    /// Sockets the thread opens meanwhile (netlink, TCP, bpf attach by name) live there.
    pub fn enter(&self) -> Entered {
        let here = File::open("/proc/thread-self/ns/net").unwrap();
        let there = File::open(format!("/var/run/netns/{}", self.name)).unwrap();
        // SAFETY: setns on valid namespace fds; it only changes this thread.
        let rc = unsafe { libc::setns(there.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(
            rc,
            0,
            "setns into {}: {}",
            self.name,
            std::io::Error::last_os_error()
        );
        Entered { back: here }
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let out = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        if !matches!(&out, Ok(o) if o.status.success()) {
            eprintln!("warning: could not delete netns {}: {out:?}", self.name);
        }
    }
}

/// Moves the calling thread into the named namespace until the guard drops.
pub fn enter_named(name: &str) -> Entered {
    let here = File::open("/proc/thread-self/ns/net").unwrap();
    let there = File::open(format!("/var/run/netns/{name}")).unwrap();
    // SAFETY: setns on valid namespace fds; it only changes this thread.
    let rc = unsafe { libc::setns(there.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(
        rc,
        0,
        "setns into {name}: {}",
        std::io::Error::last_os_error()
    );
    Entered { back: here }
}

/// Returns the thread to its previous network namespace on drop.
pub struct Entered {
    back: File,
}

impl Drop for Entered {
    fn drop(&mut self) {
        // SAFETY: as in `enter`.
        let rc = unsafe { libc::setns(self.back.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            eprintln!(
                "warning: setns back failed: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// Runs a command and panics with its output if it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Deletes every namespace whose name starts with `ips-<tag>`: what an earlier,
/// interrupted run left behind.
pub fn delete_leftovers(tag: &str) -> usize {
    let prefix = format!("ips-{tag}");
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return 0;
    };
    let mut n = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        if name.starts_with(&prefix)
            && Command::new("ip")
                .args(["netns", "del", name])
                .status()
                .is_ok_and(|s| s.success())
        {
            n += 1;
        }
    }
    n
}

/// How many programs named `name` are attached to the ingress of `iface` in the
/// namespace, as the kernel lists them: TCX links (BPF_PROG_QUERY) plus legacy
/// tc filters (`tc filter show`).
pub fn attached_programs(ns: &NetNs, iface: &str, name: &str) -> usize {
    let tcx = {
        let _inside = ns.enter();
        match aya::programs::SchedClassifier::query_tcx(iface, aya::programs::TcAttachType::Ingress)
        {
            Ok((_, progs)) => progs
                .iter()
                .filter(|p| p.name_as_str() == Some(name))
                .count(),
            Err(_) => 0,
        }
    };
    let out = ns
        .command("tc")
        .args(["filter", "show", "dev", iface, "ingress"])
        .output()
        .unwrap();
    let legacy = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("name {name}")) || l.contains(&format!("{name}:")))
        .count();
    tcx + legacy
}

fn bpftool_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new("bpftool")
        .arg("-j")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bpftool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The number of entries in map `map` of the program `prog` attached with TCX
/// to the ingress of `iface` in `ns` (the kernel's view, through bpftool).
pub fn tcx_program_map_entries(ns: &NetNs, iface: &str, prog: &str, map: &str) -> usize {
    let id = {
        let _inside = ns.enter();
        let (_, progs) =
            aya::programs::SchedClassifier::query_tcx(iface, aya::programs::TcAttachType::Ingress)
                .unwrap();
        progs
            .iter()
            .find(|p| p.name_as_str() == Some(prog))
            .map_or_else(
                || panic!("no program {prog} on {iface} in {}", ns.name),
                aya::programs::ProgramInfo::id,
            )
    };
    let info = bpftool_json(&["prog", "show", "id", &id.to_string()]);
    let map_id = info["map_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_u64().unwrap().to_string())
        .find(|m| bpftool_json(&["map", "show", "id", m])["name"] == map)
        .unwrap_or_else(|| panic!("program {id} has no map {map}"));
    bpftool_json(&["map", "dump", "id", &map_id])
        .as_array()
        .unwrap()
        .len()
}
