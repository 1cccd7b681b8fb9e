//! Where the Kubernetes side of the inventory comes from. For now: files as
//! `kubectl get -o json` prints them (the cluster comes with the kube layer).
//! Each source keeps its last good content, so a file caught half-written or
//! broken degrades that source, never the findings of the others.

use std::path::{Path, PathBuf};

use ipnet::IpNet;

use crate::{
    cli::NodeArgs,
    inventory::{CiliumNode, Pod, Subnet},
    kube::{Invalid, files},
};

/// The Kubernetes objects one reconcile looks at.
#[derive(Clone, Debug, Default)]
pub struct KubeState {
    pub pods: Vec<Pod>,
    pub cilium_nodes: Vec<CiliumNode>,
    pub subnets: Vec<Subnet>,
    /// This node's `spec.podCIDRs`, when its Node object is known.
    pub node_pod_cidrs: Vec<IpNet>,
    /// Objects (or fields) skipped as malformed in the last read.
    pub invalid: Vec<Invalid>,
}

/// One source's name as metrics label it, and whether its last read worked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceStatus {
    pub source: &'static str,
    pub up: bool,
}

pub struct FileSources {
    pods: PathBuf,
    ciliumnodes: Option<PathBuf>,
    subnets: Option<PathBuf>,
    annotation_keys: Vec<String>,
    state: KubeState,
    invalid: [Vec<Invalid>; 3],
    status: Vec<SourceStatus>,
}

impl FileSources {
    pub fn new(
        pods: PathBuf,
        ciliumnodes: Option<PathBuf>,
        subnets: Option<PathBuf>,
        node: &NodeArgs,
    ) -> Self {
        Self {
            pods,
            ciliumnodes,
            subnets,
            annotation_keys: node.pod_ip_annotations.clone(),
            state: KubeState::default(),
            invalid: Default::default(),
            status: Vec::new(),
        }
    }

    /// The files to watch for changes.
    pub fn paths(&self) -> Vec<&Path> {
        std::iter::once(self.pods.as_path())
            .chain(self.ciliumnodes.as_deref())
            .chain(self.subnets.as_deref())
            .collect()
    }

    /// Re-reads every file. A file that fails keeps its last good content; its
    /// error is returned (with the others) for the caller to log or fail on.
    pub fn refresh(&mut self) -> Vec<files::Error> {
        let mut errors = Vec::new();
        let mut status = Vec::new();
        let mut invalid = Vec::new();
        match files::pods(&self.pods, &self.annotation_keys, &mut invalid) {
            Ok(p) => {
                self.state.pods = p;
                self.invalid[0] = std::mem::take(&mut invalid);
                status.push(SourceStatus {
                    source: "pods",
                    up: true,
                });
            }
            Err(e) => {
                errors.push(e);
                status.push(SourceStatus {
                    source: "pods",
                    up: false,
                });
            }
        }
        if let Some(path) = &self.ciliumnodes {
            match files::cilium_nodes(path, &mut invalid) {
                Ok(c) => {
                    self.state.cilium_nodes = c;
                    self.invalid[1] = std::mem::take(&mut invalid);
                    status.push(SourceStatus {
                        source: "ciliumnodes",
                        up: true,
                    });
                }
                Err(e) => {
                    errors.push(e);
                    status.push(SourceStatus {
                        source: "ciliumnodes",
                        up: false,
                    });
                }
            }
        }
        if let Some(path) = &self.subnets {
            match files::subnets(path, &mut invalid) {
                Ok(s) => {
                    self.state.subnets = s;
                    self.invalid[2] = std::mem::take(&mut invalid);
                    status.push(SourceStatus {
                        source: "subnets",
                        up: true,
                    });
                }
                Err(e) => {
                    errors.push(e);
                    status.push(SourceStatus {
                        source: "subnets",
                        up: false,
                    });
                }
            }
        }
        self.state.invalid = self.invalid.concat();
        self.status = status;
        errors
    }

    pub fn state(&self) -> &KubeState {
        &self.state
    }

    pub fn status(&self) -> &[SourceStatus] {
        &self.status
    }

    /// Whether the one source detection cannot do without (pods) has been read.
    pub fn has_pods(&self) -> bool {
        self.status.iter().any(|s| s.source == "pods" && s.up)
    }
}
