//! Builds the eBPF program (ebpf/ipshadow-ebpf) with the nightly toolchain and
//! bpf-linker, and leaves the object in OUT_DIR for `include_bytes_aligned!`.
//!
//! `AYA_BUILD_SKIP=1` skips that (e.g. for a quick `cargo check` on a machine
//! without bpf-linker); the agent then carries an empty object and reports
//! "built without eBPF" at run time instead of failing to compile.
use std::{env, fs, path::PathBuf, process::Command};

use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};

/// `git <args>` in `dir`, its output trimmed; None outside a git checkout or without git.
fn git(dir: &str, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// The git revision built, for `ipshadow_build_info{revision}`: IPSHADOW_REVISION
/// when set (a build from a source archive), else the checkout's HEAD, else
/// "unknown". Rebuilt when HEAD or the branch it names moves.
fn revision(dir: &str) {
    println!("cargo:rerun-if-env-changed=IPSHADOW_REVISION");
    let revision = env::var("IPSHADOW_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| git(dir, &["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(dir, &["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        if let Some(path) = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", &name],
        ) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rustc-env=IPSHADOW_REVISION={revision}");
}

fn main() -> anyhow::Result<()> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or_else(|| anyhow!("OUT_DIR not set"))?);
    let object = out_dir.join("ipshadow");
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        // Keep an object from an earlier real build; otherwise provide an empty one.
        if !object.exists() {
            fs::write(&object, b"").with_context(|| format!("writing {}", object.display()))?;
        }
    }
    let root = env::var("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR not set")?;
    revision(&root);
    // Off Linux the agent's eBPF side is not compiled (only `audit` is): no object.
    if env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os != "linux") {
        return Ok(());
    }
    let ebpf_dir = PathBuf::from(root).join("../ebpf/ipshadow-ebpf");
    let ebpf_dir = ebpf_dir
        .to_str()
        .ok_or_else(|| anyhow!("non-UTF-8 path {}", ebpf_dir.display()))?;
    // The benchmarks' empty classifier only goes into the object with `--features bench`.
    let features: &[&str] = if env::var_os("CARGO_FEATURE_BENCH").is_some() {
        &["floor"]
    } else {
        &[]
    };
    aya_build::build_ebpf(
        [Package {
            name: "ipshadow-ebpf",
            root_dir: ebpf_dir,
            features,
            ..Default::default()
        }],
        Toolchain::Nightly,
    )
    .context(
        "building the eBPF program failed; run `cargo xtask setup` to install the nightly \
         rust-src component and bpf-linker, or set AYA_BUILD_SKIP=1 to build without eBPF",
    )
}
