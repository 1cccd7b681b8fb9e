//! Project tasks. `cargo xtask <task>`; every task runs `setup` first.
//!
//! xtask itself depends on nothing that needs the eBPF toolchain, so it builds
//! on a fresh machine and can install that toolchain.

mod bench_readme;
mod cross;
mod guards;
mod image;
mod plugin;
mod runner;
mod setup;

use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "ipshadow project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what the build and the tests need (idempotent; quick when all is there).
    Setup,
    /// Build the agent (with its eBPF program) in release mode.
    Build,
    /// Everything CI checks: fmt, clippy (host and eBPF), the macOS type check,
    /// unit tests, root-only network-namespace tests.
    Test {
        /// Skip fmt, clippy and the macOS type check.
        #[arg(long)]
        no_lint: bool,
        /// Skip the soaks (tests/tests/soak.rs: a 5-minute API outage, a
        /// 2-minute pod churn and 5 minutes of persistent findings, run in
        /// parallel); CI runs them.
        #[arg(long)]
        quick: bool,
        /// Test binaries run side by side (each runs its own tests in
        /// parallel too); most of their time is spent waiting on an agent.
        #[arg(long, env = "IPSHADOW_TEST_JOBS", default_value_t = 3,
              value_parser = clap::value_parser!(u16).range(1..=16))]
        jobs: u16,
        /// Extra arguments for the test binaries (after `--`), e.g. a test name filter.
        #[arg(last = true)]
        cargo_args: Vec<String>,
    },
    /// Rewrite the flag reference in docs/reference.md from the agent's clap
    /// definitions (a test fails while it differs).
    Docs,
    /// The kubectl plugin's krew archives (target/krew), one per platform, and
    /// the manifest listing those built with their sha256. linux/arm64 and
    /// windows/amd64 are linked by zig (`setup` installs it); each release
    /// build takes minutes.
    Plugin {
        /// Only these platforms (default: all).
        #[arg(long = "platform", value_enum)]
        platforms: Vec<plugin::Platform>,
    },
    /// The Helm chart deploy/helm/ipshadow packaged by Helm's engine as
    /// target/chart/ipshadow-<version>.tgz, version and appVersion the crate's.
    Chart,
    /// Simulated kube-ovn + Cilium node in network namespaces, checked by the real agent (root).
    Demo {
        /// No pauses between the steps (also when CI is set).
        #[arg(long)]
        non_interactive: bool,
    },
    /// Run every cargo-fuzz target in fuzz/ for a while (nightly, libFuzzer);
    /// `test` runs this too, unless --quick.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = FUZZ_SECONDS)]
        seconds: u64,
        /// Only these targets (default: all).
        targets: Vec<String>,
    },
    /// The container images: a static (musl) binary on `FROM scratch`, for
    /// amd64 (tagged TAG) and arm64 (TAG-arm64, linked by zig), built with the
    /// local Docker engine if one runs, else with podman (no registry needed).
    Image {
        /// Image name and tag.
        #[arg(long, default_value = concat!("ipshadow:", env!("CARGO_PKG_VERSION")))]
        tag: String,
        /// Only these architectures (default: both).
        #[arg(long, value_enum)]
        arch: Vec<image::Arch>,
    },
    /// Benchmarks (not tests, root): `ebpf` measures the classifier's cost on lo,
    /// `idle` the agent's CPU and memory on an idle node.
    Bench {
        /// Which bench to run.
        #[arg(value_enum, default_value = "all")]
        what: Bench,
        /// Where to write the JSON results (default target/bench/<what>.json).
        #[arg(long)]
        out: Option<String>,
        /// A single section's results also replace that section of
        /// bench/results.json (with their own `measured_at`), and
        /// bench/README.md's tables are rendered again from it.
        #[arg(long)]
        record: bool,
    },
    /// Renders bench/README.md's tables from bench/results.json.
    BenchReadme {
        /// First put a single section's results, written by an earlier
        /// `bench <section>` run, into bench/results.json: `SECTION=FILE`.
        #[arg(long, value_name = "SECTION=FILE")]
        record: Vec<String>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Bench {
    /// Every figure, side by side in one run: bench/results.json.
    All,
    Ebpf,
    Idle,
    Reaction,
    Scale,
    /// Reading 110 and 1,000 pod namespaces beside one host address dump.
    Namespaces,
    Api,
    /// Many agents against one API server holding a 5,000-node cluster.
    Fleet,
    /// `ipshadow audit` of 5,000 nodes and 150,000 pods.
    Audit,
    /// `ipshadow check` and the agent listing 300 Services with 256 KiB annotations (peak RSS;
    /// beside `IPSHADOW_BENCH_BEFORE_BIN`, an older binary, when set).
    Services,
    /// Peak RSS of `check` and the agent with 50 sandbox Events of 1.4 MB
    /// (`IPSHADOW_BEFORE_BIN`: an earlier build measured beside).
    Lists,
    /// The connection-rate figure alone (it is also part of `ebpf`).
    Connections,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    setup::run().context("setup failed")?;
    match cli.task {
        Task::Setup => Ok(()),
        Task::Build => cargo(&["build", "--release", "--locked", "-p", "ipshadow"]),
        Task::Test {
            no_lint,
            quick,
            jobs,
            cargo_args,
        } => test(no_lint, quick, jobs.into(), &cargo_args),
        Task::BenchReadme { record } => {
            for r in &record {
                let Some((name, file)) = r.split_once('=') else {
                    bail!(
                        "--record {r:?}: expected SECTION=FILE, e.g. scale=target/bench/scale.json"
                    );
                };
                record_section(name, file)?;
            }
            bench_readme()
        }
        Task::Bench { what, out, record } => {
            let name = match what {
                Bench::All => "all",
                Bench::Ebpf => "ebpf",
                Bench::Idle => "idle",
                Bench::Reaction => "reaction",
                Bench::Scale => "scale",
                Bench::Namespaces => "namespaces",
                Bench::Api => "api",
                Bench::Fleet => "fleet",
                Bench::Audit => "audit",
                Bench::Services => "services",
                Bench::Lists => "lists",
                Bench::Connections => "connections",
            };
            // The bench runs the agent binary too: build both, release.
            cargo(&["build", "--release", "--locked", "-p", "ipshadow"])?;
            cargo(&[
                "build",
                "--release",
                "--locked",
                "-p",
                "ipshadow-tests",
                "--features",
                "bench",
                "--bin",
                "ipshadow-bench",
            ])?;
            let out = out.unwrap_or_else(|| match what {
                Bench::All => "bench/results.json".to_owned(),
                _ => format!("target/bench/{name}.json"),
            });
            let bin = target_dir().join("release/ipshadow");
            run(Command::new(target_dir().join("release/ipshadow-bench"))
                .env("IPSHADOW_BIN", bin)
                .args([name, out.as_str()]))?;
            match what {
                Bench::All => bench_readme(),
                _ if record => record_section(name, &out),
                _ => Ok(()),
            }
        }
        Task::Docs => cargo(&[
            "run",
            "--locked",
            "-q",
            "-p",
            "ipshadow",
            "--",
            "docs",
            "--write",
            "docs/reference.md",
        ]),
        Task::Plugin { platforms } => plugin::build(&platforms),
        Task::Chart => chart().map(|_| ()),
        Task::Demo { non_interactive } => {
            cargo(&["build", "--locked", "-p", "ipshadow"])?;
            let mut args = vec![
                "run",
                "--locked",
                "-q",
                "-p",
                "ipshadow-tests",
                "--bin",
                "ipshadow-demo",
            ];
            if non_interactive {
                args.extend(["--", "--non-interactive"]);
            }
            cargo(&args)
        }
        Task::Image { tag, arch } => image::build(&tag, &arch, image::engine()?),
        Task::Fuzz { seconds, targets } => {
            for line in fuzz(seconds, &targets)? {
                println!("{line}");
            }
            Ok(())
        }
    }
}

/// Packages deploy/helm/ipshadow with Helm's engine (tests/helm/helm_sdk.py in
/// the venv `setup` made), version and appVersion the crate's; returns the archive.
fn chart() -> anyhow::Result<PathBuf> {
    let out = target_dir().join("chart");
    std::fs::create_dir_all(&out).context("creating the chart's output directory")?;
    let version = env!("CARGO_PKG_VERSION");
    let request = serde_json::json!([{
        "op": "package",
        "chart": workspace_root().join("deploy/helm/ipshadow"),
        "destination": out,
        "version": version,
        "app_version": version,
    }]);
    let answer = helm_sdk(&request)?;
    let answer = &answer[0];
    let Some(path) = answer["path"].as_str() else {
        bail!("Helm did not package the chart: {answer}");
    };
    eprintln!(
        "xtask: {path} ({})\n  helm install ipshadow {path}",
        answer["digest"].as_str().unwrap_or("?")
    );
    Ok(PathBuf::from(path))
}

/// Runs tests/helm/helm_sdk.py with `request` in the helm-python-sdk venv.
fn helm_sdk(request: &serde_json::Value) -> anyhow::Result<serde_json::Value> {
    use std::io::Write as _;
    let python = setup::helm_venv().join("bin/python");
    let mut child = Command::new(&python)
        .arg(workspace_root().join("tests/helm/helm_sdk.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("running {} (cargo xtask setup makes it)", python.display()))?;
    child
        .stdin
        .take()
        .context("the script's stdin")?
        .write_all(request.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("tests/helm/helm_sdk.py failed with {}", out.status);
    }
    serde_json::from_slice(&out.stdout).context("reading tests/helm/helm_sdk.py's answer")
}

/// The key in bench/results.json of a single section's results.
fn results_key(name: &str) -> &str {
    match name {
        "ebpf" | "connections" => "packet_path",
        "api" => "api_load",
        other => other,
    }
}

/// Puts the single section `name`'s results (written to `out`) into
/// bench/results.json, stamped with their own `measured_at`, and renders
/// bench/README.md's tables from it.
fn record_section(name: &str, out: &str) -> anyhow::Result<()> {
    let read = |p: &std::path::Path| -> anyhow::Result<serde_json::Value> {
        let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", p.display()))
    };
    let root = workspace_root();
    let run = read(&root.join(out))?;
    let all_path = root.join("bench/results.json");
    let mut all = read(&all_path)?;
    let key = results_key(name);
    let mut section = run["results"].clone();
    if let Some(fields) = section.as_object_mut() {
        fields.insert("measured_at".to_owned(), run["measured_at"].clone());
        // What the run does not write is kept (e.g. `fleet.sizes`, runs of
        // other sizes side by side): it is a record of those runs, not this one's.
        if let Some(old) = all["results"][key].as_object() {
            for (k, v) in old {
                fields.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    all["results"][key] = section;
    let text = serde_json::to_string_pretty(&all)? + "\n";
    std::fs::write(&all_path, text).with_context(|| format!("writing {}", all_path.display()))?;
    bench_readme()
}

/// Renders bench/README.md's tables from bench/results.json.
fn bench_readme() -> anyhow::Result<()> {
    let root = workspace_root();
    let readme_path = root.join("bench/README.md");
    let readme = std::fs::read_to_string(&readme_path)
        .with_context(|| format!("reading {}", readme_path.display()))?;
    let results: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("bench/results.json")).context("reading bench/results.json")?,
    )
    .context("parsing bench/results.json")?;
    let rendered = bench_readme::update(&readme, &results)?;
    std::fs::write(&readme_path, rendered)
        .with_context(|| format!("writing {}", readme_path.display()))
}

/// cargo's target directory: `$CARGO_TARGET_DIR`, else the workspace's target/.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || workspace_root().join("target"),
        |d| workspace_root().join(d),
    )
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// Runs `cargo <args>` in the workspace root, failing on a non-zero exit.
fn cargo(args: &[&str]) -> anyhow::Result<()> {
    run(Command::new(env!("CARGO")).args(args))
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    cmd.current_dir(workspace_root());
    eprintln!("xtask: running {cmd:?}");
    let status = cmd.status().with_context(|| format!("spawning {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn test(no_lint: bool, quick: bool, jobs: usize, cargo_args: &[String]) -> anyhow::Result<()> {
    if !no_lint {
        cargo(&["fmt", "--all", "--", "--check"])?;
        cargo(&[
            "clippy",
            "--locked",
            "--workspace",
            "--exclude",
            "ipshadow-ebpf",
            "--all-targets",
            // The benchmark's code is behind a feature: lint it too.
            "--all-features",
            "--",
            "-D",
            "warnings",
        ])?;
        // The eBPF crate builds only for the BPF target, with nightly.
        run(Command::new("rustup").args([
            "run",
            "nightly",
            "cargo",
            "clippy",
            "--locked",
            "-p",
            "ipshadow-ebpf",
            "--release",
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--",
            "-D",
            "warnings",
        ]))?;
        // `audit` and the kubectl plugin build off Linux.
        cross::check_darwin()?;
    }
    // The network-namespace tests run the real binary, and tests/tests/image.rs
    // the real image, built here as `cargo xtask image` builds it (with podman,
    // which runs it too).
    cargo(&["build", "--locked", "-p", "ipshadow"])?;
    image::build(
        image::TEST_IMAGE,
        &[image::Arch::Amd64],
        image::Engine::Podman,
    )?;
    // The soaks are #[ignore]d so that a plain `cargo test` stays quick.
    let mut test_args = Vec::new();
    if !quick {
        test_args.push("--include-ignored");
    }
    test_args.extend(cargo_args.iter().map(String::as_str));
    // Tests report what they measured (restarts survived, faults injected,
    // series counted…) through ipshadow_tests::figure into this file.
    std::fs::create_dir_all(target_dir())?;
    let figures = target_dir().join("test-figures.txt");
    let _ = std::fs::remove_file(&figures);
    // The root-only tests' guards record whether each ran (ipshadow_tests::guard).
    let guard_file = target_dir().join("test-guards.txt");
    let _ = std::fs::remove_file(&guard_file);
    let bin = target_dir().join("debug/ipshadow");
    let venv = setup::helm_venv();
    let conf = image::containers_conf();
    let env: [(&str, &std::ffi::OsStr); 7] = [
        ("IPSHADOW_FIGURES", figures.as_os_str()),
        ("IPSHADOW_GUARDS", guard_file.as_os_str()),
        ("IPSHADOW_BIN", bin.as_os_str()),
        ("IPSHADOW_IMAGE", image::TEST_IMAGE.as_ref()),
        ("IPSHADOW_HELM_VENV", venv.as_os_str()),
        ("CONTAINERS_CONF", conf.as_os_str()),
        ("PROPTEST_CASES", PROPTEST_CASES.as_ref()),
    ];
    let workspace = [
        "test",
        "--locked",
        "--workspace",
        "--exclude",
        "ipshadow-ebpf",
    ];
    let result = runner::run(&workspace, &test_args, jobs, &env)
        .and_then(|()| cargo(&[&workspace[..], &["--doc"]].concat()));
    let guards = guards::Guards::read(&guard_file);
    let result = result.and_then(|()| guards.check(guards::ci()));
    let mut lines: Vec<String> = std::fs::read_to_string(&figures)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let result = result.and_then(|()| {
        if quick {
            return Ok(());
        }
        lines.extend(fuzz(FUZZ_SECONDS, &[])?);
        Ok(())
    });
    lines.sort();
    println!(
        "\nFigures of this run ({} lines; property tests: {PROPTEST_CASES} cases per property):",
        lines.len()
    );
    for l in lines {
        println!("  {l}");
    }
    // Last, where it is seen: a skipped root-only test passed without checking anything.
    println!();
    for l in guards.report() {
        println!("{l}");
    }
    result
}

/// Seconds per fuzz target in `cargo xtask test`.
const FUZZ_SECONDS: u64 = 20;
/// The targets in fuzz/fuzz_targets, each with its seeds in fuzz/seeds/<target>.
const FUZZ_TARGETS: &[&str] = &["kube_objects", "netlink_messages", "ring_buffer_records"];

/// Runs the fuzz targets for `seconds` each; a crash fails (libFuzzer saves
/// the input under fuzz/artifacts/). Returns one figure line per target.
fn fuzz(seconds: u64, only: &[String]) -> anyhow::Result<Vec<String>> {
    let dir = workspace_root().join("fuzz");
    let mut figures = Vec::new();
    for target in FUZZ_TARGETS {
        if !only.is_empty() && !only.iter().any(|t| t == target) {
            continue;
        }
        // New inputs go to the first directory (not in git); the seeds are read only.
        let corpus = workspace_root().join("target/fuzz-corpus").join(target);
        std::fs::create_dir_all(&corpus)?;
        let mut cmd = Command::new("rustup");
        cmd.args([
            "run",
            "nightly",
            "cargo",
            "fuzz",
            "run",
            "--sanitizer",
            "none",
            target,
        ])
        .arg(&corpus);
        let seeds = dir.join("seeds").join(target);
        if seeds.is_dir() {
            cmd.arg(&seeds);
        }
        cmd.arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .arg("-rss_limit_mb=2048");
        if *target == "kube_objects" {
            cmd.arg(format!("-dict={}", dir.join("json.dict").display()));
        }
        // The agent's eBPF object is not needed to fuzz its parsers.
        cmd.env("AYA_BUILD_SKIP", "1").current_dir(&dir);
        eprintln!("xtask: running {cmd:?}");
        let out = cmd
            .stderr(std::process::Stdio::piped())
            .output()
            .with_context(|| format!("spawning {cmd:?}"))?;
        let log = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            eprintln!("{log}");
            bail!(
                "fuzz target {target} failed ({}); the crashing input is under fuzz/artifacts/{target}/",
                out.status
            );
        }
        let runs = log
            .lines()
            .find_map(|l| {
                l.strip_prefix("Done ")
                    .and_then(|r| r.split_whitespace().next())
            })
            .unwrap_or("?");
        let cov = log
            .lines()
            .rev()
            .find_map(|l| {
                l.split("cov: ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
            })
            .unwrap_or("?");
        figures.push(format!(
            "fuzz {target}: {runs} inputs in {seconds} s, no crash (coverage {cov} edges)"
        ));
    }
    Ok(figures)
}

/// Cases per property test (proptest's default is 256).
const PROPTEST_CASES: &str = "1024";
