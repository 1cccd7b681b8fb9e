//! Builds for other platforms with no SDK from a vendor: zig (PyPI's `ziglang`)
//! is the C compiler and linker of every target, through `cargo-zigbuild` (PyPI
//! too), in a venv of their own. ring compiles C even for `cargo check`, so the
//! macOS type check needs it as well.
//!
//! macOS is type-checked only: linking needs Apple's frameworks (Security,
//! CoreFoundation, through rustls-native-certs), which no registry ships.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::{run, setup, workspace_root};

/// The pinned ziglang and cargo-zigbuild (xtask/cross-requirements.txt).
const REQUIREMENTS: &str = "xtask/cross-requirements.txt";

/// What the macOS type check and the other platforms' builds compile for.
pub(crate) const DARWIN: &str = "aarch64-apple-darwin";
pub(crate) const LINUX_ARM64: &str = "aarch64-unknown-linux-musl";
pub(crate) const WINDOWS: &str = "x86_64-pc-windows-gnu";

/// The venv with zig and cargo-zigbuild: `$IPSHADOW_ZIG_VENV`, else
/// ~/.cache/ipshadow/zig-venv.
fn venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("IPSHADOW_ZIG_VENV") {
        return dir.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/ipshadow/zig-venv")
}

/// The Rust targets and the zig venv (idempotent: a marker file holds the
/// requirements installed).
pub(crate) fn setup() -> anyhow::Result<()> {
    for target in [DARWIN, LINUX_ARM64, WINDOWS] {
        setup::rust_target(target)?;
    }
    setup::python_venv(&venv(), &workspace_root().join(REQUIREMENTS), false)
}

/// `cargo-zigbuild <args>` from the venv, which also puts its `python3 -m
/// ziglang` (zig) first on PATH.
fn zigbuild(args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
    let bin = venv().join("bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let path = std::env::join_paths(paths).context("joining PATH")?;
    run(Command::new(bin.join("cargo-zigbuild"))
        .args(args)
        .envs(env.iter().copied())
        .env("PATH", path))
}

/// `cargo check` of the binary (`audit`, the kubectl plugin) for macOS: the
/// proof that what reads the cluster needs neither aya nor netlink.
/// Warnings are errors, as clippy's are on Linux: code compiled on Linux only
/// leaves what only it uses unused elsewhere.
pub(crate) fn check_darwin() -> anyhow::Result<()> {
    zigbuild(
        &[
            "check", "--locked", "-p", "ipshadow", "--lib", "--bins", "--target", DARWIN,
        ],
        &[("CARGO_TARGET_AARCH64_APPLE_DARWIN_RUSTFLAGS", "-Dwarnings")],
    )
}

/// A release build of the binary for `target`; returns its path.
pub(crate) fn build(target: &str, exe: &str) -> anyhow::Result<PathBuf> {
    zigbuild(
        &[
            "zigbuild",
            "--release",
            "--locked",
            "-p",
            "ipshadow",
            "--bin",
            "ipshadow",
            "--target",
            target,
        ],
        &[],
    )?;
    Ok(crate::target_dir().join(format!("{target}/release/{exe}")))
}
