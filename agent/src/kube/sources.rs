//! The cluster's state from files as `kubectl get -o json` prints them. Each
//! file keeps its last good content, so a file caught half-written or broken
//! degrades that source, never the findings of the others.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use super::{CalicoFiles, PlanFiles, SourceArgs, files};
use crate::inventory::{AsRead, ClusterState, Invalid, SourceStatus};

/// The input files and what was last read from them.
#[derive(Debug, Default)]
pub struct FileSources {
    pods: PathBuf,
    ciliumnodes: Option<PathBuf>,
    subnets: Option<PathBuf>,
    nodes: Option<PathBuf>,
    events: Option<PathBuf>,
    cilium_config: Option<PathBuf>,
    services: Option<PathBuf>,
    /// Calico's IPAMBlocks and IPPools.
    calico: [Option<PathBuf>; 2],
    /// EndpointSlices, webhook configurations, APIServices.
    routes: [Option<PathBuf>; 3],
    /// The address plan's objects.
    plan: Vec<PathBuf>,
    annotation_keys: Vec<String>,
    /// What the files held at their last good read.
    read: ClusterState<AsRead>,
    state: ClusterState,
    invalid: [Vec<Invalid>; 8],
    status: Vec<SourceStatus>,
}

/// Where the reads of one refresh report to.
#[derive(Default)]
struct Outcome {
    errors: Vec<files::Error>,
    status: Vec<SourceStatus>,
}

impl Outcome {
    /// One source: its new content and problems on success, the old ones kept on failure.
    fn read<T>(
        &mut self,
        source: &'static str,
        content: &mut T,
        invalid: &mut Vec<Invalid>,
        read: impl FnOnce(&mut Vec<Invalid>) -> files::Result<T>,
    ) {
        let mut problems = Vec::new();
        let up = match read(&mut problems) {
            Ok(value) => {
                *content = value;
                *invalid = problems;
                true
            }
            Err(e) => {
                self.errors.push(e);
                false
            }
        };
        self.status.push(SourceStatus {
            source,
            up,
            absent: false,
        });
    }
}

impl FileSources {
    /// The files `args` name (`None` without `--pods`: the cluster is the source).
    pub fn new(args: &SourceArgs, annotation_keys: &[String]) -> Option<Self> {
        Some(Self {
            pods: args.pods.clone()?,
            ciliumnodes: args.ciliumnodes.clone(),
            subnets: args.subnets.clone(),
            nodes: args.nodes.clone(),
            events: args.events.clone(),
            cilium_config: args.cilium_config.clone(),
            services: args.services.clone(),
            routes: [
                args.endpointslices.clone(),
                args.webhooks.clone(),
                args.apiservices.clone(),
            ],
            annotation_keys: annotation_keys.to_vec(),
            ..Self::default()
        })
    }

    /// Also reads Calico's IPAMBlocks and IPPools from the files `calico` names.
    #[must_use]
    pub fn with_calico(mut self, calico: &CalicoFiles) -> Self {
        self.calico = [calico.ipamblocks.clone(), calico.ippools.clone()];
        self
    }

    /// Also reads the address plan's objects from the files `plan` names.
    #[must_use]
    pub fn with_plan(mut self, plan: &PlanFiles) -> Self {
        self.plan.clone_from(&plan.address_plan);
        self
    }

    /// The files to watch for changes.
    pub fn paths(&self) -> Vec<&Path> {
        std::iter::once(self.pods.as_path())
            .chain(self.ciliumnodes.as_deref())
            .chain(self.subnets.as_deref())
            .chain(self.nodes.as_deref())
            .chain(self.events.as_deref())
            .chain(self.cilium_config.as_deref())
            .chain(self.services.as_deref())
            .chain(self.calico.iter().filter_map(Option::as_deref))
            .chain(self.routes.iter().filter_map(Option::as_deref))
            .chain(self.plan.iter().map(PathBuf::as_path))
            .collect()
    }

    /// Re-reads every file. A file that fails keeps its last good content; its
    /// error is returned (with the others) for the caller to log or fail on.
    pub fn refresh(&mut self) -> Vec<files::Error> {
        let mut out = Outcome::default();
        self.read_objects(&mut out);
        self.read_nodes(&mut out);
        self.read_calico(&mut out);
        self.read_context(&mut out);
        self.read_plan(&mut out);
        self.read.invalid = Arc::new(self.invalid.concat());
        self.state = ClusterState::assemble(self.read.clone());
        self.status = out.status;
        out.errors
    }

    /// Pods, CiliumNodes and kube-ovn Subnets.
    fn read_objects(&mut self, out: &mut Outcome) {
        let [pods_invalid, cns_invalid, subnets_invalid, ..] = &mut self.invalid;
        let keys = &self.annotation_keys;
        out.read("pods", &mut self.read.pods, pods_invalid, |bad| {
            files::pods(&self.pods, keys, bad).map(Arc::new)
        });
        if let Some(path) = &self.ciliumnodes {
            let nodes = &mut self.read.cilium_nodes;
            out.read("ciliumnodes", nodes, cns_invalid, |bad| {
                files::cilium_nodes(path, bad).map(Arc::new)
            });
        }
        if let Some(path) = &self.subnets {
            out.read("subnets", &mut self.read.subnets, subnets_invalid, |bad| {
                files::subnets(path, bad).map(Arc::new)
            });
        }
    }

    /// Nodes (their facts and Cilium's annotations) and `cilium-config`.
    fn read_nodes(&mut self, out: &mut Outcome) {
        let [_, _, _, nodes_invalid, config_invalid, ..] = &mut self.invalid;
        if let Some(path) = &self.nodes {
            let mut read = (
                Arc::clone(&self.read.annotated_nodes),
                Arc::clone(&self.read.nodes),
            );
            out.read("nodes", &mut read, nodes_invalid, |bad| {
                let (annotated, facts) = files::nodes(path, bad)?;
                Ok((Arc::new(annotated), Arc::new(facts)))
            });
            (self.read.annotated_nodes, self.read.nodes) = read;
        }
        if let Some(path) = &self.cilium_config {
            let config = &mut self.read.cilium_config;
            out.read("cilium-config", config, config_invalid, |bad| {
                files::cilium_config(path, bad).map(|c| Some(Arc::new(c)))
            });
        }
    }

    /// Calico's IPAMBlocks and IPPools: indexed together, each file keeping
    /// its last good content.
    fn read_calico(&mut self, out: &mut Outcome) {
        let [.., blocks_invalid, pools_invalid, _] = &mut self.invalid;
        let [blocks_path, pools_path] = &self.calico;
        let mut blocks = self.read.calico.blocks().to_vec();
        let mut pools = self.read.calico.pools.clone();
        if let Some(path) = blocks_path {
            out.read("ipamblocks", &mut blocks, blocks_invalid, |bad| {
                files::ipam_blocks(path, bad)
            });
        }
        if let Some(path) = pools_path {
            out.read("ippools", &mut pools, pools_invalid, |bad| {
                files::ip_pools(path, bad)
            });
        }
        if blocks_path.is_some() || pools_path.is_some() {
            self.read.calico = Arc::new(crate::inventory::CalicoIpam::new(blocks, pools));
        }
    }

    /// What findings are read against: sandbox refusals, Services, and what
    /// routes to pods.
    fn read_context(&mut self, out: &mut Outcome) {
        if let Some(path) = &self.events {
            out.read("events", &mut self.read.sandbox, &mut Vec::new(), |_| {
                files::sandbox_failures(path).map(Arc::new)
            });
        }
        if let Some(path) = &self.services {
            out.read("services", &mut self.read.services, &mut Vec::new(), |_| {
                files::services(path).map(Arc::new)
            });
        }
        if self.routes.iter().any(Option::is_some) {
            out.read("routes", &mut self.read.routes, &mut Vec::new(), |_| {
                super::objects::impact::from_files(&self.routes).map(Arc::new)
            });
        }
    }

    /// The address plan: every file's ranges, together (one file failing
    /// keeps the last good read of all).
    fn read_plan(&mut self, out: &mut Outcome) {
        if self.plan.is_empty() {
            return;
        }
        let [.., plan_invalid] = &mut self.invalid;
        let paths = &self.plan;
        out.read("address plan", &mut self.read.plan, plan_invalid, |bad| {
            let mut all = Vec::new();
            for path in paths {
                all.extend(files::plan(path, bad)?);
            }
            Ok(Arc::new(all))
        });
    }

    /// What was last read.
    pub fn state(&self) -> &ClusterState {
        &self.state
    }

    /// Whether each file's last read worked.
    pub fn status(&self) -> &[SourceStatus] {
        &self.status
    }

    /// Whether the one source detection cannot do without (pods) has been read.
    pub fn has_pods(&self) -> bool {
        self.status.iter().any(|s| s.source == "pods" && s.up)
    }
}
