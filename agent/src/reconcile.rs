//! One reconcile: this node's netlink state plus the Kubernetes state, turned
//! into an inventory and run through the detector. `check` runs it once; the
//! agent runs it on every change.

use std::{collections::BTreeSet, net::IpAddr, sync::Arc};

pub use crate::kube::ReadArgs;
use crate::{
    detect::{Finding, detect_with_truth, lookups},
    inventory::{ClusterState, HostNetwork, Inventory, TruthTable, link_local},
    netlink::{self, Netlink},
};

/// Which node this is and how to read its pods.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// This node's name as Kubernetes knows it (`spec.nodeName`). Default: the hostname.
    #[arg(long, env = "NODE_NAME")]
    pub node: Option<String>,
    /// How addresses are read.
    #[command(flatten)]
    pub read: ReadArgs,
}

/// Why a reconcile could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the node failed.
    #[error(transparent)]
    Netlink(#[from] netlink::Error),
    /// This node's name is unknown.
    #[error("cannot tell this node's name: {0}; pass --node or set NODE_NAME")]
    NodeName(String),
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

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

/// This node's netlink socket and the names detection needs.
#[derive(Debug)]
pub struct Reconciler {
    /// This node's name.
    pub node: String,
    router_device: String,
    netlink: Netlink,
}

impl Reconciler {
    /// Opens the netlink socket (in the caller's network namespace).
    pub fn new(args: &NodeArgs) -> Result<Self> {
        Ok(Self {
            node: node_name(args)?,
            router_device: args.read.router_device.clone(),
            netlink: Netlink::connect()?,
        })
    }

    /// Whether this kernel lets the pods' namespaces be read (Linux 4.20+).
    pub fn reads_pod_namespaces(&self) -> bool {
        self.netlink.reads_pod_namespaces()
    }

    /// Makes the next reconcile read every pod namespace again (a resync):
    /// changes inside a namespace send the host no notification.
    pub fn expire_pod_namespaces(&self) {
        self.netlink.expire_namespaces();
    }

    /// Reads this node's network and detects, against `kube`.
    #[tracing::instrument(skip_all, fields(pods = kube.pods.len(), cilium_nodes = kube.cilium_nodes.len()))]
    pub async fn reconcile(&self, kube: &ClusterState) -> Result<Reconciled> {
        let ips: Vec<IpAddr> = lookups(&self.node, &kube.pods).collect();
        let host = Arc::new(self.netlink.read_host(&ips).await?);
        Ok(self.detect(kube, host).await)
    }

    /// Detects against `kube` on the host snapshot of an earlier reconcile, for
    /// a change of the cluster only (no netlink notification since): only the
    /// FIB answers of pod IPs it has not looked up yet are asked for.
    #[tracing::instrument(skip_all, fields(pods = kube.pods.len()))]
    pub async fn reconcile_cluster_change(
        &self,
        kube: &ClusterState,
        host: &Arc<HostNetwork>,
    ) -> Reconciled {
        let missing = self.missing_lookups(kube, host);
        let host = if missing.is_empty() {
            Arc::clone(host)
        } else {
            let mut more = HostNetwork::clone(host);
            more.fib.extend(self.netlink.lookup(&missing).await);
            Arc::new(more)
        };
        self.detect(kube, host).await
    }

    /// The next slice of the pod namespaces a resync wants read again, on the
    /// host snapshot of the pass's first reconcile: a resync pass reads the
    /// host's links, addresses and routes once, however many slices its
    /// namespaces take (a change of the host meanwhile is a netlink
    /// notification, and the reconcile after it reads the host afresh).
    #[tracing::instrument(skip_all, fields(pods = kube.pods.len()))]
    pub async fn reconcile_namespaces(
        &self,
        kube: &ClusterState,
        host: &Arc<HostNetwork>,
    ) -> Reconciled {
        let missing = self.missing_lookups(kube, host);
        let mut fib = host.fib.clone();
        fib.extend(self.netlink.lookup(&missing).await);
        let more = HostNetwork {
            links: host.links.clone(),
            addresses: host.addresses.clone(),
            routes: host.routes.clone(),
            dad_failed: host.dad_failed.clone(),
            fib,
            namespaces: self
                .netlink
                .read_namespaces(host.namespaces.ifaces.clone())
                .await,
        };
        self.detect(kube, Arc::new(more)).await
    }

    /// How many times this node's links, addresses and routes were read.
    pub fn host_reads(&self) -> u64 {
        self.netlink.host_reads()
    }

    /// The pod IPs of `kube` whose FIB answer `host` does not hold yet.
    fn missing_lookups(&self, kube: &ClusterState, host: &HostNetwork) -> Vec<IpAddr> {
        lookups(&self.node, &kube.pods)
            .filter(|ip| !host.fib.contains_key(ip))
            .collect()
    }

    /// Detection on a blocking thread: over 100,000 pods it takes a while, and
    /// the runtime meanwhile answers `/healthz` and serves the watches.
    async fn detect(&self, kube: &ClusterState, host: Arc<HostNetwork>) -> Reconciled {
        let facts = kube.nodes.iter().find(|n| n.name == self.node).cloned();
        let (node, device) = (&self.node, &self.router_device);
        let inventory = Inventory::new(node, device, Arc::clone(&host), facts, kube.clone());
        let run = move || {
            let (findings, truth) = detect_with_truth(&inventory);
            Reconciled {
                findings,
                claimable: claimable(&inventory),
                leaving: leaving(&inventory),
                foreign_ranges: crate::detect::foreign_bridge_ranges(&inventory),
                calico: crate::cni::calico::runs_here(&inventory.host.links),
                host,
                truth,
            }
        };
        match tokio::task::spawn_blocking(run).await {
            Ok(done) => done,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => unreachable!("a blocking task is not cancelled while awaited: {e}"),
        }
    }
}

/// The outcome of one reconcile.
#[derive(Debug)]
pub struct Reconciled {
    /// What detection found.
    pub findings: Vec<Finding>,
    /// Addresses of this node a pod elsewhere could hold (see [`claimable`]).
    pub claimable: BTreeSet<IpAddr>,
    /// The uids of the pods being deleted (see [`leaving`]).
    pub leaving: BTreeSet<String>,
    /// Ranges this node's bridges route that are not its own (see
    /// [`crate::detect::foreign_bridge_ranges`]).
    pub foreign_ranges: Vec<ipnet::IpNet>,
    /// Calico runs on this node (see [`crate::cni::calico::runs_here`]).
    pub calico: bool,
    /// The host snapshot it ran on, for reconciles of cluster changes only.
    pub host: Arc<HostNetwork>,
    /// The node's truth table: what the pods' namespaces hold (issue 24).
    pub truth: TruthTable,
}

/// The uids of the pods in `inv` being deleted (`metadata.deletionTimestamp`):
/// their Event series end without an `IPCollisionResolved`, since nothing was
/// fixed — the pod is going.
pub fn leaving(inv: &Inventory) -> BTreeSet<String> {
    inv.cluster
        .pods
        .iter()
        .filter(|p| p.terminating && !p.uid.is_empty())
        .map(|p| p.uid.clone())
        .collect()
}

/// The addresses of this node's kernel that a pod on another node could be
/// given: its local addresses inside any pod range (its Node's podCIDRs,
/// kube-ovn Subnets, its CiliumNode's podCIDRs, ovn-kubernetes' node subnets
/// from `k8s.ovn.org/node-subnets`), the addresses a CNI holds for the node
/// that its CiliumNode or Node annotations name and are local here (Cilium's
/// router IP; Calico's tunnel addresses, `projectcalico.org/*`, from Calico's
/// pool, which no podCIDR shows; ovn-kubernetes' `.1` and `.2`), and those on
/// a CNI's own device (Cilium's router device, a Calico tunnel, a bridge, an
/// ovn-kubernetes management port), which lie in that CNI's pool whatever the
/// annotations say (a stale one: calico/node#254). Not the Ingress IP (on no
/// device) nor the health IP (in its own namespace): host traffic to them is
/// never delivered here; nor a link-local address, which no pod is given. The
/// observer watches their traffic; traffic no finding explains makes the
/// agent ask once which pod holds the address.
pub fn claimable(inv: &Inventory) -> BTreeSet<IpAddr> {
    let ranges: Vec<ipnet::IpNet> = inv.own_pod_ranges().collect();
    let infra: BTreeSet<IpAddr> = inv
        .own_cni_nodes()
        .flat_map(|c| c.addresses.iter().map(|a| a.ip))
        .collect();
    let cni_device = |device: &str| {
        crate::inventory::Role::of_device(device, &inv.router_device, &inv.node)
            != crate::inventory::Role::Local
    };
    inv.host
        .addresses
        .iter()
        .filter(|a| {
            infra.contains(&a.ip)
                || ranges.iter().any(|r| r.contains(&a.ip))
                || (cni_device(&a.device) && !link_local(a.ip) && !a.ip.is_loopback())
        })
        .map(|a| a.ip)
        .chain(vips_in_pod_ranges(inv))
        .collect()
}

/// The addresses on a device that holds Services' addresses only (kube-proxy's
/// `kube-ipvs0`, which binds every Service address on every node), or
/// NodeLocal DNSCache's (`nodelocaldns`, the same address on every node), inside any
/// range pods are given that the agent knows — every CiliumNode's and
/// annotated Node's, kube-ovn's primary Subnets, Calico's IPPools for
/// workloads where this node's pods have addresses from them, this Node's: a pod on another
/// node may hold one, which this host then cannot reach. Not Cilium's cluster
/// pool (10.0.0.0/8 by default holds kubeadm's Service range 10.96.0.0/12: a
/// node's range inside it is what a pod is given), nor the Service addresses
/// outside every such range (a healthy cluster's ClusterIPs): host traffic to
/// them is normal, and would cost lookups.
fn vips_in_pod_ranges(inv: &Inventory) -> Vec<IpAddr> {
    let vips: Vec<IpAddr> = inv
        .host
        .addresses
        .iter()
        .filter(|a| {
            crate::cni::holds(&a.device, crate::cni::Holds::ServiceAddresses)
                || crate::cni::holds(&a.device, crate::cni::Holds::NodeLocalDns)
        })
        .map(|a| a.ip)
        .collect();
    if vips.is_empty() {
        return vips;
    }
    let ranges: Vec<ipnet::IpNet> = inv
        .cluster
        .cni_nodes()
        .flat_map(|c| {
            c.ranges()
                .map(|(r, _)| r)
                .chain(c.ovn_subnets.iter().copied())
        })
        .chain(inv.primary_subnet_ranges())
        .chain(
            inv.node_facts
                .iter()
                .flat_map(|n| n.pod_cidrs.iter().copied()),
        )
        .chain(inv.calico_pod_ranges())
        .collect();
    // Disjoint and in order: one binary search per address, however many nodes.
    let ranges = ipnet::IpNet::aggregate(&ranges);
    vips.into_iter()
        .filter(|ip| {
            let after = ranges.partition_point(|r| r.network() <= *ip);
            after > 0 && ranges[after - 1].contains(ip)
        })
        .collect()
}

#[cfg(test)]
mod tests;
