//! Helpers for integration tests that build simulated nodes out of network
//! namespaces. Everything they create is removed when the guard drops, even
//! when a test panics.
//!
//! Tests call `unwrap`/`panic!` on purpose: a failure keeps its stack trace.
#![allow(clippy::unwrap_used)]

pub mod agent;
pub mod apiserver;
pub mod deploy;
pub mod http;
pub mod lab;
pub mod netns;
pub mod node;
pub mod objects;

use std::path::PathBuf;

/// Whether this process may create network namespaces; tests print why they
/// skip otherwise (CI runs as root, so they always run there).
pub fn can_run_netns_tests(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!(
            "skipping {test}: needs root to create network namespaces (run `cargo xtask test` as root)"
        );
    }
    root
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

/// A scratch directory `$TMPDIR/ipshadow-<tag>-<pid>`, removed when dropped
/// (also when the test panics).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ipshadow-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
