//! The long-lived tasks, watched. One that ends or panics before shutdown is
//! named by `/healthz` (503, so kubelet restarts the agent) and by
//! `ipshadow_task_up{task} 0`: detection or Events must not stop behind a
//! `/healthz` that still says 200.

use std::{
    collections::BTreeMap,
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex},
};

use futures::FutureExt as _;
use prometheus_client::metrics::{family::Family, gauge::Gauge};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::report::metrics::{Registry, TaskLabels};

/// Spawns tasks on one tracker and remembers which stopped before shutdown.
#[derive(Clone)]
pub(crate) struct Supervisor {
    tracker: TaskTracker,
    token: CancellationToken,
    stopped: Arc<Mutex<BTreeMap<&'static str, String>>>,
    up: Family<TaskLabels, Gauge>,
}

impl Supervisor {
    /// Tasks on `tracker`; stops after `token` is cancelled are shutdown, not failure.
    /// Registers `ipshadow_task_up` in `registry`.
    pub(crate) fn new(
        tracker: TaskTracker,
        token: CancellationToken,
        registry: &mut Registry,
    ) -> Self {
        let up = Family::<TaskLabels, Gauge>::default();
        registry.register(
            "ipshadow_task_up",
            "1 while a long-lived task of the agent runs, 0 once it stopped (then /healthz fails)",
            up.clone(),
        );
        Self {
            tracker,
            token,
            stopped: Arc::default(),
            up,
        }
    }

    /// Runs `task` as `name`, watched.
    pub(crate) fn spawn(
        &self,
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        let gauge = self.up.get_or_create(&TaskLabels { task: name }).clone();
        gauge.set(1);
        let (token, stopped) = (self.token.clone(), Arc::clone(&self.stopped));
        let task = cut(name, task);
        self.tracker.spawn(async move {
            let outcome = AssertUnwindSafe(task).catch_unwind().await;
            if token.is_cancelled() {
                return;
            }
            let why = match outcome {
                Ok(()) => "ended".to_owned(),
                Err(panic) => format!("panicked: {}", panic_text(panic.as_ref())),
            };
            tracing::error!(task = name, why, "a long-lived task stopped; /healthz fails from now on so that the agent is restarted");
            gauge.set(0);
            crate::inventory::lock(&stopped).insert(name, why);
        });
    }

    /// The tasks that stopped, and why, as one line; `None` while all run.
    pub(crate) fn failure(&self) -> Option<String> {
        let stopped = crate::inventory::lock(&self.stopped);
        (!stopped.is_empty()).then(|| {
            stopped
                .iter()
                .map(|(name, why)| format!("{name} {why}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

/// In debug builds only: `IPSHADOW_TEST_END_TASK=<name>` cuts that task off
/// after `IPSHADOW_TEST_END_AFTER_MS` (default 1000), as if it had ended, so
/// the tests can prove a stopped task is noticed. Release builds read neither
/// and cut no task.
fn cut(
    name: &'static str,
    task: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let end =
        cfg!(debug_assertions) && std::env::var("IPSHADOW_TEST_END_TASK").is_ok_and(|t| t == name);
    async move {
        if !end {
            return task.await;
        }
        let after = std::env::var("IPSHADOW_TEST_END_AFTER_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(1000);
        tokio::select! {
            () = task => {}
            () = tokio::time::sleep(std::time::Duration::from_millis(after)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_that_ends_or_panics_is_named_and_shutdown_is_not_failure() {
        let (tracker, token) = (TaskTracker::new(), CancellationToken::new());
        let mut registry = Registry::default();
        let s = Supervisor::new(tracker.clone(), token.clone(), &mut registry);
        s.spawn("quits", async {});
        s.spawn("breaks", async { panic!("boom") });
        let t = token.clone();
        s.spawn("runs", async move { t.cancelled().await });
        for _ in 0..100 {
            if s.failure()
                .is_some_and(|f| f.contains("quits") && f.contains("breaks"))
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(
            s.failure().as_deref(),
            Some("breaks panicked: boom; quits ended")
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        for line in [
            "ipshadow_task_up{task=\"runs\"} 1",
            "ipshadow_task_up{task=\"quits\"} 0",
            "ipshadow_task_up{task=\"breaks\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        token.cancel();
        tracker.close();
        tracker.wait().await;
        assert!(!s.failure().is_some_and(|f| f.contains("runs")));
    }
}
