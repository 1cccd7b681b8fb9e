//! One reconcile: read the sources, build the inventory, detect. `ipshadow
//! check` prints its result; the agent will run the same on every change.

use std::net::IpAddr;

use crate::{
    cli::{NodeArgs, SourceArgs},
    detect::{Finding, detect},
    inventory::Inventory,
    kube::{self, Invalid},
    netlink::{self, Netlink},
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Files(#[from] kube::files::Error),
    #[error(transparent)]
    Netlink(#[from] netlink::Error),
    #[error("cannot tell this node's name: {0}; pass --node or set NODE_NAME")]
    NodeName(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The outcome of one check.
#[derive(Debug)]
pub struct Report {
    pub node: String,
    pub findings: Vec<Finding>,
    /// Objects (or fields) skipped as malformed.
    pub invalid: Vec<Invalid>,
}

/// This node's name: the flag or NODE_NAME, else the kernel's hostname.
pub fn node_name(args: &NodeArgs) -> Result<String> {
    if let Some(n) = args.node.as_deref().filter(|n| !n.is_empty()) {
        return Ok(n.to_owned());
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_err(|e| Error::NodeName(format!("reading /proc/sys/kernel/hostname: {e}")))?;
    let host = host.trim();
    if host.is_empty() {
        return Err(Error::NodeName("the hostname is empty".to_owned()));
    }
    Ok(host.to_owned())
}

/// The IPs whose FIB answer detection needs: those of this node's pods.
pub fn lookups(inv: &Inventory) -> Vec<IpAddr> {
    inv.pods
        .iter()
        .filter(|p| p.node.as_deref() == Some(inv.node.as_str()) && p.can_receive_traffic())
        .flat_map(|p| p.ips.iter().map(|i| i.ip))
        .collect()
}

/// Reads the files and this node's netlink state, and detects.
pub async fn run(node: &NodeArgs, sources: &SourceArgs) -> Result<Report> {
    let name = node_name(node)?;
    let mut invalid = Vec::new();
    let pods = kube::files::pods(&sources.pods, &node.pod_ip_annotations, &mut invalid)?;
    let cilium_nodes = match &sources.ciliumnodes {
        Some(path) => kube::files::cilium_nodes(path, &mut invalid)?,
        None => Vec::new(),
    };
    let subnets = match &sources.subnets {
        Some(path) => kube::files::subnets(path, &mut invalid)?,
        None => Vec::new(),
    };
    let mut inv = Inventory {
        node: name.clone(),
        router_device: node.router_device.clone(),
        pods,
        cilium_nodes,
        subnets,
        ..Default::default()
    };
    let nl = Netlink::connect()?;
    inv.host = nl.read_host(&lookups(&inv)).await?;
    Ok(Report {
        node: name,
        findings: detect(&inv),
        invalid,
    })
}
