//! The Event series: what is written, what the cap keeps, in which order.
use super::*;
use crate::detect::FindingKind;

fn pod_series(i: usize) -> Desired {
    Desired {
        regarding: ObjectReference {
            kind: Some("Pod".to_owned()),
            name: Some(format!("p{i:03}")),
            namespace: Some("t".to_owned()),
            ..Default::default()
        },
        namespace: "t".to_owned(),
        reason: "LocalAddressCollision".to_owned(),
        ip: format!("10.0.{}.{}", i / 250, i % 250),
        warning: true,
        note: String::new(),
        priority: 1,
        hint: false,
    }
}

#[test]
fn beyond_the_cap_pod_series_become_one_node_event() {
    let overlap = Desired {
        regarding: object_ref("Node", "n", None, None),
        namespace: "default".to_owned(),
        reason: "AllocatorOverlap".to_owned(),
        ip: "10.244.4.12".to_owned(),
        warning: true,
        note: String::new(),
        priority: 1,
        hint: false,
    };
    let mut want: Vec<Desired> = (0..150).rev().map(pod_series).collect();
    want.push(overlap.clone());
    let out = cap(want, 20, "n", Some("uid-n"));
    assert_eq!(out.len(), 20 + 1 + 1);
    let kept: Vec<&str> = out
        .iter()
        .filter(|d| d.regarding.kind.as_deref() == Some("Pod"))
        .filter_map(|d| d.regarding.name.as_deref())
        .collect();
    assert_eq!(kept.first(), Some(&"p000"));
    assert_eq!(kept.last(), Some(&"p019"));
    assert!(out.contains(&overlap), "node series are never capped");
    let many = out
        .iter()
        .find(|d| d.reason == REASON_MANY)
        .expect("aggregate");
    assert!(
        many.note
            .starts_with("130 more pods on or holding addresses of node n")
            && many.note.contains("LocalAddressCollision x130")
            && many.note.contains("t/p020"),
        "{}",
        many.note
    );
    // Under the cap nothing changes.
    let few: Vec<Desired> = (0..5).map(pod_series).collect();
    assert_eq!(cap(few.clone(), 20, "n", None), few);
}

#[test]
fn forged_hints_never_crowd_out_a_real_finding() {
    use crate::{
        detect::{Trust, detect},
        inventory::fixtures::{ME, inventory, pod},
    };
    let inv = inventory(vec![pod("postgres-0", ME, &["10.244.4.251"])]);
    let real = detect(&inv)
        .into_iter()
        .find(|f| f.kind == FindingKind::RouterIpCollision)
        .expect("the router collision");
    // DuplicatePodIP sorts before RouterIPCollision by name: forged ones
    // (kubelet Events a tenant wrote) would have pushed it out.
    let mut findings = vec![real];
    for i in 0..30u8 {
        let mut f = findings[0].clone();
        f.kind = FindingKind::DuplicatePodIp;
        f.trust = Trust::Hint;
        f.ip = Some(std::net::IpAddr::from([10, 244, 4, i]));
        findings.push(f);
    }
    let want = desired(
        &findings,
        (&Traffic::default(), &crate::report::Impacts::default()),
        ME,
        None,
    );
    let out = cap(want, 5, ME, None);
    let reasons: Vec<&str> = out.iter().map(|d| d.reason.as_str()).collect();
    // The real finding first (the write budget goes in this order), then at
    // most 5 hints; none counted or named on the Node (issue 38).
    assert_eq!(reasons[0], "RouterIPCollision", "{reasons:?}");
    assert!(!reasons.contains(&REASON_MANY), "{reasons:?}");
    assert_eq!(out.len(), 1 + 5, "{reasons:?}");
    assert!(out[1..].iter().all(|d| d.hint), "{reasons:?}");
}

#[test]
fn a_pod_the_stale_bridge_refused_is_told_on_the_pod_and_the_nodes_finding_on_the_node() {
    use std::sync::Arc;

    use crate::{
        detect::{Cause, NodeProblem, detect},
        inventory::{
            ClusterState, HostNetwork, Inventory, Link, LocalAddress, NodeFacts, SandboxFailure,
            SandboxRefusal,
            fixtures::{ME, OTHER, net, pod},
        },
    };
    let message = "failed to set bridge addr: \"cni0\" already has an IP address different \
                   from 10.244.5.1/24";
    let mut waiting = pod("web", ME, &[]);
    waiting.phase = Some("Pending".into());
    let mut host = HostNetwork::default();
    host.links.push(Link {
        index: 4,
        name: "cni0".into(),
    });
    host.addresses.push(LocalAddress {
        ip: net("10.244.1.1/24").addr(),
        device: "cni0".into(),
    });
    host.routes.push(crate::inventory::Route {
        table: crate::inventory::TABLE_MAIN,
        dst: net("10.244.1.0/24"),
        kind: crate::inventory::RouteKind::Unicast,
        oif: Some(4),
        gateway: None,
    });
    let facts = |name: &str, cidr: &str| NodeFacts {
        name: name.into(),
        pod_cidrs: vec![net(cidr)],
        ..NodeFacts::default()
    };
    let mine = facts(ME, "10.244.5.0/24");
    let inv = Inventory {
        node: ME.into(),
        host: Arc::new(host),
        node_facts: Some(mine.clone()),
        cluster: ClusterState {
            nodes: Arc::new(vec![mine, facts(OTHER, "10.244.1.0/24")]),
            pods: Arc::new(vec![waiting]),
            sandbox: Arc::new(vec![SandboxFailure {
                namespace: "tenant".into(),
                pod: "web".into(),
                uid: "uid-web".into(),
                // As cni::refusal reads `message` (report does not import kube).
                refusal: SandboxRefusal::BridgeAddressDiffers {
                    bridge: Some("cni0".into()),
                    gateway: Some(net("10.244.5.1/24")),
                },
                count: 3,
                message: message.into(),
            }]),
            ..Default::default()
        },
        ..Inventory::default()
    };
    let findings = detect(&inv);
    let kinds: Vec<(FindingKind, bool)> = findings
        .iter()
        .map(|f| {
            (
                f.kind,
                matches!(f.cause, Cause::Node(NodeProblem::StaleBridge { .. })),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (FindingKind::StaleBridgeAddress, true),
            (FindingKind::StaleBridgeAddress, false)
        ],
        "{findings:#?}"
    );
    let want = desired(
        &findings,
        (&Traffic::default(), &crate::report::Impacts::default()),
        ME,
        None,
    );
    let on: Vec<(&str, &str)> = want
        .iter()
        .map(|d| {
            (
                d.regarding.kind.as_deref().unwrap_or_default(),
                d.reason.as_str(),
            )
        })
        .collect();
    assert_eq!(
        on,
        [
            ("Node", "StaleBridgeAddress"),
            ("Pod", "StaleBridgeAddress")
        ],
        "{want:#?}"
    );
    let fix = "ip addr del 10.244.1.1/24 dev cni0";
    assert!(want[1].note.contains(fix), "{}", want[1].note);
}

#[test]
fn hints_are_capped_apart_and_never_counted_or_named_on_the_node() {
    let hint = |i: usize| Desired {
        hint: true,
        priority: 51,
        namespace: "tenant-x".to_owned(),
        ..pod_series(1000 + i)
    };
    let mut want: Vec<Desired> = (0..150).map(hint).collect();
    want.extend((0..25).map(pod_series));
    let out = cap(want, 20, "n", None);
    let many = out
        .iter()
        .find(|d| d.reason == REASON_MANY)
        .expect("the trusted series beyond the cap");
    assert!(many.note.starts_with("5 more pods"), "{}", many.note);
    assert!(!many.note.contains("tenant-x"), "{}", many.note);
    let trusted = out.iter().filter(|d| is_pod_warning(d) && !d.hint).count();
    let hints = out.iter().filter(|d| d.hint).count();
    assert_eq!((trusted, hints), (20, 20));
    // The budget reaches every trusted series before any hint.
    let first_hint = out.iter().position(|d| d.hint).expect("hints");
    assert!(out[..first_hint].iter().filter(|d| !d.hint).count() == 21);
}
