//! The address plan's share of one node, found by its agent from what it
//! already watches: its Node's own address inside a kube-ovn Subnet of the
//! default VPC (a pool any pod may be given) is an `AddressPlanOverlap` Event
//! on the Node, naming both, before any pod is handed the address; the
//! Node's address moving out of the Subnet ends it.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests,
    lab::{Lab, ME, ROUTER, event, wait_for},
    node::SimNode,
    objects::{node, subnet},
};
use serde_json::{Value, json};

fn with_address(mut node: Value, ip: &str) -> Value {
    node["status"] = json!({"addresses": [
        {"type": "InternalIP", "address": ip},
        {"type": "Hostname", "address": ME},
    ]});
    node
}

/// `ipshadow_allocator_overlaps` as the agent exports it.
fn overlaps(sim: &SimNode) -> Option<f64> {
    let (_, text) = AgentProc::get(&sim.node, "/metrics").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("ipshadow_allocator_overlaps "))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn the_agent_finds_a_subnet_holding_its_nodes_own_address_and_sees_it_end() {
    if !can_run_netns_tests(
        "the_agent_finds_a_subnet_holding_its_nodes_own_address_and_sees_it_end",
    ) {
        return;
    }
    let sim = SimNode::kube_ovn("apn", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    api.set_crd(Res::Subnets, true);
    api.apply(
        Res::Subnets,
        subnet("ovn-default", "10.244.0.0/16", &["10.244.0.1"]),
    );
    api.apply(
        Res::Nodes,
        with_address(node(ME, &["10.244.4.0/24"]), "10.244.200.17"),
    );
    let lab = Lab::new("apn", &api);
    let agent = lab.agent(&sim.node, ME);
    agent.wait_ready(&sim.node);

    let e = wait_for("AddressPlanOverlap on the Node", HANG, || {
        event(&api, "default", ME, "AddressPlanOverlap")
    });
    assert_eq!(e["involvedObject"]["kind"], "Node", "{e:#}");
    assert_eq!(e["type"], "Warning", "{e:#}");
    let msg = e["message"].as_str().unwrap();
    for needle in ["ovn-default", "10.244.200.17", ME, "excludeIps"] {
        assert!(msg.contains(needle), "{needle:?} missing in {msg}");
    }
    assert!(!msg.to_lowercase().contains("cilium"), "{msg}");

    wait_for("the overlap counted", HANG, || {
        (overlaps(&sim) == Some(1.0)).then_some(())
    });

    // The Node's address leaves the Subnet: the finding ends.
    api.apply(
        Res::Nodes,
        with_address(node(ME, &["10.244.4.0/24"]), "192.168.77.17"),
    );
    wait_for("the overlap to end", HANG, || {
        (overlaps(&sim) == Some(0.0)).then_some(())
    });
    drop(agent);
}
