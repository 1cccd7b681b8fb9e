//! The real `ipshadow agent` running inside a test namespace.

use std::{
    net::SocketAddr,
    process::{Child, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use crate::{http, ipshadow_bin, netns::NetNs};

/// Where the agent listens inside its namespace (each test has its own).
pub const LISTEN: &str = "127.0.0.1:9785";

/// The `--metrics-names` the harness passes unless a test gives its own: the
/// tests read pods by name in /metrics, which the agent's default (names only
/// to scrapes --metrics-auth reviewed) leaves out of an open listener.
const NAMES: [&str; 2] = ["--metrics-names", "always"];

pub struct AgentProc {
    child: Option<Child>,
    /// The agent's stderr, removed with the process handle.
    pub log: tempfile::TempPath,
}

impl AgentProc {
    /// Starts `ipshadow agent <args>` in `ns`, listening on [`LISTEN`], logging to a file.
    pub fn spawn(ns: &NetNs, args: &[&str]) -> Self {
        Self::spawn_env(ns, args, &[])
    }

    /// Like [`AgentProc::spawn`], with extra environment (e.g. KUBECONFIG).
    pub fn spawn_env(ns: &NetNs, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_wrapped(ns, &[], args, env)
    }

    /// Like [`AgentProc::spawn_env`], run through `wrapper` (e.g. `setpriv …
    /// --`), which must exec the agent so that the child's pid is the agent's.
    pub fn spawn_wrapped(
        ns: &NetNs,
        wrapper: &[&str],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::spawn_on(ns, LISTEN, wrapper, args, env)
    }

    /// Like [`AgentProc::spawn_wrapped`], listening on `listen` (several agents in one namespace).
    pub fn spawn_on(
        ns: &NetNs,
        listen: &str,
        wrapper: &[&str],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let names = if args.contains(&NAMES[0]) {
            &[][..]
        } else {
            &NAMES[..]
        };
        Self::launch(ns, listen, wrapper, &[names, args].concat(), env)
    }

    /// Like [`AgentProc::spawn_env`], with the agent's own `--metrics-names`
    /// default, as shipped: for tests of what an open listener shows.
    pub fn spawn_as_shipped(ns: &NetNs, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::launch(ns, LISTEN, &[], args, env)
    }

    fn launch(
        ns: &NetNs,
        listen: &str,
        wrapper: &[&str],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let (file, log) = tempfile::Builder::new()
            .prefix(&format!("{}-agent-", ns.name))
            .suffix(".log")
            .tempfile()
            .unwrap()
            .into_parts();
        let bin = ipshadow_bin();
        let (program, before) = match wrapper.split_first() {
            Some((w, rest)) => (*w, rest),
            None => (bin.to_str().unwrap(), &[][..]),
        };
        let child = ns
            .command(program)
            .args(before)
            .args(if wrapper.is_empty() {
                vec![]
            } else {
                vec![bin.to_str().unwrap()]
            })
            .arg("agent")
            .args(["--listen", listen])
            // One listener unless a test asks for the probes' own (several agents share a namespace).
            .args(if args.contains(&"--health-listen") {
                vec![]
            } else {
                vec!["--health-listen", listen]
            })
            .args(if args.contains(&"--log-level") {
                &[][..]
            } else {
                &["--log-level", "info,ipshadow=debug"][..]
            })
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        Self {
            child: Some(child),
            log,
        }
    }

    pub fn addr() -> SocketAddr {
        LISTEN.parse().unwrap()
    }

    /// GET on the agent from inside `ns`.
    pub fn get(ns: &NetNs, path: &str) -> Result<(u16, String), String> {
        let _inside = ns.enter();
        http::get(Self::addr(), path)
    }

    /// Polls `/metrics` every 5 ms until `cond` holds; how long it took, or `None` after `timeout`.
    pub fn wait_metrics(
        ns: &NetNs,
        timeout: Duration,
        mut cond: impl FnMut(&str) -> bool,
    ) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok((200, body)) = Self::get(ns, "/metrics")
                && cond(&body)
            {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// `ipshadow_reconciles_total{result="ok"}` of the agent in `ns` (0 before the first).
    pub fn reconciles(ns: &NetNs) -> f64 {
        let (_, m) = Self::get(ns, "/metrics").unwrap();
        http::sample(&m, "ipshadow_reconciles_total", &[("result", "ok")]).unwrap_or(0.0)
    }

    /// Runs `change`, then waits (up to [`crate::HANG`]) until the agent in `ns`
    /// has reconciled after it: the fact a test waits on before asserting that
    /// the change led to nothing.
    pub fn reconciled_after(ns: &NetNs, change: impl FnOnce()) {
        let before = Self::reconciles(ns);
        change();
        let moved = Self::wait_metrics(ns, crate::HANG, |m| {
            http::sample(m, "ipshadow_reconciles_total", &[("result", "ok")])
                .is_some_and(|n| n > before)
        });
        assert!(moved.is_some(), "no reconcile after the change");
    }

    /// Waits until `/readyz` answers 200.
    pub fn wait_ready(&self, ns: &NetNs) {
        let start = Instant::now();
        while start.elapsed() < crate::HANG {
            if matches!(Self::get(ns, "/readyz"), Ok((200, _))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "agent not ready after {:?}; log:\n{}",
            crate::HANG,
            self.log_text()
        );
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The exit status once the agent exits by itself within `timeout`.
    pub fn exited_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGTERM, then the exit status (killed after 10 s if it does not exit).
    pub fn terminate(mut self) -> (ExitStatus, Duration) {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(child.id().cast_signed(), libc::SIGTERM) };
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return (status, start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                return (child.wait().unwrap(), start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
