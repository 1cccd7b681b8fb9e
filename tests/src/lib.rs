//! Helpers for integration tests that build simulated nodes out of network
//! namespaces. Everything they create is removed when the guard drops, even
//! when a test panics.
//!
//! Tests call `unwrap`/`panic!` on purpose: a failure keeps its stack trace.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

pub mod admission;
pub mod agent;
pub mod apiserver;
pub mod check;
pub mod cni;
pub mod cni_node;
pub mod deploy;
pub mod helm;
pub mod http;
pub mod lab;
pub mod netns;
pub mod node;
pub mod node_status;
pub mod objects;
pub mod reviews;
pub mod watch_list;

use std::{path::PathBuf, time::Duration};

/// How long a test waits for something that should happen in milliseconds:
/// a bound for a hang, never a timing assertion (those are the benchmark's).
pub const HANG: Duration = Duration::from_secs(30);

/// Whether this process may create network namespaces. Either way the guard
/// records it (see [`guard`]): a root-only test that returns early is counted
/// as skipped, and `cargo xtask test` prints the counts and fails in CI on any.
pub fn can_run_netns_tests(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        guard(test, None);
    } else {
        guard(
            test,
            Some("needs root to create network namespaces (run `cargo xtask test` as root)"),
        );
    }
    root
}

/// Whether the running kernel is at least `major.minor`; records `test` as
/// skipped otherwise (as aya's integration tests do for kernel features).
pub fn kernel_at_least(major: u8, minor: u8, test: &str, feature: &str) -> bool {
    let current = aya::util::KernelVersion::current();
    let ok = current
        .as_ref()
        .is_ok_and(|v| *v >= aya::util::KernelVersion::new(major, minor, 0));
    if !ok {
        guard(
            test,
            Some(&format!(
                "{feature} needs kernel {major}.{minor} or later (running {current:?})"
            )),
        );
    }
    ok
}

/// The marker that starts a guard's line on stderr and in `$IPSHADOW_GUARDS`.
pub const GUARD_MARKER: &str = "ipshadow-guard";

/// Records that the root-only (or kernel-dependent) test `test` ran (`skip`
/// is `None`) or was skipped and why: a line `ipshadow-guard\tran|skipped\t<test>\t<why>`
/// on stderr, and appended to the file `$IPSHADOW_GUARDS` names (`cargo xtask
/// test` sets it, counts the lines and fails under `CI=true` on any skip).
pub fn guard(test: &str, skip: Option<&str>) {
    let line = match skip {
        None => format!("{GUARD_MARKER}\tran\t{test}\t\n"),
        Some(why) => format!("{GUARD_MARKER}\tskipped\t{test}\t{why}\n"),
    };
    if skip.is_some() {
        eprint!("{line}");
    }
    record_guard(&line);
}

/// Appends a guard line to the file `$IPSHADOW_GUARDS` names.
fn record_guard(line: &str) {
    use std::io::Write as _;
    if let Some(path) = std::env::var_os("IPSHADOW_GUARDS")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        // One write per line: appends from parallel tests do not interleave.
        let _ = f.write_all(line.as_bytes());
    }
}

/// Records that `test` could not run because this kernel was built without
/// the feature it needs, which the kernel itself just proved (it refused to
/// create the device): reported by `cargo xtask test`, not failed under CI,
/// since no setup of this machine can add it. Never for a feature a newer
/// kernel version or a package would bring: those are skips.
pub fn absent(test: &str, why: &str) {
    let line = format!("{GUARD_MARKER}\tabsent\t{test}\t{why}\n");
    eprint!("{line}");
    record_guard(&line);
}

/// The tc attach modes (`--tc-attach`) this kernel has: TCX needs 6.6; a test
/// that would try both records its TCX half as skipped when it runs only the
/// legacy one.
pub fn attach_modes(test: &str) -> Vec<&'static str> {
    if kernel_at_least(6, 6, &format!("{test} (TCX half)"), "TCX") {
        vec!["tcx", "netlink"]
    } else {
        vec!["netlink"]
    }
}

/// The `ipshadow` binary under test: `$IPSHADOW_BIN`, else the workspace's debug build.
pub fn ipshadow_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("IPSHADOW_BIN") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/debug/ipshadow");
    assert!(
        p.exists(),
        "{} does not exist: build it first (`cargo build -p ipshadow`, which `cargo xtask test` does) \
         or point IPSHADOW_BIN at it",
        p.display()
    );
    p
}

/// Reports a measured figure of a test: to stderr, and when `IPSHADOW_FIGURES`
/// names a file (`cargo xtask test` sets it), appended there with the test's
/// name, so that the figures of the whole run are printed together at its end.
pub fn figure(line: impl AsRef<str>) {
    use std::io::Write as _;
    let line = line.as_ref();
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("IPSHADOW_FIGURES") {
        let test = std::thread::current()
            .name()
            .unwrap_or("?")
            .rsplit("::")
            .next()
            .unwrap_or("?")
            .to_owned();
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            // One write per line: appends from parallel tests do not interleave.
            let _ = f.write_all(format!("{test}: {line}\n").as_bytes());
        }
    }
}

/// A scratch directory `$TMPDIR/ipshadow-<tag>-XXXXXX` (tempfile's unique
/// name), removed when dropped, also when the test panics.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        Self(
            tempfile::Builder::new()
                .prefix(&format!("ipshadow-{tag}-"))
                .tempdir()
                .unwrap(),
        )
    }
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        self.0.path()
    }
}

/// A command's standard output as JSON, or a panic showing both streams.
pub fn json_stdout(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
