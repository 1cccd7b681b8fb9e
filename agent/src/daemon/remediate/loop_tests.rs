//! The remediation loop against a recording API with tokio's clock paused:
//! when it acts, exactly, without a test that sleeps through the interval.

use std::{sync::Arc, time::Duration};

use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{Args, Mode, RemediateTask};
use crate::{
    daemon::{Published, test_api::TestApi},
    detect::detect,
    inventory::{
        NodeFacts,
        fixtures::{ME, inventory, pod},
    },
    report::metrics::Registry,
};

const AFTER: Duration = Duration::from_mins(1);
const INTERVAL: Duration = Duration::from_mins(10);
/// A timer of tokio's fires in the millisecond tick after its deadline.
const TICK: Duration = Duration::from_millis(10);

/// Two shadowed pods their controller recreates, on this node.
fn two_shadowed() -> Published {
    Published {
        findings: Arc::new(detect(&inventory(vec![
            pod("a-0", ME, &["10.244.4.251"]),
            pod("b-0", ME, &["10.244.4.104"]),
        ]))),
        node: Some(NodeFacts {
            name: ME.to_owned(),
            ..NodeFacts::default()
        }),
        ready: true,
        ..Published::default()
    }
}

fn start(after: Duration) -> (TestApi, watch::Sender<Published>, CancellationToken) {
    let api = TestApi::default();
    let (tx, rx) = watch::channel(two_shadowed());
    let args = Args {
        remediate: Mode::DryRun,
        remediate_interval: INTERVAL,
        remediate_after: after,
    };
    let task = RemediateTask::new(api.client(), ME, &args, &mut Registry::default(), rx);
    let token = CancellationToken::new();
    tokio::spawn(task.run(token.clone()));
    (api, tx, token)
}

/// The dry run's Events: one per action.
fn actions(api: &TestApi) -> Vec<Instant> {
    api.requests("POST", "/events")
        .into_iter()
        .filter(|r| r.body["reason"] == "IPShadowWouldEvict")
        .map(|r| r.at)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_start_counts_as_an_action_and_then_one_pod_per_interval() {
    let t0 = Instant::now();
    let (api, _tx, token) = start(AFTER);
    // Paused time: the clock moves only once the loop waits, so each step
    // returns after everything due by then was done.
    tokio::time::sleep_until(t0 + INTERVAL - Duration::from_secs(1)).await;
    assert!(
        actions(&api).is_empty(),
        "nothing within an interval of the start"
    );
    tokio::time::sleep_until(t0 + INTERVAL * 5 + Duration::from_secs(1)).await;
    // One action per interval from the start, each when due (the paused
    // clock's timers fire within their millisecond tick).
    let acted: Vec<Duration> = actions(&api).iter().map(|t| *t - t0).collect();
    assert_eq!(acted.len(), 5, "{acted:?}");
    for (k, at) in (1..=5).zip(&acted) {
        let due = INTERVAL * k;
        assert!(*at >= due && *at < due + TICK, "{acted:?}");
    }
    // Both pods in turn: a blocked one starves no other.
    let pods: Vec<String> = api
        .requests("POST", "/events")
        .iter()
        .filter_map(|r| r.body["regarding"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        pods.contains(&"a-0".to_owned()) && pods.contains(&"b-0".to_owned()),
        "{pods:?}"
    );
    token.cancel();
}

#[tokio::test(start_paused = true)]
async fn nothing_acts_on_a_finding_younger_than_the_minimum_age() {
    let t0 = Instant::now();
    // Older than an interval before it may act: the age holds it back, not the interval.
    let after = INTERVAL * 2;
    let (api, tx, token) = start(after);
    tokio::time::sleep_until(t0 + after - Duration::from_secs(1)).await;
    assert!(actions(&api).is_empty());
    tokio::time::sleep_until(t0 + after + Duration::from_secs(1)).await;
    let acted = actions(&api);
    assert_eq!(acted.len(), 1);
    assert!(
        acted[0] >= t0 + after && acted[0] < t0 + after + TICK,
        "{acted:?}"
    );
    // The findings clear and come back: young again.
    tx.send_replace(Published {
        ready: true,
        ..Published::default()
    });
    tokio::time::sleep_until(t0 + after + Duration::from_secs(2)).await;
    tx.send_replace(two_shadowed());
    let back = Instant::now();
    tokio::time::sleep_until(back + after - Duration::from_secs(1)).await;
    assert_eq!(
        actions(&api).len(),
        1,
        "acted on a finding younger than {after:?}"
    );
    tokio::time::sleep_until(back + after + Duration::from_secs(1)).await;
    assert_eq!(actions(&api).len(), 2);
    token.cancel();
}
