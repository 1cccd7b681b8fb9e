//! Installs the build and test toolchain on a Debian 12 machine, idempotently:
//! nightly's rust-src (for `-Z build-std=core`), Debian's LLVM 22 (bpf-linker
//! links against it), bpf-linker, the network tools the tests use, and zig
//! with cargo-zigbuild for the other platforms' builds (crate::cross).
//! Why each piece is what it is: the comments below, and README.md's requirements.

use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

/// bpf-linker's LLVM major must be at least rustc's (22 for stable and nightly here).
const LLVM_MAJOR: &str = "22";
const BPF_LINKER_VERSION: &str = "0.13.0";
/// cargo-fuzz for the fuzz targets in fuzz/ (libFuzzer is built by libfuzzer-sys, with g++).
const CARGO_FUZZ_VERSION: &str = "0.13.2";
/// Debian packages: LLVM for bpf-linker; iproute2 (ip, tc), libcap2-bin (capsh),
/// bpftool and prometheus (the server and promtool) for the tests; iperf3 for the benchmarks;
/// g++ for libFuzzer; musl-tools for the image's static binary, podman and runc to
/// build and run the image (tests/podman/containers.conf), python3-venv for Helm's
/// engine (tests/helm), wget for the chart's `helm test` command, and the CNI reference
/// plugins (`ptp`, `bridge`, `host-local` under /usr/lib/cni) that lay the kernel-truth
/// tests' pods out as a container runtime does (tests/src/cni.rs).
const APT_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "zlib1g-dev",
    "libzstd-dev",
    "iproute2",
    "libcap2-bin",
    "bpftool",
    "iperf3",
    "prometheus",
    "python3-yaml",
    "g++",
    "openssl",
    "curl",
    "musl-tools",
    "podman",
    "runc",
    "python3-venv",
    "wget",
    "containernetworking-plugins",
];

pub(crate) fn run() -> anyhow::Result<()> {
    rust_src()?;
    apt()?;
    bpf_linker()?;
    cargo_fuzz()?;
    kubectl()?;
    kubernetes_validate()?;
    musl()?;
    crate::cross::setup()?;
    helm_sdk()
}

/// The venv with tests/helm/requirements.txt (helm-python-sdk, pinned):
/// `$IPSHADOW_HELM_VENV`, else ~/.cache/ipshadow/helm-venv (tests/src/helm.rs
/// looks in the same place).
pub(crate) fn helm_venv() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("IPSHADOW_HELM_VENV") {
        return dir.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    std::path::Path::new(&home).join(".cache/ipshadow/helm-venv")
}

/// Installs tests/helm/requirements.txt into [`helm_venv`]: a venv of
/// Debian's python3 that sees its python3-yaml.
fn helm_sdk() -> anyhow::Result<()> {
    python_venv(
        &helm_venv(),
        &crate::workspace_root().join("tests/helm/requirements.txt"),
        true,
    )
}

/// Installs the pinned requirements `reqs_path` into the venv `venv` unless
/// its marker file says they are there.
pub(crate) fn python_venv(
    venv: &std::path::Path,
    reqs_path: &std::path::Path,
    system_site_packages: bool,
) -> anyhow::Result<()> {
    let reqs = std::fs::read_to_string(reqs_path)
        .with_context(|| format!("reading {}", reqs_path.display()))?;
    let marker = venv.join("ipshadow-requirements.txt");
    if venv.join("bin/python").exists() && std::fs::read_to_string(&marker).is_ok_and(|m| m == reqs)
    {
        return Ok(());
    }
    if venv.exists() {
        std::fs::remove_dir_all(venv).with_context(|| format!("removing {}", venv.display()))?;
    }
    let mut create = Command::new("/usr/bin/python3");
    create.args(["-m", "venv"]);
    if system_site_packages {
        create.arg("--system-site-packages");
    }
    checked(create.arg(venv))?;
    checked(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(reqs_path),
    )?;
    std::fs::write(&marker, reqs).with_context(|| format!("writing {}", marker.display()))
}

/// PyPI's kubernetes-validate checks the manifests against the Kubernetes schemas offline.
const KUBERNETES_VALIDATE: &str = "1.37.0";

fn kubernetes_validate() -> anyhow::Result<()> {
    if output(Command::new("python3").args(["-m", "kubernetes_validate", "--version"]))
        .is_some_and(|v| v.contains(KUBERNETES_VALIDATE))
    {
        return Ok(());
    }
    checked(Command::new("python3").args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        &format!("kubernetes-validate=={KUBERNETES_VALIDATE}"),
    ]))
}

/// The tests render deploy/ with kubectl's built-in kustomize. Debian's
/// `kubernetes-client` is kubectl 1.20, too old; the machine image ships a current one.
fn kubectl() -> anyhow::Result<()> {
    match output(Command::new("kubectl").args(["version", "--client"])) {
        Some(v) if v.contains("Kustomize") => Ok(()),
        _ => bail!(
            "no kubectl with kustomize built in on PATH (kubectl >= 1.14; Debian's kubernetes-client \
             1.20 lacks a current kustomize): install a current kubectl"
        ),
    }
}

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn checked(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("setup: running {cmd:?}");
    let status = cmd.status().with_context(|| format!("spawning {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn rust_src() -> anyhow::Result<()> {
    let installed = output(Command::new("rustup").args([
        "component",
        "list",
        "--toolchain",
        "nightly",
        "--installed",
    ]))
    .context(
        "the `nightly` toolchain is not installed; the eBPF program needs it \
             (`rustup toolchain install nightly --profile minimal`)",
    )?;
    if installed.lines().any(|l| l.starts_with("rust-src")) {
        return Ok(());
    }
    checked(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))
}

fn apt() -> anyhow::Result<()> {
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            output(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .is_none_or(|s| !s.contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        bail!(
            "missing Debian packages {missing:?}; run as root, or install them: \
             apt-get update && apt-get install -y {}",
            missing.join(" ")
        );
    }
    checked(Command::new("apt-get").args(["update", "-qq"]))?;
    checked(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing),
    )
}

fn bpf_linker() -> anyhow::Result<()> {
    if let Some(v) = output(Command::new("bpf-linker").arg("--version"))
        && v.contains(BPF_LINKER_VERSION)
    {
        return Ok(());
    }
    let prefix = format!("/usr/lib/llvm-{LLVM_MAJOR}");
    // Without LLVM_PREFIX the build script asks the first `llvm-config` on PATH,
    // which is Debian's default LLVM 14 and fails with `-lLLVM` not found.
    checked(
        Command::new(env!("CARGO"))
            .env("LLVM_PREFIX", &prefix)
            .args([
                "install",
                "bpf-linker",
                "--version",
                BPF_LINKER_VERSION,
                "--no-default-features",
                "--features",
                &format!("llvm-{LLVM_MAJOR}"),
                "--locked",
            ]),
    )
}

fn cargo_fuzz() -> anyhow::Result<()> {
    if output(Command::new(env!("CARGO")).args(["fuzz", "--version"]))
        .is_some_and(|v| v.contains(CARGO_FUZZ_VERSION))
    {
        return Ok(());
    }
    checked(Command::new(env!("CARGO")).args([
        "install",
        "cargo-fuzz",
        "--version",
        CARGO_FUZZ_VERSION,
        "--locked",
    ]))
}

/// The musl target and its C toolchain (ring builds C; musl-tools is in
/// APT_PACKAGES) for the image's static binary, which `cargo xtask test` builds.
pub(crate) fn musl() -> anyhow::Result<()> {
    rust_target("x86_64-unknown-linux-musl")
}

/// `rustup target add target` unless it is installed.
pub(crate) fn rust_target(target: &str) -> anyhow::Result<()> {
    let targets =
        output(Command::new("rustup").args(["target", "list", "--installed"])).unwrap_or_default();
    if !targets.lines().any(|t| t == target) {
        checked(Command::new("rustup").args(["target", "add", target]))?;
    }
    Ok(())
}
