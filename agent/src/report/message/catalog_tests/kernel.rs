//! The kernel-truth findings as the detector makes them on a `ptp`-laid node,
//! one scenario per kind, for the renderer tests over every kind.

use std::sync::Arc;

use super::cases::Mode;
use crate::{
    detect::{Cause, Finding, detect},
    inventory::{
        Inventory, OperState,
        fixtures::{ME, pod},
        ptp_fixtures::{PTP_PODS, hold, ptp_inventory, reroute, veth},
    },
};

fn api() -> Vec<crate::inventory::Pod> {
    ["postgres-cluster-0", "web-6f7c9d5b8-x2kqz", "api-0"]
        .iter()
        .zip(PTP_PODS)
        .map(|(n, a)| pod(n, ME, &[a]))
        .collect()
}

fn kernel(inv: &Inventory) -> Vec<(Mode, Finding)> {
    detect(inv)
        .into_iter()
        .filter(|f| matches!(f.cause, Cause::Kernel(_)))
        .map(|f| (Mode::CiliumOnly, f))
        .collect()
}

/// One finding of every kernel-truth kind.
pub(super) fn cases() -> Vec<(Mode, Finding)> {
    let mut misdirected = ptp_inventory(api());
    reroute(&mut misdirected, PTP_PODS[0], veth(1));
    let mut changed = ptp_inventory(api());
    hold(&mut changed, 2, &["10.250.1.40"]);
    let mut twice = ptp_inventory(api());
    hold(&mut twice, 1, &[PTP_PODS[1], PTP_PODS[0]]);
    let mut down = ptp_inventory(api());
    Arc::make_mut(&mut down.host).namespaces.ifaces[1].state = OperState::Down;
    let mut leaked_pods = api();
    leaked_pods[2].node = Some("worker-node-b".into());
    let mut missing = api();
    missing.push(pod("cache-0", ME, &["10.250.1.9"]));
    [
        misdirected,
        changed,
        twice,
        down,
        ptp_inventory(leaked_pods),
        ptp_inventory(missing),
    ]
    .iter()
    .flat_map(kernel)
    .collect()
}
