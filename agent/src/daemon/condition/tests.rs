//! The condition writer against a recording API with tokio's clock paused: the
//! interval is crossed in no time and every write's instant is exact, so what
//! the integration tests could only bound by sleeping is checked here.

use std::{sync::Arc, time::Duration};

use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{Args, ConditionTask};
use crate::{
    daemon::{Published, test_api::TestApi},
    detect::{Finding, detect},
    inventory::{
        ConditionSeen, NodeFacts,
        fixtures::{ME, inventory, pod},
    },
    report::{condition::desired, metrics::Registry},
};

const INTERVAL: Duration = Duration::from_secs(30);
const STATUS: &str = "/api/v1/nodes/node-a/status";

/// Findings of `n` shadowed pods on this node.
fn findings(n: usize) -> Arc<Vec<Finding>> {
    let ips = ["10.244.4.251", "10.244.4.104"];
    let pods = (0..n)
        .map(|i| pod(&format!("p-{i}"), ME, &[ips[i % 2]]))
        .collect();
    Arc::new(detect(&inventory(pods)))
}

/// What the Node shows once `findings` were written (the watch brings it back).
fn shown(findings: &[Finding]) -> ConditionSeen {
    let want = desired(findings, ME);
    ConditionSeen {
        status: want.status,
        reason: want.reason,
        message: want.message,
        last_transition: None,
    }
}

fn published(findings: Arc<Vec<Finding>>, shadowed: Option<ConditionSeen>) -> Published {
    Published {
        findings,
        node: Some(NodeFacts {
            name: ME.to_owned(),
            uid: "uid-node-a".to_owned(),
            shadowed,
            ..NodeFacts::default()
        }),
        ready: true,
        ..Published::default()
    }
}

/// Starts the writer; returns the API, the sender of what it follows, the token.
fn start(first: Published) -> (TestApi, watch::Sender<Published>, CancellationToken) {
    let api = TestApi::default();
    let (tx, rx) = watch::channel(first);
    let args = Args {
        node_condition: true,
        node_condition_interval_seconds: INTERVAL.as_secs(),
    };
    let task = ConditionTask::new(api.client(), ME, &args, &mut Registry::default(), rx);
    let token = CancellationToken::new();
    tokio::spawn(task.run(token.clone()));
    (api, tx, token)
}

/// Lets the writer do all it has to until `at` (paused time: the runtime
/// advances the clock only once every task waits, so this returns after the
/// writer has acted on everything sent, and on every timer due by `at`).
async fn settle_until(at: Instant) {
    tokio::time::sleep_until(at).await;
}

#[tokio::test(start_paused = true)]
async fn one_write_per_change_and_none_for_what_the_node_already_shows() {
    let t0 = Instant::now();
    let (api, tx, token) = start(published(findings(1), None));
    settle_until(t0 + Duration::from_secs(1)).await;
    let writes = api.requests("PATCH", STATUS);
    assert_eq!(writes.len(), 1, "{writes:#?}");
    assert_eq!(writes[0].at, t0, "the first change is written at once");
    let body = &writes[0].body["status"]["conditions"][0];
    assert_eq!(body["status"], "True", "{body}");

    // The write comes back through the watch: nothing more to write, ever.
    tx.send_replace(published(findings(1), Some(shown(&findings(1)))));
    // An unrelated change (another reconcile, the same findings): nothing either.
    tx.send_replace(published(findings(1), Some(shown(&findings(1)))));
    settle_until(t0 + INTERVAL * 10).await;
    assert_eq!(api.requests("PATCH", STATUS).len(), 1);

    // Someone removed the condition: written again.
    tx.send_replace(published(findings(1), None));
    settle_until(t0 + INTERVAL * 11).await;
    assert_eq!(api.requests("PATCH", STATUS).len(), 2);
    token.cancel();
}

#[tokio::test(start_paused = true)]
async fn changes_within_the_interval_are_written_together_at_its_end() {
    let t0 = Instant::now();
    let (api, tx, token) = start(published(findings(1), None));
    settle_until(t0 + Duration::from_secs(1)).await;
    assert_eq!(api.requests("PATCH", STATUS).len(), 1);
    // Three more findings, one every second, all within the interval.
    for (n, second) in (2..=4).zip(2u64..) {
        tx.send_replace(published(findings(n), Some(shown(&findings(1)))));
        settle_until(t0 + Duration::from_secs(second)).await;
        assert_eq!(
            api.requests("PATCH", STATUS).len(),
            1,
            "within the interval"
        );
    }
    settle_until(t0 + INTERVAL * 3).await;
    let writes = api.requests("PATCH", STATUS);
    assert_eq!(writes.len(), 2, "{writes:#?}");
    // Once more, at the interval's end, with what the findings then said.
    // (A timer of tokio's fires in the millisecond tick after its deadline.)
    assert!(
        writes[1].at >= t0 + INTERVAL && writes[1].at < t0 + INTERVAL + Duration::from_millis(10),
        "{writes:#?}"
    );
    let message = writes[1].body["status"]["conditions"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.starts_with("4 findings"), "{message}");
    token.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_flapping_node_writes_no_more_than_once_per_interval() {
    let t0 = Instant::now();
    let (api, tx, token) = start(published(findings(1), None));
    // Findings come and go every 2 s for ten intervals; the Node shows each write.
    let mut last = findings(1);
    for step in 1..=(10 * INTERVAL.as_secs() / 2) {
        settle_until(t0 + Duration::from_secs(2 * step)).await;
        let writes = api.requests("PATCH", STATUS);
        let shows = writes.last().map(|w| {
            let c = &w.body["status"]["conditions"][0];
            ConditionSeen {
                status: c["status"] == "True",
                reason: c["reason"].as_str().unwrap_or_default().to_owned(),
                message: c["message"].as_str().unwrap_or_default().to_owned(),
                last_transition: None,
            }
        });
        last = if last.is_empty() {
            findings(1)
        } else {
            findings(0)
        };
        tx.send_replace(published(last.clone(), shows));
    }
    let writes = api.requests("PATCH", STATUS);
    assert!(writes.len() >= 10, "it kept up: {}", writes.len());
    for pair in writes.windows(2) {
        assert!(pair[1].at - pair[0].at >= INTERVAL, "{writes:#?}");
    }
    token.cancel();
}
