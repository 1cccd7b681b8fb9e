//! The messages name what collides, what breaks, and the fix.
use std::sync::Arc;

use super::*;
use crate::{
    detect::detect,
    inventory::{
        FibResult, Route, RouteKind,
        fixtures::{ME, inventory, ip, net, ovn_default, pod, shadowed_pod_route, with_fib},
    },
};

fn assert_says(text: &str, needles: &[&str]) {
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} missing in {text}");
    }
}

#[test]
fn collisions_name_ip_owner_impact_and_the_kube_ovn_fix() {
    let mut inv = inventory(vec![
        pod("postgres-0", ME, &["10.244.4.251"]),
        pod("api", ME, &["10.244.1.182"]),
    ]);
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
    let f = detect(&inv);
    assert_eq!(f[1].ip, Some(ip("10.244.4.251")));
    assert_says(
        &render(&f[1]),
        &[
            "Pod tenant/postgres-0",
            "10.244.4.251",
            "router IP",
            "node-a on device cilium_host, according to CiliumNode.spec.addresses",
            "kubelet probes",
            "Fix: give Cilium's IPAM a pool cut from the end of kube-ovn Subnet ovn-default's block 10.244.0.0/16, e.g. 10.244.248.0/21",
            "add \"10.244.248.0..10.244.255.255\" to spec.excludeIps of Subnet ovn-default",
            "Gateway API",
        ],
    );
    assert_says(
        &render(&f[0]),
        &["host network of node node-b cannot reach it"],
    );
}

#[test]
fn without_kube_ovn_no_message_names_it() {
    let mut inv = with_fib(
        inventory(vec![
            pod("postgres-0", ME, &["10.244.4.251"]),
            pod("gw", ME, &["10.244.4.12"]),
            pod("api", ME, &["10.244.1.182"]),
            pod("svc", ME, &["10.96.0.10"]),
            pod("lost", ME, &["10.244.0.99"]),
        ]),
        &[("10.244.0.99", FibResult::NoRoute)],
    );
    inv.cluster.subnets = Arc::default();
    let f = detect(&inv);
    assert_eq!(f.len(), 5, "{f:#?}");
    for text in f.iter().map(render) {
        for word in ["kube-ovn", "Subnet", "excludeIps", "ovn0"] {
            assert!(!text.contains(word), "{word:?} in {text}");
        }
    }
    assert_says(
        &render(
            f.iter()
                .find(|f| f.ip == Some(ip("10.244.4.251")))
                .expect("router"),
        ),
        &[
            "Fix: delete the pod so it is given another address",
            "--max-pods",
        ],
    );
    assert_says(
        &render(
            f.iter()
                .find(|f| f.ip == Some(ip("10.96.0.10")))
                .expect("ipvs"),
        ),
        &[
            "find the Service that claims 10.96.0.10 on kube-ipvs0",
            "give Services and pods disjoint ranges",
        ],
    );
}

#[test]
fn a_shadowed_pod_route_is_named() {
    let f = detect(&shadowed_pod_route());
    assert_says(
        &render(&f[0]),
        &[
            "10.96.0.10/32 dev lxc1234 is shadowed",
            "remove the address",
        ],
    );
}

#[test]
fn blackholes_name_the_dead_end_its_route_and_the_fix() {
    for (answer, kind, says) in [
        (
            FibResult::Blackhole,
            RouteKind::Blackhole,
            "ends in blackhole (route blackhole 10.244.0.99/32): kubelet probes",
        ),
        (
            FibResult::NoRoute,
            RouteKind::Throw,
            "Fix: restore the pod network's route on node-a",
        ),
    ] {
        let mut inv = inventory(vec![pod("lost", ME, &["10.244.0.99"])]);
        Arc::make_mut(&mut inv.host).routes.push(Route {
            table: 254,
            dst: net("10.244.0.99/32"),
            kind,
            oif: None,
            gateway: None,
        });
        let f = detect(&with_fib(inv, &[("10.244.0.99", answer)]));
        assert_says(&render(&f[0]), &[says]);
    }
}

#[test]
fn overlaps_name_the_range_and_the_exclusion_that_fixes_them() {
    let mut inv = inventory(vec![]);
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
    let f = detect(&inv);
    assert_eq!(
        f.len(),
        1,
        "one finding for the range and the Subnet: {f:#?}"
    );
    assert_says(
        &render(&f[0]),
        &[
            "Cilium's 3 addresses: 10.244.4.251 (router), 10.244.4.12 (ingress), \
             10.244.4.104 (health) of node node-a lie inside kube-ovn Subnet ovn-default",
            "add \"10.244.4.0..10.244.4.255\" to spec.excludeIps of Subnet ovn-default",
            "cut from the end of 10.244.0.0/16",
        ],
    );
    let cns = Arc::make_mut(&mut inv.cluster.cilium_nodes);
    cns[0].addresses.clear();
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.4.0", "10.244.4.127")])]);
    let f = detect(&inv);
    assert_says(&render(&f[0]), &["allocation range 10.244.4.0/24"]);
    let note = note(&f[0], Reader::Node, None);
    assert!(
        note.contains("Cilium's range 10.244.4.0/24 of node node-a lies in"),
        "{note}"
    );
}

#[test]
fn an_overlap_note_names_its_addresses_briefly() {
    let mut inv = inventory(vec![]);
    inv.cluster.subnets = Arc::new(vec![ovn_default(&[("10.244.0.1", "10.244.0.1")])]);
    let f = detect(&inv);
    let n = note(&f[0], Reader::Node, None);
    assert!(
        n.starts_with(
            "Cilium's 3 addresses: 10.244.4.251 (router), 10.244.4.12 (ingress), 10.244.4.104 \
             (health) of node node-a lie in kube-ovn Subnet ovn-default, not excluded."
        ),
        "{n}"
    );
    let (prose, fix) = n.split_once(" Fix: ").expect("a fix");
    assert!(prose.len() <= PROSE_MAX && fix.len() < FIX_MAX, "{n}");
}

/// The real messages of the corpus, one line each, and the refusal words each carries.
fn corpus_messages() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/realworld/event-messages-sandbox-failures.json"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("corpus")).expect("json");
    v["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            let m = m["message"].as_str().expect("message");
            m.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect()
}

#[test]
fn kubelets_excerpt_keeps_the_words_the_finding_rests_on_and_cuts_between_words() {
    use crate::inventory::SandboxRefusal;
    let messages = corpus_messages();
    // cilium#9793: the 400-byte cut of old fell before "range is full".
    let long = messages
        .iter()
        .find(|m| m.contains("coredns-5c98db65d4-h5vwr") && m.ends_with("range is full"))
        .expect("cilium#9793");
    assert!(!long[..400].contains("range is full"), "{long}");
    for m in &messages {
        let e = ipam::excerpt(m, ipam::KUBELET_EXCERPT_MAX);
        assert!(e.len() <= ipam::KUBELET_EXCERPT_MAX, "{e}");
        let core = e.trim_start_matches('…').trim_end_matches('…');
        // Whole words only: the excerpt starts and ends where the message has a space.
        let at = m.find(core).expect("a part of the message");
        assert!(
            at == 0 || m[..at].ends_with(' '),
            "cut mid-word at the start: {e}"
        );
        let end = at + core.len();
        assert!(
            end == m.len() || m[end..].starts_with(' '),
            "cut mid-word at the end: {e}"
        );
        let lower = m.to_ascii_lowercase();
        for w in SandboxRefusal::WORDING
            .iter()
            .filter(|w| lower.contains(*w))
        {
            assert!(e.to_ascii_lowercase().contains(w), "{w:?} lost: {e}");
        }
    }
    let in_use = messages
        .iter()
        .find(|m| m.contains("10.17.239.250"))
        .expect("cilium#38313");
    let e = ipam::excerpt(in_use, 120);
    assert!(
        e.ends_with("IP ipv4:10.17.239.250 is already in use"),
        "{e}"
    );
    assert!(e.starts_with('…') && e.len() <= 120, "{e}");
}
