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
#[command(name = "ipshadow", version)]
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
    Check(check::Args),
    /// Audit every node of the cluster from the API (or files), no agent needed:
    /// every finding visible without a node's kernel, and pods sharing an IP.
    /// Exit 0: none; 1: findings; 2: error.
    Audit(audit::Args),
    /// Run as the node agent (the DaemonSet process): reconcile on every change,
    /// serve /metrics, /healthz and /readyz.
    #[cfg(target_os = "linux")]
    Agent(Box<daemon::Args>),
    /// Print the flag reference as Markdown, or rewrite docs/reference.md's
    /// generated part (`cargo xtask docs`).
    #[command(hide = true)]
    Docs(reference::Args),
}

/// `kubectl ipshadow`: the plugin offers what needs no node, the audit.
#[derive(Debug, Parser)]
#[command(name = "kubectl ipshadow", bin_name = "kubectl ipshadow", version)]
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

/// Logging flags.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log filter (tracing EnvFilter syntax, e.g. `info` or `ipshadow=debug`).
    #[arg(long, env = "IPSHADOW_LOG", default_value = "info", global = true)]
    pub log_level: String,
    /// Log format on stderr.
    #[arg(long, env = "IPSHADOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
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
