//! The label sets of the agent's own metrics.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};

/// `ipshadow_build_info`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BuildLabels {
    pub(super) version: &'static str,
    /// The git commit built (agent/build.rs), or "unknown".
    pub(super) revision: &'static str,
}

/// `ipshadow_source_up`'s labels: `netlink`, `pods`, `ciliumnodes`, `subnets`, `ippools`,
/// `nodes`, …
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// The source.
    pub source: &'static str,
}

/// `ipshadow_invalid_objects_total`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// The resource the object belongs to.
    pub resource: &'static str,
}

/// `ipshadow_task_up`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskLabels {
    /// The task.
    pub task: &'static str,
}

/// `ipshadow_http_connections_rejected_total`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    /// `metrics` or `health`.
    pub listener: &'static str,
    /// The limit it was over: `listener` (--http-max-connections) or `peer`
    /// (--http-max-connections-per-peer).
    pub limit: &'static str,
}

/// `ipshadow_http_auth_total`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AuthLabels {
    /// allowed, unauthenticated, forbidden, unavailable or throttled.
    pub result: &'static str,
}

/// How a reconcile ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue, strum::EnumIter)]
#[allow(non_camel_case_types, reason = "the label values are lowercase")]
pub enum Outcome {
    /// It ran.
    ok,
    /// Reading the node failed.
    error,
}

/// What became of an Event write.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue, strum::EnumIter)]
#[allow(non_camel_case_types, reason = "the label values are lowercase")]
pub enum WriteResult {
    /// An Event object was created.
    created,
    /// A series' count was written back.
    patched,
    /// The write failed and will be retried.
    failed,
    /// A permanent error ended the series.
    dropped,
}

/// `ipshadow_event_writes_total`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// What became of the write.
    pub result: WriteResult,
}

/// `ipshadow_remediations_total`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RemediationLabels {
    /// `dry-run` or `evict`.
    pub action: &'static str,
    /// `would-evict`, `evicted`, `blocked`, `gone` or `failed`.
    pub result: &'static str,
}

/// `ipshadow_reconciles_total`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// How it ended.
    pub result: Outcome,
}
