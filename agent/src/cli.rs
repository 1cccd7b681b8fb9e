//! Command line: `ipshadow check` (one shot) and `ipshadow agent` (the
//! DaemonSet process), made of the subsystems' own `Args`. Every flag has an
//! environment fallback so a DaemonSet can set it. [`reference`] renders
//! them all as Markdown for docs/reference.md.

pub mod reference;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::audit;
#[cfg(target_os = "linux")]
use crate::{check, daemon};

/// Finds pod IPs shadowed by addresses the node itself holds (Cilium router/ingress/health IPs, other local addresses) and host routes that blackhole pods.
#[derive(Debug, Parser)]
#[command(name = "ipshadow", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Logging, for every subcommand.
    #[command(flatten)]
    pub log: LogArgs,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check this node once and print the findings. Exit 0: none; 1: findings; 2: error.
    #[cfg(target_os = "linux")]
    #[command(after_help = CHECK_EXAMPLES)]
    Check(check::Args),
    /// Audit every node of the cluster from the API (or files), no agent needed:
    /// every finding visible without a node's kernel, and pods sharing an IP.
    /// Exit 0: none; 1: findings; 2: error.
    #[command(after_help = AUDIT_EXAMPLES)]
    Audit(audit::Args),
    /// Run as the node agent (the DaemonSet process): reconcile on every change,
    /// serve /metrics, /healthz and /readyz.
    #[cfg(target_os = "linux")]
    #[command(after_help = AGENT_EXAMPLES)]
    Agent(Box<daemon::Args>),
    /// Print the flag reference as Markdown, or rewrite docs/reference.md's
    /// generated part (`cargo xtask docs`).
    #[command(hide = true)]
    Docs(reference::Args),
}

/// `kubectl ipshadow`: the plugin offers what needs no node, the audit.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl ipshadow",
    bin_name = "kubectl ipshadow",
    version,
    after_help = PLUGIN_EXAMPLES
)]
pub struct PluginCli {
    /// Logging.
    #[command(flatten)]
    pub log: LogArgs,
    /// What to run.
    #[command(subcommand)]
    pub command: PluginCommand,
}

/// The plugin's subcommands.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Audit every node of the cluster from the API (or files), no agent needed:
    /// every finding visible without a node's kernel, and pods sharing an IP.
    /// Exit 0: none; 1: findings; 2: error.
    #[command(after_help = PLUGIN_EXAMPLES)]
    Audit(audit::Args),
}

impl From<PluginCli> for Cli {
    fn from(plugin: PluginCli) -> Self {
        let PluginCommand::Audit(args) = plugin.command;
        Self {
            log: plugin.log,
            command: Command::Audit(args),
        }
    }
}

// Examples in `--help`: the command lines a user types first.

const EXAMPLES: &str = "\
Examples:
  # Every node of the current kubeconfig context, from the API (no agent needed)
  ipshadow audit
  # This node, with its kernel's view (on the node, as root)
  ipshadow check
  # A subcommand's flags and examples
  ipshadow audit --help";

#[cfg(target_os = "linux")]
const CHECK_EXAMPLES: &str = "\
Examples:
  # This node against the cluster (on the node, as root; NODE_NAME or the hostname names it)
  ipshadow check
  # As JSON or YAML for scripts, or with more columns
  ipshadow check -o json
  ipshadow check -o wide
  # Also watch host traffic to the shadowed IPs for a minute (eBPF)
  ipshadow check --watch-seconds 60
  # One node from files, where the node cannot reach the API
  kubectl get pods -A -o json > pods.json
  kubectl get ciliumnodes -o json > ciliumnodes.json
  ipshadow check --node node-a --pods pods.json --ciliumnodes ciliumnodes.json";

const AUDIT_EXAMPLES: &str = "\
Examples:
  # Every node of the current kubeconfig context
  ipshadow audit
  # Another kubeconfig and context, as YAML
  ipshadow audit --kubeconfig ~/.kube/prod.yaml --context prod -o yaml
  # One node's findings, with jq
  ipshadow audit -o json | jq '.nodes[] | select(.node == \"node-a\")'
  # From files someone else listed
  ipshadow audit --pods pods.json --ciliumnodes ciliumnodes.json --nodes nodes.json";

#[cfg(target_os = "linux")]
const AGENT_EXAMPLES: &str = "\
Examples:
  # As the DaemonSet runs it (deploy/ and the Helm chart set the flags through IPSHADOW_* env)
  NODE_NAME=node-a ipshadow agent
  # eBPF required, metrics on another port, no Node condition
  ipshadow agent --ebpf required --listen 0.0.0.0:9965 --node-condition false
  # Kubernetes state from files, re-read when they change, instead of the API
  ipshadow agent --node node-a --pods pods.json --ciliumnodes ciliumnodes.json";

const PLUGIN_EXAMPLES: &str = "\
Examples:
  # Every node of the current context
  kubectl ipshadow audit
  # Another context, as YAML, or with more columns
  kubectl ipshadow audit --context prod -o yaml
  kubectl ipshadow audit -o wide
  # One node's findings, with jq
  kubectl ipshadow audit -o json | jq '.nodes[] | select(.node == \"node-a\")'";

/// The logging flags' place among each subcommand's options: after its own.
const LAST: usize = 1000;

/// Logging flags.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log filter (tracing EnvFilter syntax, e.g. `info` or `ipshadow=debug`).
    #[arg(long, env = "IPSHADOW_LOG", default_value = "info", global = true, display_order = LAST)]
    pub log_level: String,
    /// Log format on stderr.
    #[arg(long, env = "IPSHADOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true,
          display_order = LAST + 1)]
    pub log_format: LogFormat,
}

/// Log format on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
        PluginCli::command().debug_assert();
    }

    #[test]
    fn the_plugin_offers_only_the_audit() {
        let names: Vec<String> = PluginCli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        assert_eq!(names, ["audit"]);
        let refused = PluginCli::try_parse_from(["kubectl-ipshadow", "agent"])
            .expect_err("the agent is not a plugin command");
        assert_eq!(refused.kind(), clap::error::ErrorKind::InvalidSubcommand);
    }

    #[test]
    fn output_takes_kubectls_formats_and_the_former_table() {
        use crate::report::output::OutputFormat;
        for (value, want) in [
            ("text", OutputFormat::Table),
            ("table", OutputFormat::Table),
            ("json", OutputFormat::Json),
            ("yaml", OutputFormat::Yaml),
            ("wide", OutputFormat::Wide),
        ] {
            let cli = PluginCli::try_parse_from(["kubectl-ipshadow", "audit", "-o", value])
                .unwrap_or_else(|e| panic!("-o {value}: {e}"));
            let PluginCommand::Audit(a) = cli.command;
            assert_eq!(a.output, want, "-o {value}");
        }
        let refused = PluginCli::try_parse_from(["kubectl-ipshadow", "audit", "-o", "name"])
            .expect_err("-o name is no format of ours");
        assert_eq!(refused.kind(), clap::error::ErrorKind::InvalidValue);
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
        assert_eq!(c.node.read.pod_ip_annotations, ["a/ip", "b/ip"]);
        assert_eq!(c.node.read.router_device, "cilium_host");
        assert_eq!(c.output, crate::report::output::OutputFormat::Table);
    }
}
