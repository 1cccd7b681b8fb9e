//! Which cluster `check` and `audit` read: the kubeconfig and context a
//! kubectl user passes, else the one kubectl itself would use.

use std::path::PathBuf;

use ::kube::config::{Config, KubeConfigOptions, Kubeconfig};

use super::CLUSTER_HEADING;
use crate::report::chain::Chain;

/// `--kubeconfig` and `--context`, as kubectl takes them.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ConnectArgs {
    /// The kubeconfig to use (default: KUBECONFIG, else ~/.kube/config, else the
    /// in-cluster service account).
    #[arg(long, env = "IPSHADOW_KUBECONFIG", help_heading = CLUSTER_HEADING)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, env = "IPSHADOW_CONTEXT", help_heading = CLUSTER_HEADING)]
    pub context: Option<String>,
}

/// The kubeconfig could not be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "reading the kubeconfig failed: {0}; pass --kubeconfig and --context, set KUBECONFIG, or \
     pass --pods (and the other files) instead of reading the cluster"
)]
pub struct KubeconfigError(String);

impl ConnectArgs {
    /// A client from `--kubeconfig`/`--context`, else as kubectl finds one.
    pub async fn client(&self) -> Result<::kube::Client, KubeconfigError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let bad = |e: &dyn std::error::Error| KubeconfigError(Chain(e).to_string());
        let config = match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let file = Kubeconfig::read_from(path).map_err(|e| bad(&e))?;
                Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|e| bad(&e))?
            }
            (None, Some(_)) => Config::from_kubeconfig(&options)
                .await
                .map_err(|e| bad(&e))?,
            (None, None) => Config::infer().await.map_err(|e| bad(&e))?,
        };
        ::kube::Client::try_from(config).map_err(|e| bad(&e))
    }
}
