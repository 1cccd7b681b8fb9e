//! `ipshadow audit` (also `kubectl ipshadow audit`): every node's findings
//! that need no node's kernel, from the API or from files, on a laptop.

use std::{io::IsTerminal as _, time::Instant};

use crate::{
    detect::audit::{Audit, audit},
    inventory::{AsRead, ClusterState, Invalid},
    kube::{
        self, CalicoFiles, PlanFiles, ReadArgs, SourceArgs,
        connect::{ConnectArgs, KubeconfigError},
        list::{Behind, ListError, ListOptions, Read, Scope, cluster_state, routes},
        sources::FileSources,
    },
    report::output::OutputFormat,
};

/// `ipshadow audit`: the flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format, as kubectl's `-o`: `text` (a table for people), `json` (the
    /// contract of docs/reference.md), `yaml` (the same document), or `wide` (the
    /// table with severity, ip source, the kernel's route and who else holds the address).
    #[arg(long, short = 'o', env = "IPSHADOW_OUTPUT", value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    // The connection first: `--help` lists the headings in the order of their
    // first flag, and the files last.
    /// `--kubeconfig`, `--context`.
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// How addresses are read.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Files, or the cluster (`--pods` and the rest as `check` takes them).
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Calico's IPAM objects, from files.
    #[command(flatten)]
    pub calico: CalicoFiles,
    /// The address plan's objects, from files.
    #[command(flatten)]
    pub plan: PlanFiles,
}

/// Why an audit could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input file could not be read.
    #[error(transparent)]
    Files(#[from] kube::files::Error),
    /// The kubeconfig could not be used.
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    /// A list failed.
    #[error(transparent)]
    List(#[from] ListError),
}

/// Progress on stderr: live on a terminal; otherwise a line per resource listed
/// and per tenth of the nodes on large clusters, so a CI log shows it moving.
struct Progress {
    tty: bool,
    started: Instant,
    last_tenth: usize,
}

impl Progress {
    /// Nodes below which an audit is quick enough to say nothing while it runs.
    const QUIET_BELOW: usize = 500;

    fn listed(&mut self, what: &str, n: usize, done: bool) {
        if self.tty {
            eprint!("\r\x1b[2Klisting {what}: {n}");
            if done {
                eprintln!();
            }
        } else if done {
            eprintln!(
                "listed {n} {what} ({:.1} s)",
                self.started.elapsed().as_secs_f64()
            );
        }
    }

    fn audited(&mut self, done: usize, total: usize) {
        if total < Self::QUIET_BELOW {
            return;
        }
        if self.tty {
            eprint!("\r\x1b[2Kauditing nodes: {done}/{total}");
            if done == total {
                eprintln!();
            }
        } else if done * 10 / total > self.last_tenth {
            self.last_tenth = done * 10 / total;
            eprintln!(
                "audited {done}/{total} nodes ({:.1} s)",
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

/// Which Node and pod addresses a Service claims (kube-proxy in IPVS mode
/// binds them everywhere): only those are kept of the Services, and the
/// `kubernetes` Service's cluster IP for the plan. Optional, as every source:
/// without `list services` the rest of the audit stands.
async fn with_services(
    client: &::kube::Client,
    read: &mut ClusterState<AsRead>,
    progress: &mut Progress,
) {
    let wanted = claimable(read);
    match kube::cluster::services_claiming(client, &wanted).await {
        Ok(services) => {
            progress.listed("Service addresses", services.by_ip.len(), true);
            let api = crate::cni::kubernetes::api_service_ips(&services.api_service);
            std::sync::Arc::make_mut(&mut read.plan).extend(api);
            read.services = std::sync::Arc::new(services);
        }
        Err(e) => {
            tracing::warn!(
                error = %e,
                "listing Services failed: Services claiming node or pod addresses are not \
                 checked (grant `list services` to check them)"
            );
            // The `kubernetes` Service's cluster IP came with that list.
            std::sync::Arc::make_mut(&mut read.plan_unlisted).push(crate::inventory::Unlisted {
                resource: "services".to_owned(),
                reason: format!("{e} (`kubectl auth can-i list services`)"),
            });
        }
    }
}

/// Reads the cluster (or the files) and audits every node.
pub async fn run(args: &Args) -> Result<(Audit, Vec<Invalid>), Error> {
    let mut progress = Progress {
        tty: std::io::stderr().is_terminal(),
        started: Instant::now(),
        last_tenth: 0,
    };
    let keys = &args.read.pod_ip_annotations;
    let (state, client) = if let Some(files) = FileSources::new(&args.sources, keys) {
        let mut files = files.with_calico(&args.calico).with_plan(&args.plan);
        if let Some(e) = files.refresh().into_iter().next() {
            return Err(e.into());
        }
        (files.state().clone(), None)
    } else {
        let client = args.connect.client().await?;
        let mut read = cluster_state(
            &client,
            Scope::Cluster,
            ListOptions {
                annotation_keys: keys,
                cilium_namespace: &args.sources.cilium_namespace,
            },
            &mut |what, n, done| progress.listed(what, n, done),
        )
        .await?;
        with_services(&client, &mut read, &mut progress).await;
        (ClusterState::assemble(read), Some(client))
    };
    let mut result = audit(&state, &args.read.router_device, &mut |done, total| {
        progress.audited(done, total);
    });
    // What breaks behind the pods with findings: their namespaces' Services only.
    let behind = Behind::of(result.findings());
    let routes = match client {
        Some(client) if !behind.is_empty() => {
            routes(&client, &behind, Read::Pages, &mut |what, n, done| {
                progress.listed(what, n, done);
            })
            .await?
        }
        _ => state.routes.as_ref().clone(),
    };
    result.assess(&routes);
    Ok((result, std::sync::Arc::unwrap_or_clone(state.invalid)))
}

/// The addresses the audit asks the Services about: the Nodes' own and the
/// pods' status IPs (what [`crate::detect::vip`] compares them with).
fn claimable(state: &ClusterState<AsRead>) -> std::collections::BTreeSet<std::net::IpAddr> {
    let nodes = state
        .nodes
        .iter()
        .flat_map(|n| n.addresses.iter().map(|a| a.ip));
    let pods = state.pods.iter().flat_map(|p| {
        p.ips
            .iter()
            .filter(|i| i.source == crate::inventory::IpSource::Status)
            .map(|i| i.ip)
    });
    nodes.chain(pods).collect()
}
