//! What breaks behind a shadowed pod, from the real agent against the test API
//! server: a pod behind a Service a ValidatingWebhookConfiguration calls is
//! `critical` in the metrics (and pages) and its Event says so first, a plain
//! pod stays `warning`; the lookups are lists of the namespaces with findings
//! only, from the watch cache.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests,
    http::sample,
    lab::{INGRESS, Lab, ME, ROUTER, cozystack, event, wait_for},
    node::SimNode,
    objects::pod,
};
use serde_json::json;

#[test]
fn a_webhook_backend_on_a_shadowed_ip_is_critical_and_a_plain_pod_a_warning() {
    if !can_run_netns_tests(
        "a_webhook_backend_on_a_shadowed_ip_is_critical_and_a_plain_pod_a_warning",
    ) {
        return;
    }
    let sim = SimNode::kube_ovn("impact", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("kubevirt", "virt-operator-0", ME, &[ROUTER]));
    api.apply(Res::Pods, pod("tenant", "gateway-0", ME, &[INGRESS]));
    api.apply(
        Res::EndpointSlices,
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "virt-operator-webhook-1", "namespace": "kubevirt",
                            "labels": {"kubernetes.io/service-name": "virt-operator-webhook"}},
               "addressType": "IPv4",
               "endpoints": [{"addresses": [ROUTER], "targetRef": {"kind": "Pod", "namespace": "kubevirt", "name": "virt-operator-0"}}]}),
    );
    api.apply(
        Res::ValidatingWebhooks,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "virt-operator-validator"},
               "webhooks": [{"name": "virt-operator-validator.kubevirt.io",
                             "clientConfig": {"service": {"namespace": "kubevirt", "name": "virt-operator-webhook"}}}]}),
    );
    let lab = Lab::new("impact", &api);
    let agent = lab.agent(&sim.node, ME);
    let severity = |m: &str, ns: &str, pod: &str, s: &str| {
        sample(
            m,
            "ipshadow_collision_info",
            &[("namespace", ns), ("pod", pod), ("severity", s)],
        ) == Some(1.0)
    };
    let seen = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        severity(m, "kubevirt", "virt-operator-0", "critical")
            && severity(m, "tenant", "gateway-0", "warning")
    });
    assert!(seen.is_some(), "log:\n{}", agent.log_text());
    // The Event's note (written once per series) leads with what breaks.
    let e = wait_for("virt-operator-0's Event", HANG, || {
        event(&api, "kubevirt", "virt-operator-0", "RouterIPCollision")
    });
    let note = e["message"].as_str().unwrap();
    assert!(
        note.starts_with("Critical: the kube-apiserver calls through this pod")
            && note.contains("ValidatingWebhookConfiguration virt-operator-validator"),
        "{note}"
    );
    // EndpointSlices of the namespaces with findings only, never cluster-wide.
    let log = api.counts().log;
    let slices: Vec<&String> = log
        .iter()
        .map(|(_, u)| u)
        .filter(|u| u.contains("endpointslices"))
        .collect();
    assert!(!slices.is_empty());
    assert!(
        slices
            .iter()
            .all(|u| u.starts_with("/apis/discovery.k8s.io/v1/namespaces/")),
        "{slices:#?}"
    );
    // Every list the agent made, the lookups included, came from the watch
    // cache: multiplied by the nodes with findings, none may reach etcd.
    let uncached = api.counts().uncached_lists;
    assert!(uncached.is_empty(), "{uncached:#?}");
}
