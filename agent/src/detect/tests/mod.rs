//! Table tests of the detector, on the cozystack-shaped fixtures of
//! `inventory::fixtures`. What a finding says in words is tested in `report`.

mod bridge;
mod calico;
mod calico_ipam;
mod calico_pools;
mod calico_refusals;
mod calico_tunnels;
mod fib;
mod ipam;
mod leftover;
mod names;
mod overlap;
mod ovn_ports;
mod pool;
mod vip;

use std::net::IpAddr;

use super::*;
use crate::inventory::{
    IpSource,
    fixtures::{ME, OTHER, inventory, ip, pod},
};

/// (kind, scope, ip, pod name, owner node, role, device) of each finding.
pub(super) type Row = (
    FindingKind,
    Scope,
    IpAddr,
    String,
    String,
    Role,
    Option<String>,
);

pub(super) fn rows(findings: &[Finding]) -> Vec<Row> {
    findings
        .iter()
        .map(|f| {
            (
                f.kind,
                f.scope,
                f.ip.unwrap_or(IpAddr::from([0, 0, 0, 0])),
                f.pod().map(|p| p.name.clone()).unwrap_or_default(),
                f.owner.node.clone(),
                f.owner.role,
                f.owner.device.clone(),
            )
        })
        .collect()
}

pub(super) fn row(
    kind: FindingKind,
    scope: Scope,
    a: &str,
    pod: &str,
    owner: &str,
    role: Role,
    device: Option<&str>,
) -> Row {
    (
        kind,
        scope,
        ip(a),
        pod.into(),
        owner.into(),
        role,
        device.map(Into::into),
    )
}

use FindingKind::*;
use Role::*;
use Scope::*;

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one table: a row per case reads better than helpers"
)]
fn detector_table() {
    struct Case {
        name: &'static str,
        inv: Inventory,
        want: Vec<Row>,
    }
    let pending_on_ingress = {
        // The loud case: Cilium refused the sandbox, so the pod has no status IP,
        // only the one kube-ovn assigned in its annotation.
        let mut p = pod("pg-pending", ME, &["10.244.4.12"]);
        p.ips[0].source = IpSource::Annotation;
        p.phase = Some("Pending".into());
        p
    };
    let cases = vec![
        Case {
            name: "clean node: pods off every infrastructure address",
            inv: inventory(vec![
                pod("web", ME, &["10.244.0.35"]),
                pod("db", OTHER, &["10.244.0.65"]),
            ]),
            want: vec![],
        },
        Case {
            name: "silent: pod on this node's router IP (cilium_host)",
            inv: inventory(vec![pod("postgres-0", ME, &["10.244.4.251"])]),
            want: vec![row(
                RouterIpCollision,
                SameNode,
                "10.244.4.251",
                "postgres-0",
                ME,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "loud: pending pod on this node's ingress IP, IP only in the kube-ovn annotation",
            inv: inventory(vec![pending_on_ingress]),
            want: vec![row(
                IngressIpCollision,
                SameNode,
                "10.244.4.12",
                "pg-pending",
                ME,
                Ingress,
                None,
            )],
        },
        Case {
            name: "pod here on another node's router IP",
            inv: inventory(vec![pod("api", ME, &["10.244.1.182"])]),
            want: vec![row(
                RouterIpCollision,
                CrossNode,
                "10.244.1.182",
                "api",
                OTHER,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "pod here on another node's ingress IP",
            inv: inventory(vec![pod("api", ME, &["10.244.1.12"])]),
            want: vec![row(
                IngressIpCollision,
                CrossNode,
                "10.244.1.12",
                "api",
                OTHER,
                Ingress,
                None,
            )],
        },
        Case {
            name: "health IP of this node and of another node",
            inv: inventory(vec![
                pod("h1", ME, &["10.244.4.104"]),
                pod("h2", ME, &["10.244.1.243"]),
            ]),
            want: vec![
                row(
                    HealthIpCollision,
                    CrossNode,
                    "10.244.1.243",
                    "h2",
                    OTHER,
                    Health,
                    Some("lxc_health"),
                ),
                row(
                    HealthIpCollision,
                    SameNode,
                    "10.244.4.104",
                    "h1",
                    ME,
                    Health,
                    Some("lxc_health"),
                ),
            ],
        },
        Case {
            name: "pod elsewhere on this node's router IP: the owner node reports it",
            inv: inventory(vec![pod("webhook", OTHER, &["10.244.4.251"])]),
            want: vec![row(
                RouterIpCollision,
                CrossNode,
                "10.244.4.251",
                "webhook",
                ME,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "pod elsewhere on this node's ingress IP",
            inv: inventory(vec![pod("webhook", OTHER, &["10.244.4.12"])]),
            want: vec![row(
                IngressIpCollision,
                CrossNode,
                "10.244.4.12",
                "webhook",
                ME,
                Ingress,
                None,
            )],
        },
        Case {
            name: "pod elsewhere on another node's address is that node's business",
            inv: inventory(vec![pod("x", OTHER, &["10.244.1.182"])]),
            want: vec![],
        },
        Case {
            name: "IPv6 router IP",
            inv: inventory(vec![pod("v6", ME, &["fd00:10:244:4::1f"])]),
            want: vec![row(
                RouterIpCollision,
                SameNode,
                "fd00:10:244:4::1f",
                "v6",
                ME,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "dual stack: v4 clean, v6 on the router IP gives one finding for the v6 IP",
            inv: inventory(vec![pod("ds", ME, &["10.244.0.77", "fd00:10:244:4::1f"])]),
            want: vec![row(
                RouterIpCollision,
                SameNode,
                "fd00:10:244:4::1f",
                "ds",
                ME,
                Router,
                Some("cilium_host"),
            )],
        },
        Case {
            name: "pod on another local address (kube-ipvs0)",
            inv: inventory(vec![pod("svc-clash", ME, &["10.96.0.10"])]),
            want: vec![row(
                LocalAddressCollision,
                SameNode,
                "10.96.0.10",
                "svc-clash",
                ME,
                Local,
                Some("kube-ipvs0"),
            )],
        },
        Case {
            name: "host-network and terminated pods are not findings",
            inv: {
                let mut hn = pod("kube-proxy", ME, &["10.244.4.251"]);
                hn.host_network = true;
                let mut done = pod("job", ME, &["10.244.4.251"]);
                done.phase = Some("Succeeded".into());
                let mut failed = pod("crash", OTHER, &["10.244.4.251"]);
                failed.phase = Some("Failed".into());
                inventory(vec![hn, done, failed])
            },
            want: vec![],
        },
        Case {
            name: "unscheduled pod is skipped",
            inv: {
                let mut p = pod("pending", ME, &["10.244.4.251"]);
                p.node = None;
                inventory(vec![p])
            },
            want: vec![],
        },
    ];
    for c in cases {
        assert_eq!(rows(&detect(&c.inv)), c.want, "case: {}", c.name);
    }
}
