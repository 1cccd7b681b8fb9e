//! `ipshadow check`: one reconcile, printed.

use crate::{
    cli::{NodeArgs, SourceArgs},
    detect::Finding,
    kube::{self, Invalid},
    reconcile::{self, Reconciler},
    sources::FileSources,
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Files(#[from] kube::files::Error),
    #[error(transparent)]
    Reconcile(#[from] reconcile::Error),
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

/// Reads the files and this node's netlink state, and detects. Any file that
/// cannot be read is an error: a one-shot check has no earlier state to fall back on.
pub async fn run(node: &NodeArgs, sources: &SourceArgs) -> Result<Report> {
    let mut files = FileSources::new(sources, node);
    if let Some(e) = files.refresh().into_iter().next() {
        return Err(e.into());
    }
    let reconciler = Reconciler::new(node)?;
    let findings = reconciler.reconcile(files.state()).await?;
    Ok(Report {
        node: reconciler.node.clone(),
        findings,
        invalid: files.state().invalid.clone(),
    })
}
