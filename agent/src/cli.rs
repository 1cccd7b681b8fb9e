//! Command line: `ipshadow check` (one shot) and, later, `ipshadow agent`.
//! Every flag has an environment fallback so a DaemonSet can set it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::{
    ebpf::AttachMode,
    inventory::{DEFAULT_POD_IP_ANNOTATION, DEFAULT_ROUTER_DEVICE},
};

#[derive(Debug, Parser)]
#[command(
    name = "ipshadow",
    version,
    about = "Finds pod IPs shadowed by addresses the node itself holds (Cilium router/ingress/health IPs, other local addresses) and host routes that blackhole pods."
)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check this node once and print the findings. Exit 0: none; 1: findings; 2: error.
    Check(CheckArgs),
    /// Run as the node agent (the DaemonSet process): reconcile on every change,
    /// serve /metrics, /healthz and /readyz.
    Agent(AgentArgs),
}

/// Where the agent listens by default: a port none of Cilium (4240, 4244, 9234,
/// 9876-9879, 9890-9893, 9962-9965), kube-ovn (8080, 10660-10665), the kubelet and
/// kube-proxy (10248-10256) or node-exporter (9100) use on the host network.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9785";

#[derive(Debug, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub ebpf: EbpfArgs,
    /// Address of the metrics and health endpoints (127.0.0.1:PORT for localhost only).
    #[arg(long, env = "IPSHADOW_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: std::net::SocketAddr,
    /// Full resync period, in seconds, on top of change notifications.
    #[arg(long, env = "IPSHADOW_RESYNC_SECONDS", default_value_t = 300)]
    pub resync_seconds: u64,
    /// How long to wait for more changes before reconciling, in milliseconds.
    #[arg(long, env = "IPSHADOW_DEBOUNCE_MS", default_value_t = 20)]
    pub debounce_ms: u64,
    /// How often to read the eBPF counters while any IP is watched, in seconds
    /// (sampled new flows refresh them at once).
    #[arg(long, env = "IPSHADOW_COUNTERS_SECONDS", default_value_t = 10)]
    pub counters_seconds: u64,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log filter (tracing EnvFilter syntax, e.g. `info` or `ipshadow=debug`).
    #[arg(long, env = "IPSHADOW_LOG", default_value = "info", global = true)]
    pub log_level: String,
    /// Log format on stderr.
    #[arg(long, env = "IPSHADOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct NodeArgs {
    /// This node's name as Kubernetes knows it (`spec.nodeName`). Default: the hostname.
    #[arg(long, env = "NODE_NAME")]
    pub node: Option<String>,
    /// The device that carries Cilium's router IP.
    #[arg(long, env = "IPSHADOW_ROUTER_DEVICE", default_value = DEFAULT_ROUTER_DEVICE)]
    pub router_device: String,
    /// Pod annotation(s) holding the IP a CNI assigned before the pod has a status IP
    /// (comma-separated values are dual stack). Repeat or comma-separate the flag for several keys.
    #[arg(
        long = "pod-ip-annotation",
        env = "IPSHADOW_POD_IP_ANNOTATIONS",
        value_delimiter = ',',
        default_value = DEFAULT_POD_IP_ANNOTATION
    )]
    pub pod_ip_annotations: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Read Kubernetes state from files instead of the cluster: pods as `kubectl get
    /// pods -A -o json` prints them (all namespaces, so pods on other nodes holding
    /// this node's addresses are seen too). Without it, ipshadow watches the cluster
    /// (kubeconfig from KUBECONFIG or ~/.kube/config, else the in-cluster service account).
    #[arg(long, env = "IPSHADOW_PODS_FILE")]
    pub pods: Option<PathBuf>,
    /// With --pods: CiliumNodes as `kubectl get ciliumnodes -o json` prints them.
    /// Without them only what this node's kernel shows is checked.
    #[arg(long, env = "IPSHADOW_CILIUMNODES_FILE", requires = "pods")]
    pub ciliumnodes: Option<PathBuf>,
    /// With --pods: kube-ovn Subnets as `kubectl get subnets.kubeovn.io -o json` prints
    /// them, so Cilium addresses kube-ovn may hand out are found before a pod collides.
    #[arg(long, env = "IPSHADOW_SUBNETS_FILE", requires = "pods")]
    pub subnets: Option<PathBuf>,
    /// In cluster mode, how long to wait for the first list of each resource, in seconds.
    #[arg(long, env = "IPSHADOW_SYNC_TIMEOUT_SECONDS", default_value_t = 30)]
    pub sync_timeout_seconds: u64,
}

#[derive(Debug, Args)]
pub struct EbpfArgs {
    /// eBPF observer: `auto` uses it when the kernel and capabilities allow and
    /// runs netlink-only otherwise; `required` fails without it; `off` never loads it.
    #[arg(long = "ebpf", env = "IPSHADOW_EBPF", value_enum, default_value_t = EbpfMode::Auto)]
    pub mode: EbpfMode,
    /// How to attach the classifier to `lo`: `tcx` (kernel ≥ 6.6), `netlink` (legacy tc), or `auto`.
    #[arg(long, env = "IPSHADOW_TC_ATTACH", value_enum, default_value_t = AttachMode::Auto)]
    pub tc_attach: AttachMode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EbpfMode {
    Auto,
    Required,
    Off,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub sources: SourceArgs,
    #[command(flatten)]
    pub ebpf: EbpfArgs,
    /// Watch host traffic to the shadowed IPs for this many seconds with the eBPF
    /// classifier and add what it saw to each finding. 0: do not watch.
    #[arg(long, env = "IPSHADOW_WATCH_SECONDS", default_value_t = 0)]
    pub watch_seconds: u64,
    /// Output format.
    #[arg(long, short = 'o', env = "IPSHADOW_OUTPUT", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn annotation_keys_split_on_commas() {
        let cli = Cli::try_parse_from([
            "ipshadow",
            "check",
            "--pods",
            "p.json",
            "--pod-ip-annotation",
            "a/ip,b/ip",
        ])
        .expect("parses");
        let Command::Check(c) = cli.command else {
            panic!("not check: {:?}", cli.command);
        };
        assert_eq!(c.node.pod_ip_annotations, ["a/ip", "b/ip"]);
        assert_eq!(c.node.router_device, "cilium_host");
        assert_eq!(c.output, OutputFormat::Table);
    }
}
