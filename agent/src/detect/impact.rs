//! What breaks behind a finding: the Services whose EndpointSlices hold the
//! pod, and the webhooks and APIServices the kube-apiserver calls through them
//! (in the field report a `virt-operator` pod on another node's router IP was
//! the validating webhook that node's kube-apiserver called — it mattered more
//! than any probe).

use std::{collections::BTreeSet, net::IpAddr};

use serde::Serialize;

use super::{Finding, PodRef};
use crate::inventory::{Caller, Routes, ServiceRef};

/// How much breaks: what the finding's severity orders by.
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
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Severity {
    /// The kube-apiserver calls through the pod (a webhook, an aggregated API).
    Critical,
    /// The pod backs a Service.
    High,
    /// Nothing known routes to it.
    Warning,
}

impl Severity {
    /// The JSON and label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The Services holding a pod and the kube-apiserver's callers through them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impact {
    /// Services whose EndpointSlices hold the pod.
    pub services: Vec<ServiceRef>,
    /// Webhooks and APIServices that call one of them.
    pub callers: Vec<Caller>,
}

impl Impact {
    /// Critical when the kube-apiserver calls through it, high for a Service
    /// backend, warning otherwise.
    #[must_use]
    pub fn severity(&self) -> Severity {
        if !self.callers.is_empty() {
            Severity::Critical
        } else if !self.services.is_empty() {
            Severity::High
        } else {
            Severity::Warning
        }
    }
}

/// The impact of `pod` (holding `ip`) as `routes` show it: an endpoint names
/// the pod (`targetRef`) or holds its address, in the pod's namespace.
#[must_use]
pub fn impact(pod: &PodRef, ip: Option<IpAddr>, routes: &Routes) -> Impact {
    let services: BTreeSet<&ServiceRef> = routes
        .slices
        .iter()
        .filter_map(|s| s.service.as_ref().map(|svc| (svc, s)))
        .filter(|(svc, _)| svc.namespace == pod.namespace)
        .filter(|(_, s)| {
            s.endpoints.iter().any(|(name, addresses)| {
                name.as_deref() == Some(pod.name.as_str())
                    || ip.is_some_and(|ip| addresses.contains(&ip))
            })
        })
        .map(|(svc, _)| svc)
        .collect();
    let callers: BTreeSet<&Caller> = routes
        .callers
        .iter()
        .filter(|(_, svc)| services.contains(svc))
        .map(|(c, _)| c)
        .collect();
    Impact {
        services: services.into_iter().cloned().collect(),
        callers: callers.into_iter().cloned().collect(),
    }
}

/// The impact of a finding about a pod; `None` for node findings.
#[must_use]
pub fn of_finding(f: &Finding, routes: &Routes) -> Option<Impact> {
    f.pod().map(|p| impact(p, f.ip, routes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::EndpointSlice;

    fn svc(ns: &str, name: &str) -> ServiceRef {
        ServiceRef {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn pod(ns: &str, name: &str) -> PodRef {
        PodRef {
            namespace: ns.into(),
            name: name.into(),
            uid: String::new(),
        }
    }

    #[test]
    fn a_webhook_backend_is_critical_a_service_backend_high_and_a_plain_pod_a_warning() {
        let ip: IpAddr = "10.244.4.251".parse().expect("ip");
        let routes = Routes {
            slices: vec![
                EndpointSlice {
                    service: Some(svc("kubevirt", "virt-operator-webhook")),
                    endpoints: vec![(Some("virt-operator-0".into()), vec![ip])],
                },
                // Same name in another namespace: not this pod.
                EndpointSlice {
                    service: Some(svc("other", "web")),
                    endpoints: vec![(Some("web-0".into()), vec![])],
                },
                // By address alone (an endpoint without targetRef).
                EndpointSlice {
                    service: Some(svc("tenant", "web")),
                    endpoints: vec![(None, vec!["10.244.4.12".parse().expect("ip")])],
                },
            ],
            callers: vec![(
                Caller::ValidatingWebhook(
                    "virt-operator-validator".into(),
                    "virt-operator-validator.kubevirt.io".into(),
                ),
                svc("kubevirt", "virt-operator-webhook"),
            )],
        };
        let critical = impact(&pod("kubevirt", "virt-operator-0"), Some(ip), &routes);
        assert_eq!(critical.severity(), Severity::Critical);
        assert_eq!(critical.callers.len(), 1);
        let high = impact(
            &pod("tenant", "web-0"),
            Some("10.244.4.12".parse().expect("ip")),
            &routes,
        );
        assert_eq!(high.severity(), Severity::High);
        assert_eq!(high.services, [svc("tenant", "web")]);
        let plain = impact(&pod("tenant", "batch-0"), Some(ip), &routes);
        assert_eq!(plain.severity(), Severity::Warning);
    }
}
