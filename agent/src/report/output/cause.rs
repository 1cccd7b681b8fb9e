//! The fields of a finding's JSON that only some causes fill.

use super::{JsonKernel, JsonService};
use crate::detect::{Cause, InfraAddress, KubeletReport, NodeProblem, PodRef};

/// The fields of [`JsonFinding`] that only some causes fill.
#[derive(Default)]
pub(super) struct CauseFields<'a> {
    pub(super) fib: Option<String>,
    pub(super) shadowed_route: Option<&'a str>,
    pub(super) subnet: Option<&'a str>,
    pub(super) cilium_range: Option<String>,
    pub(super) addresses: Option<&'a [InfraAddress]>,
    pub(super) kubelet: Option<&'a KubeletReport>,
    pub(super) holder: Option<&'a PodRef>,
    pub(super) service: Option<JsonService<'a>>,
    pub(super) kernel: Option<JsonKernel<'a>>,
}

impl<'a> CauseFields<'a> {
    pub(super) fn of(cause: &'a Cause) -> Self {
        match cause {
            Cause::Collision { .. } => Self::collision(cause),
            // The FIB answer of a blackhole is where the packet dies.
            Cause::Blackhole { dead_end, .. } => Self {
                fib: Some(dead_end.to_string()),
                ..Self::default()
            },
            Cause::Refused {
                kubelet, holder, ..
            }
            | Cause::Leftover {
                kubelet, holder, ..
            } => Self {
                kubelet: Some(kubelet),
                holder: holder.as_ref(),
                ..Self::default()
            },
            Cause::Duplicate { holder, .. } => Self {
                holder: Some(holder),
                ..Self::default()
            },
            Cause::Node(NodeProblem::Exhausted { kubelet, .. }) => Self {
                kubelet: Some(kubelet),
                ..Self::default()
            },
            Cause::Node(_) | Cause::Plan(_) => Self::default(),
            Cause::Kernel(k) => Self {
                kernel: Some(JsonKernel {
                    row: &k.row,
                    reached: k.reached.as_ref(),
                    other_pod: k.other_pod.as_ref(),
                }),
                holder: k.other_pod.as_ref(),
                ..Self::default()
            },
            Cause::Overlap {
                subnet,
                cilium_range,
                addresses,
                ..
            } => Self {
                subnet: Some(subnet.as_str()),
                cilium_range: cilium_range.map(|(r, _)| r.to_string()),
                addresses: Some(addresses.as_slice()),
                ..Self::default()
            },
        }
    }

    fn collision(cause: &'a Cause) -> Self {
        let Cause::Collision {
            fib,
            shadowed_route,
            kubelet,
            service,
            ..
        } = cause
        else {
            return Self::default();
        };
        Self {
            fib: fib.clone(),
            shadowed_route: shadowed_route.as_deref(),
            kubelet: kubelet.as_ref(),
            service: service.as_ref().map(|a| JsonService {
                namespace: &a.service.namespace,
                name: &a.service.name,
                field: a.field.as_str(),
            }),
            ..Self::default()
        }
    }
}
