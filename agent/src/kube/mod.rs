//! Kubernetes adapter: pods, CiliumNodes, kube-ovn Subnets and this node's Node
//! turned into inventory types, from files or from the cluster (watches), and
//! Events written back.

pub mod cluster;
pub mod condition;
pub mod connect;
pub mod evict;
pub mod files;
pub mod list;
pub mod objects;
pub mod pace;
pub mod recorder;
pub mod review;
pub mod sources;
pub(crate) mod ttl;

use std::path::PathBuf;

use crate::report::chain::Chain;

/// `--help`'s heading of the flags that say how to reach the cluster: the
/// first a user looks for.
pub const CLUSTER_HEADING: &str = "Cluster connection";
/// `--help`'s heading of the flags that read the cluster's objects from files
/// instead: many, and after everything else.
pub const FILES_HEADING: &str = "Inputs from files (instead of the cluster)";

/// Where the Kubernetes side comes from: files, or the cluster.
#[derive(Debug, clap::Args)]
pub struct SourceArgs {
    /// In cluster mode, the namespace of Cilium's `cilium-config` ConfigMap (its IPAM
    /// mode and cluster-pool CIDRs, for a migration that never took).
    #[arg(long, env = "IPSHADOW_CILIUM_NAMESPACE", help_heading = CLUSTER_HEADING, default_value = cluster::DEFAULT_CILIUM_NAMESPACE,
          value_parser = dns_label)]
    pub cilium_namespace: String,
    /// In cluster mode, how long to wait for the first list of each resource, in seconds.
    #[arg(long, env = "IPSHADOW_SYNC_TIMEOUT_SECONDS", help_heading = CLUSTER_HEADING, default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub sync_timeout_seconds: u64,
    /// Read Kubernetes state from files instead of the cluster: pods as `kubectl get
    /// pods -A -o json` prints them (all namespaces, so pods on other nodes holding
    /// this node's addresses are seen too). Without it, ipshadow watches the cluster
    /// (kubeconfig from KUBECONFIG or ~/.kube/config, else the in-cluster service account).
    #[arg(long, env = "IPSHADOW_PODS_FILE", help_heading = FILES_HEADING)]
    pub pods: Option<PathBuf>,
    /// With --pods: CiliumNodes as `kubectl get ciliumnodes -o json` prints them.
    /// Without them only what this node's kernel shows is checked.
    #[arg(long, env = "IPSHADOW_CILIUMNODES_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub ciliumnodes: Option<PathBuf>,
    /// With --pods: kube-ovn Subnets as `kubectl get subnets.kubeovn.io -o json` prints
    /// them, so Cilium addresses kube-ovn may hand out are found before a pod collides
    /// (an allocator overlap).
    #[arg(long, env = "IPSHADOW_SUBNETS_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub subnets: Option<PathBuf>,
    /// With --pods: Nodes as `kubectl get nodes -o json` prints them, for the
    /// addresses Cilium publishes in their annotations (`network.cilium.io/*`,
    /// legacy `io.cilium.network.*`) where a CiliumNode does not show them, and
    /// for how many pods this node accepts against its pod range.
    #[arg(long, env = "IPSHADOW_NODES_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub nodes: Option<PathBuf>,
    /// With --pods: Events as `kubectl get events -A -o json` prints them. kubelet's
    /// FailedCreatePodSandBox Events name the address Cilium refused a pod as already
    /// in use (the only trace of it when Cilium's own IPAM gave the pod that address)
    /// or an allocator with none left.
    #[arg(long, env = "IPSHADOW_EVENTS_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub events: Option<PathBuf>,
    /// With --pods: Cilium's ConfigMap as `kubectl get cm -n kube-system cilium-config
    /// -o json` prints it, so a switch to ipam=cluster-pool that left a node on its
    /// old range is found (a migration that never took).
    #[arg(long, env = "IPSHADOW_CILIUM_CONFIG_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub cilium_config: Option<PathBuf>,
    /// With --pods: EndpointSlices as `kubectl get endpointslices -A -o json` prints
    /// them: the Services a shadowed pod backs (a finding's `impact`).
    #[arg(long, env = "IPSHADOW_ENDPOINTSLICES_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub endpointslices: Option<PathBuf>,
    /// With --pods: webhook configurations as `kubectl get
    /// validatingwebhookconfigurations,mutatingwebhookconfigurations -o json` prints
    /// them: webhooks the kube-apiserver calls through those Services make a finding critical.
    #[arg(long, env = "IPSHADOW_WEBHOOKS_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub webhooks: Option<PathBuf>,
    /// With --pods: Services as `kubectl get services -A -o json` prints them: a
    /// node address a Service claims (external IPs, a load-balancer IP, bound on
    /// kube-ipvs0 by kube-proxy in IPVS mode) shadowing a pod is named, and
    /// fixed by removing it there; without them such findings stay `unchecked`.
    #[arg(long, env = "IPSHADOW_SERVICES_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub services: Option<PathBuf>,
    /// With --pods: APIServices as `kubectl get apiservices -o json` prints them
    /// (aggregated APIs the kube-apiserver calls through a Service).
    #[arg(long, env = "IPSHADOW_APISERVICES_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub apiservices: Option<PathBuf>,
}

/// The address plan's objects from files, for `audit`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct PlanFiles {
    /// With --pods: the objects allocators keep their ranges in, as `kubectl get
    /// ipaddresspools.metallb.io,ciliumloadbalancerippools.cilium.io,ciliumpodippools.cilium.io,servicecidrs.networking.k8s.io,network-attachment-definitions.k8s.cni.cncf.io,ippools.crd.antrea.io,externalippools.crd.antrea.io
    /// -A -o json` prints them (any of these kinds, in one file or several), with
    /// kube-vip's ConfigMap (`kubectl get cm -n kube-system kubevip -o json`),
    /// ovn-kubernetes' (`ovnkube-config` in `ovn-kubernetes` or
    /// `openshift-ovn-kubernetes`; other ConfigMaps are skipped) and, for clusters
    /// without ServiceCIDRs, the `kubernetes`
    /// Service (`kubectl get svc -n default kubernetes -o json`: its ClusterIP), checked
    /// against each other and the Nodes, pods, Calico's pools and kube-ovn's Subnets:
    /// overlaps that will collide. Repeat or comma-separate the flag for several files.
    #[arg(long = "address-plan", env = "IPSHADOW_ADDRESS_PLAN_FILES", value_delimiter = ',',
          requires = "pods", help_heading = FILES_HEADING)]
    pub address_plan: Vec<PathBuf>,
}

/// Calico's IPAM objects from files, for `check` and `audit` (never the agent:
/// they are cluster-wide, and `audit` lists them from the cluster).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct CalicoFiles {
    /// With --pods: Calico's IPAMBlocks as `kubectl get ipamblocks.crd.projectcalico.org -o
    /// json` prints them: a Node's Calico tunnel address no block allocates to its tunnel
    /// (an unallocated tunnel address), and a pod on a block address allocated to a
    /// tunnel (a collision with it) even where no annotation names it.
    #[arg(long, env = "IPSHADOW_IPAMBLOCKS_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub ipamblocks: Option<PathBuf>,
    /// With --pods: Calico's IPPools as `kubectl get ippools.crd.projectcalico.org -o json`
    /// prints them: the ranges Calico gives pods addresses from, once its IPAMBlocks
    /// (--ipamblocks) or a node's own pods show its IPAM in use there.
    #[arg(long, env = "IPSHADOW_IPPOOLS_FILE", requires = "pods", help_heading = FILES_HEADING)]
    pub ippools: Option<PathBuf>,
}

/// A namespace name: a DNS label (RFC 1123), at most 63 characters.
fn dns_label(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    ok.then(|| s.to_owned()).ok_or_else(|| {
        format!("{s:?} is not a namespace name (lowercase letters, digits and '-', at most 63)")
    })
}

/// No client for the API server could be made.
#[derive(Debug, thiserror::Error)]
#[error(
    "connecting to the Kubernetes API failed: {}; set KUBECONFIG (or run in a pod with a \
     service account), or pass --pods/--ciliumnodes/--subnets files", Chain(.0))]
pub struct ClientError(kube::Error);

/// A client from KUBECONFIG (or `~/.kube/config`), else the in-cluster service account.
pub async fn client() -> Result<kube::Client, ClientError> {
    kube::Client::try_default().await.map_err(ClientError)
}

/// Like [`client`], without the client's own retries of 429/503/504: for calls
/// whose refusal the caller waits out itself (an eviction a PodDisruptionBudget
/// blocks is tried again after the remediation interval, not within seconds).
pub async fn client_without_retries() -> Result<kube::Client, ClientError> {
    let mut config = kube::Config::infer()
        .await
        .map_err(|e| ClientError(kube::Error::InferConfig(e)))?;
    config.default_retry = false;
    kube::Client::try_from(config).map_err(ClientError)
}

/// How Cilium's and the pods' addresses are read: the same for one node and for an audit.
#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    /// The device that carries Cilium's router IP.
    #[arg(long, env = "IPSHADOW_ROUTER_DEVICE", default_value = crate::inventory::DEFAULT_ROUTER_DEVICE)]
    pub router_device: String,
    /// Pod annotation(s) holding the IP a CNI assigned before the pod has a status IP
    /// (comma-separated values are dual stack). Repeat or comma-separate the flag for several keys.
    #[arg(
        long = "pod-ip-annotation",
        env = "IPSHADOW_POD_IP_ANNOTATIONS",
        value_delimiter = ',',
        default_value = crate::inventory::DEFAULT_POD_IP_ANNOTATION
    )]
    pub pod_ip_annotations: Vec<String>,
}
