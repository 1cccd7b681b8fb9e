//! The loud failures from the real agent against the test API server: kubelet's
//! sandbox refusals read only for this node's waiting pods, the node findings of
//! its Node, CiliumNode and cilium-config — each an Event once per series,
//! resolved when fixed.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use std::time::Duration;

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, deploy, figure,
    http::sample,
    lab::{INGRESS, Lab, ME, OTHER, ROUTER, assert_one_event_each, cozystack, event, wait_for},
    node::SimNode,
    objects::{
        cilium_config, cilium_node, kube_ovn_ip, kubelet_sandbox_event, node_accepting,
        pending_pod, pod, subnet, waiting_pod, with_pod_cidrs,
    },
    watch_list::WatchList,
};
use serde_json::json;

/// The cozystack wording of the refusal, for `ip`.
fn in_use(ip: &str) -> String {
    format!(
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for \
         sandbox \"3e42\": plugin type=\"cilium-cni\" failed (add): unable to create endpoint: \
         [PUT /endpoint/{{id}}][400] putEndpointIdInvalid \"IP ipv4:{ip} is already in use\""
    )
}

#[test]
fn the_agent_reports_the_loud_failures_once_and_resolves_them() {
    if !can_run_netns_tests("the_agent_reports_the_loud_failures_once_and_resolves_them") {
        return;
    }
    let sim = SimNode::kube_ovn("kloud", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    // Cilium-only: no Subnets, no annotations. A /27 for 110 pods; Cilium
    // switched to cluster-pool 100.65.0.0/16 while the node keeps its range.
    api.apply(Res::Nodes, node_accepting(ME, &["10.244.4.0/27"], 110));
    let mut cn = with_pod_cidrs(
        cilium_node(ME, ROUTER, Some(INGRESS), None),
        &["10.244.4.0/27"],
    );
    cn["status"] = json!({"ipam": {"operator-status": {
        "error": "allocator not configured for the requested CIDR 10.244.4.0/27"}}});
    api.apply(Res::CiliumNodes, cn);
    api.apply(
        Res::ConfigMaps,
        cilium_config("cluster-pool", "100.65.0.0/16"),
    );
    // kube-ovn's CRD is installed but holds no Subnet: still Cilium-only.
    api.set_crd(Res::Subnets, true);
    // Chained on Calico (a `cali…` veth): the agent watches Calico's IPPools.
    sim.node.add_veth("cali05ad595351c", "calip0");
    api.set_crd(Res::IpPools, true);
    // Refused with this node's Ingress IP; refused with an address nobody holds;
    // a pod elsewhere with a refusal (not this node's to read); a running pod.
    for (name, node, ip, count) in [
        ("gateway-0", ME, INGRESS, 12),
        ("stale-0", ME, "10.244.4.29", 3),
        ("far-0", OTHER, INGRESS, 5),
    ] {
        api.apply(Res::Pods, waiting_pod("tenant", name, node));
        api.apply(
            Res::Events,
            kubelet_sandbox_event("tenant", name, &in_use(ip), count),
        );
    }
    api.apply(Res::Pods, pod("tenant", "web-0", ME, &["10.244.4.20"]));
    // A pod on an address kube-proxy (IPVS mode) bound on the node: the agent
    // asks which Service claims it.
    sim.add_vips(&["10.244.4.40"]);
    api.apply(Res::Pods, pod("tenant", "vip-0", ME, &["10.244.4.40"]));
    // A pod whose annotation alone names the router IP: kube-ovn's record is asked for.
    api.apply(Res::Pods, pending_pod("tenant", "forged-0", ME, ROUTER));

    let lab = Lab::new("loud", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);

    // The node findings come at once, on the Node.
    for reason in ["PodIPCapacityShortfall", "IPAMMigrationStuck"] {
        let e = wait_for(reason, HANG, || event(&api, "default", ME, reason));
        assert_eq!(
            (e["type"].as_str(), e["involvedObject"]["kind"].as_str()),
            (Some("Warning"), Some("Node"))
        );
    }
    let stuck = event(&api, "default", ME, "IPAMMigrationStuck").unwrap();
    let m = stuck["message"].as_str().unwrap();
    assert!(
        m.contains("allocator not configured") && m.contains("in this order"),
        "{m}"
    );
    assert!(
        event(&api, "default", ME, "CiliumIPAMError").is_none(),
        "the stuck migration tells the error"
    );

    // The refusals only once the pods have waited 30 s without an address.
    let wait = Duration::from_secs(30) + HANG;
    let gw = wait_for("IngressIPCollision on gateway-0", wait, || {
        event(&api, "tenant", "gateway-0", "IngressIPCollision")
    });
    let m = gw["message"].as_str().unwrap();
    assert!(
        m.contains("kubelet reported FailedCreatePodSandBox 12 times") && m.contains(INGRESS),
        "{m}"
    );
    let stale = wait_for("StaleCiliumEndpoint on stale-0", HANG, || {
        event(&api, "tenant", "stale-0", "StaleCiliumEndpoint")
    });
    assert!(
        stale["message"]
            .as_str()
            .unwrap()
            .contains("cilium-dbg endpoint disconnect ipv4:10.244.4.29")
    );
    // Known from kubelet's Event alone, which anyone who may create Events in
    // the namespace can write: a hint, not counted where alerts look.
    let stale_counted = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(m, "ipshadow_hints", &[("kind", "StaleCiliumEndpoint")]) == Some(1.0)
            && sample(
                m,
                "ipshadow_ipam_problems",
                &[("kind", "StaleCiliumEndpoint")],
            ) == Some(0.0)
    });
    assert!(stale_counted.is_some());
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert_eq!(
        sample(
            &m,
            "ipshadow_ipam_problems",
            &[("kind", "PodIPCapacityShortfall")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&m, "ipshadow_source_up", &[("source", "events")]),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "ipshadow_source_up", &[("source", "cilium-config")]),
        Some(1.0),
        "{m}"
    );

    // Asked once, from the watch cache; an address on kube-ipvs0 is a
    // Service's whoever claims it: never evicted on.
    wait_for("a list of Services", HANG, || {
        api.counts()
            .log
            .iter()
            .any(|(m, u)| {
                m == "GET" && u.starts_with("/api/v1/services?") && u.contains("resourceVersion=0")
            })
            .then_some(())
    });
    let vip = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        m.lines().any(|l| {
            l.starts_with("ipshadow_collision_info{")
                && l.contains("pod=\"vip-0\"")
                && l.contains("trust=\"tenant-address\"")
        })
    });
    assert!(vip.is_some(), "vip-0 not reported as a Service's address");

    // Only this node's waiting pods were asked about, each by uid in its namespace.
    let reads = api.counts().event_reads;
    let asked: Vec<&String> = reads.iter().map(|(_, uri)| uri).collect();
    assert!(!asked.is_empty());
    for uri in &asked {
        assert!(
            uri.starts_with("/api/v1/namespaces/tenant/events?"),
            "{uri}"
        );
        assert!(
            uri.contains("involvedObject.uid") && uri.contains("reason"),
            "{uri}"
        );
        assert!(
            !uri.contains("watch=true") && !uri.contains("uid-far-0") && !uri.contains("uid-web-0"),
            "{uri}"
        );
    }
    figure(format!(
        "sandbox Event reads for 3 waiting pods in the first minute: {}",
        asked.len()
    ));

    // Fixed: the pool now holds the node's range; a pod range that fits; the stale pod goes.
    api.apply(
        Res::ConfigMaps,
        cilium_config("cluster-pool", "10.244.0.0/16 100.65.0.0/16"),
    );
    api.apply(Res::Nodes, node_accepting(ME, &["10.244.4.0/27"], 20));
    api.delete(Res::Pods, "tenant", "stale-0");
    for (name, ns) in [(ME, "default"), ("stale-0", "tenant")] {
        wait_for(&format!("IPCollisionResolved on {name}"), HANG, || {
            event(&api, ns, name, "IPCollisionResolved")
        });
    }
    // The operator's error is still there once the migration is no longer stuck: now its own finding.
    wait_for("CiliumIPAMError", HANG, || {
        event(&api, "default", ME, "CiliumIPAMError")
    });
    let m = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(
            m,
            "ipshadow_ipam_problems",
            &[("kind", "IPAMMigrationStuck")],
        ) == Some(0.0)
            && sample(
                m,
                "ipshadow_ipam_problems",
                &[("kind", "PodIPCapacityShortfall")],
            ) == Some(0.0)
    });
    assert!(m.is_some());
    assert_one_event_each(
        &api,
        &[
            (ME, "PodIPCapacityShortfall"),
            (ME, "IPAMMigrationStuck"),
            (ME, "CiliumIPAMError"),
            ("gateway-0", "IngressIPCollision"),
            ("stale-0", "StaleCiliumEndpoint"),
        ],
    );
    assert!(event(&api, "tenant", "far-0", "IngressIPCollision").is_none());

    // A restarted agent continues its series (create answers 409: get, then patch).
    // It restarts against a server without streaming lists (WatchList off, as
    // 1.33 ships): its watches start with the lists the RBAC grants for that.
    let patches = api.counts().patches;
    let (status, _) = agent.terminate();
    assert!(status.success());
    api.set_watch_list(WatchList::Off);
    let again = lab.agent(&sim.node, ME);
    again.wait_ready(&sim.node);
    wait_for("a series continued after the restart", HANG, || {
        (api.counts().patches > patches).then_some(())
    });
    assert_one_event_each(
        &api,
        &[(ME, "CiliumIPAMError"), ("gateway-0", "IngressIPCollision")],
    );

    // deploy/rbac.yaml grants exactly what the agent used: every request allowed,
    // every rule used. An agent lists Calico's IPPools once its first
    // reconcile has seen the `cali…` veth (the restarted one, without
    // streaming lists, with a list request).
    wait_for("a list of IPPools", HANG, || {
        api.counts()
            .log
            .iter()
            .any(|(m, u)| m == "GET" && u.contains("/ippools?") && !u.contains("watch=true"))
            .then_some(())
    });
    let rules = deploy::cluster_role_rules(&deploy::manifests(), "ipshadow");
    let used = deploy::used_and_allowed(&api.counts().log, &rules);
    let granted = deploy::granted(&rules);
    let unused: Vec<_> = granted.difference(&used).collect();
    assert!(unused.is_empty(), "granted but never used: {unused:?}");
    figure(format!(
        "RBAC: {} (group, resource, verb) granted, all used, nothing else asked",
        granted.len()
    ));
}

#[test]
fn an_annotation_is_a_hint_and_kube_ovns_record_the_proof() {
    if !can_run_netns_tests("an_annotation_is_a_hint_and_kube_ovns_record_the_proof") {
        return;
    }
    let sim = SimNode::kube_ovn("khint", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.set_crd(Res::Subnets, true);
    api.apply(
        Res::Subnets,
        subnet("ovn-default", "10.244.0.0/16", &["10.244.0.1"]),
    );
    // Anyone who may edit a pod can write these annotations; kube-ovn alone its IP records.
    api.apply(Res::Pods, pending_pod("tenant", "forged-0", ME, ROUTER));
    api.apply(Res::Pods, pending_pod("tenant", "gateway-0", ME, INGRESS));
    api.apply(
        Res::KubeOvnIps,
        kube_ovn_ip("tenant", "gateway-0", ME, INGRESS),
    );
    // An address outside the Subnet its own annotation names: never kube-ovn's.
    api.apply(
        Res::Pods,
        pending_pod("tenant", "elsewhere-0", ME, "100.65.0.7"),
    );
    let lab = Lab::new("hint", &api);
    // A sync of the Events every second: the fact waited on below.
    let agent = lab.agent_with(&sim.node, ME, &["--event-refresh-seconds", "1"]);
    agent.wait_ready(&sim.node);

    let gw = wait_for("IngressIPCollision on gateway-0", HANG, || {
        event(&api, "tenant", "gateway-0", "IngressIPCollision")
    });
    let m = gw["message"].as_str().unwrap();
    assert!(
        m.contains("kube-ovn's record ips.kubeovn.io gateway-0.tenant"),
        "{m}"
    );
    // The forged one is a finding, marked unconfirmed, and no Warning.
    let seen = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        sample(
            m,
            "ipshadow_collision_info",
            &[("pod", "forged-0"), ("ip_source", "annotation")],
        ) == Some(1.0)
    });
    assert!(seen.is_some());
    let asked = api
        .counts()
        .log
        .iter()
        .filter(|(_, uri)| uri.contains("/ips/forged-0.tenant"))
        .count();
    assert!(
        asked >= 1,
        "kube-ovn's record of forged-0 was never asked for"
    );
    // Two Event syncs logged since: the second began after the finding was
    // published (the first may have read the findings before), and wrote
    // nothing for it.
    let from = agent.log_text().len();
    wait_for("two more Event syncs", HANG, || {
        (agent.log_text()[from..].matches("syncing Events").count() >= 2).then_some(())
    });
    assert!(api.core_events_for("tenant", "forged-0").is_empty());
    let (_, m) = AgentProc::get(&sim.node, "/metrics").unwrap();
    assert_eq!(
        sample(&m, "ipshadow_collision_info", &[("pod", "elsewhere-0")]),
        None,
        "{m}"
    );
    // Only pods with such a finding were asked about, by name.
    for (_, uri) in api.counts().log.iter().filter(|(_, u)| u.contains("/ips")) {
        assert!(
            uri.ends_with("/ips/forged-0.tenant") || uri.ends_with("/ips/gateway-0.tenant"),
            "{uri}"
        );
    }
}
