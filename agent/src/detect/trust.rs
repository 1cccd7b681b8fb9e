//! How far a finding can be trusted: who could have written what it rests on.
//!
//! A tenant can create pods, Services and Events in its own namespaces, and
//! annotate its pods. It cannot write the node's kernel, Nodes, CiliumNodes,
//! kube-ovn's Subnets and IP records, or pod status (kubelet writes that). A
//! finding is as trustworthy as its least trusted part, and what the agent does
//! with it follows:
//!
//! | trust | evicted (`--remediate evict`) | speaks for the node (Node Event, condition, alerts) |
//! |---|---|---|
//! | `kernel`, `cluster` | yes | yes |
//! | `unchecked` (a node address not yet checked against the Services) | not yet | yes |
//! | `tenant-address` (a Service's address a tenant chose shadows the pod, a range a tenant's attachment declares overlaps) | never: remove the address | yes |
//! | `hint` (a pod annotation, an Event) | never | never |

use serde::Serialize;

use crate::inventory::{IpSource, Source};

/// Who could have written what a finding rests on, most trusted first.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumIter,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Trust {
    /// The node's own kernel.
    Kernel,
    /// Objects only the cluster's components write: CiliumNodes, Nodes,
    /// kube-ovn's Subnets and IP records, cilium-config, pod status.
    Cluster,
    /// A local address of the node that may be a Service's: not yet checked.
    Unchecked,
    /// A Service's address shadows the pod, or a range of the address plan a
    /// tenant's object declares overlaps another: sound evidence, but a tenant
    /// chose the address (external IPs, a load-balancer IP, a requested
    /// ClusterIP, a NetworkAttachmentDefinition's range).
    TenantAddress,
    /// Rests on what a tenant can write: a pod's IP annotation, an Event.
    Hint,
}

impl Trust {
    /// The name in JSON and metric labels.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether remediation may act on it: nothing a tenant wrote or chose.
    pub fn acted_on(self) -> bool {
        self <= Self::Cluster
    }

    /// Whether it may speak for the node (a Node Event, the Node condition,
    /// the counts alerts fire on): anything but a hint.
    pub fn speaks_for_node(self) -> bool {
        self < Self::Hint
    }

    /// How far a pod address read from `source` is trusted.
    pub fn of_ip(source: &IpSource) -> Self {
        match source {
            IpSource::Status | IpSource::KubeOvnIp => Self::Cluster,
            IpSource::Annotation | IpSource::Event | IpSource::NetworkStatus | IpSource::Kernel => {
                Self::Hint
            }
        }
    }

    /// How far an owner's address read from `source` is trusted.
    pub fn of_source(source: Source) -> Self {
        match source {
            Source::Kernel => Self::Kernel,
            // Anyone who may create or edit pods writes these.
            Source::KubeletEvent | Source::PodNetworkStatus => Self::Hint,
            Source::SpecAddresses
            | Source::SpecIngress
            | Source::SpecHealth
            | Source::StatusIpamUsed
            | Source::NodeAnnotation
            | Source::LegacyNodeAnnotation
            | Source::CalicoNodeAnnotation
            | Source::OvnNodeAnnotation
            | Source::OvnJoinAnnotation
            | Source::OvnTransitAnnotation
            | Source::OvnNodeId
            | Source::PodStatus
            | Source::OperatorStatus
            | Source::CiliumConfig
            | Source::NodeStatus
            | Source::Subnets
            | Source::CalicoIpamBlock
            | Source::AddressPlan => Self::Cluster,
            // Any user who may create a Service sets its external IPs.
            Source::Services => Self::TenantAddress,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_no_tenant_writes_is_acted_on_and_hints_never_speak_for_the_node() {
        let acted: Vec<Trust> = [
            Trust::Kernel,
            Trust::Cluster,
            Trust::Unchecked,
            Trust::TenantAddress,
            Trust::Hint,
        ]
        .into_iter()
        .filter(|t| t.acted_on())
        .collect();
        assert_eq!(acted, [Trust::Kernel, Trust::Cluster]);
        assert!(Trust::TenantAddress.speaks_for_node());
        assert!(!Trust::Hint.speaks_for_node());
        assert_eq!(Trust::of_ip(&IpSource::Event), Trust::Hint);
        assert_eq!(Trust::of_ip(&IpSource::KubeOvnIp), Trust::Cluster);
        assert_eq!(Trust::of_source(Source::KubeletEvent), Trust::Hint);
        // The least trusted part decides.
        assert_eq!(Trust::Kernel.max(Trust::Hint), Trust::Hint);
    }
}
