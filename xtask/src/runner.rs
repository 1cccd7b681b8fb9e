//! Runs the workspace's test binaries a few at a time. `cargo test` runs them
//! one after another, and most of ours spend their time waiting on an agent
//! (a reconcile, an Event budget, a re-watch), not on the CPU: side by side
//! they finish in the time of the slowest few. Each binary still runs its own
//! tests in parallel as `cargo test` would; their outputs are printed whole, one
//! binary at a time, as each finishes. A binary that checks the whole machine
//! ([`ALONE`]) runs after the others, by itself.

use std::{
    collections::{BTreeMap, VecDeque},
    fs::File,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use std::fmt::Write as _;

use anyhow::{Context as _, bail};

/// The slowest binaries, slowest first, for a run with no previous durations
/// (CI's fresh clone). Only the order depends on it.
const KNOWN_SLOW: &[&str] = &[
    "tests/soak.rs",
    "tests/tenant.rs",
    "tests/kube_loud.rs",
    "tests/reliability.rs",
    "tests/manifests.rs",
    "tests/kube_agent.rs",
];

/// Binaries that check state of the whole machine (the demo: no eBPF program
/// named ipshadow_lo outlives it), run after the others, by themselves.
const ALONE: &[&str] = &["tests/demo.rs"];

/// One test executable `cargo test --no-run` built.
#[derive(Debug, Clone)]
struct Binary {
    /// Shown as cargo shows it: `tests/tenant.rs` or `unittests src/lib.rs`.
    label: String,
    executable: PathBuf,
    /// Its package's directory: `cargo test` runs a test binary there.
    package_dir: PathBuf,
}

/// What one binary did.
struct Outcome {
    label: String,
    took: Duration,
    passed: bool,
}

/// Builds every test binary of the workspace (`build_args` as for `cargo
/// test`), then runs each with `test_args`, `jobs` at a time, the slowest of
/// the previous run first. `env` is set for every binary.
pub(crate) fn run(
    build_args: &[&str],
    test_args: &[&str],
    jobs: usize,
    env: &[(&str, &std::ffi::OsStr)],
) -> anyhow::Result<()> {
    let binaries = build(build_args)?;
    let durations_file = crate::target_dir().join("test-durations.tsv");
    let previous = read_durations(&durations_file);
    let mut queue: Vec<Binary> = binaries;
    // Slowest first, so that the longest binary does not start last; on a
    // fresh checkout (no previous run) the ones known to be slow.
    queue.sort_by_key(|b| {
        let hint = KNOWN_SLOW
            .iter()
            .position(|s| *s == b.label)
            .map_or(0, |i| 10_000 - i as u64);
        std::cmp::Reverse(previous.get(&b.label).copied().unwrap_or(hint))
    });
    eprintln!(
        "xtask: running {} test binaries, {jobs} at a time",
        queue.len()
    );
    let (alone, side_by_side): (Vec<Binary>, Vec<Binary>) = queue
        .into_iter()
        .partition(|b| ALONE.contains(&b.label.as_str()));
    let outcomes = Mutex::new(Vec::new());
    let print = Mutex::new(());
    let logs = tempfile_dir()?;
    for (batch, jobs) in [(side_by_side, jobs), (alone, 1)] {
        let queue = Mutex::new(VecDeque::from(batch));
        std::thread::scope(|s| {
            for _ in 0..jobs.max(1) {
                s.spawn(|| {
                    while let Some(bin) = queue.lock().map_or(None, |mut q| q.pop_front()) {
                        let outcome = run_one(&bin, test_args, env, &logs, &print);
                        if let Ok(mut o) = outcomes.lock() {
                            o.push(outcome);
                        }
                    }
                });
            }
        });
    }
    let outcomes = outcomes.into_inner().unwrap_or_default();
    write_durations(&durations_file, &outcomes);
    let _ = std::fs::remove_dir_all(&logs);
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| o.label.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("test binaries failed: {}", failed.join(", "));
    }
    Ok(())
}

/// `cargo test --no-run --message-format=json`: the executables it built.
fn build(build_args: &[&str]) -> anyhow::Result<Vec<Binary>> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(build_args)
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .current_dir(crate::workspace_root())
        .stdout(Stdio::piped());
    eprintln!("xtask: running {cmd:?}");
    let out = cmd.output().with_context(|| format!("spawning {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed with {}", out.status);
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(bin) = binary(&msg) {
            binaries.push(bin);
        }
    }
    if binaries.is_empty() {
        bail!("{cmd:?} built no test binary");
    }
    Ok(binaries)
}

/// A test executable from one of cargo's JSON messages, if it is one.
fn binary(msg: &serde_json::Value) -> Option<Binary> {
    if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(msg["executable"].as_str()?);
    let package_dir = Path::new(msg["manifest_path"].as_str()?)
        .parent()?
        .to_owned();
    let src = Path::new(msg["target"]["src_path"].as_str()?);
    let relative = src.strip_prefix(&package_dir).unwrap_or(src).display();
    let kinds = msg["target"]["kind"].as_array()?;
    let label = if kinds.iter().any(|k| k == "test") {
        format!("{relative}")
    } else {
        format!("unittests {relative} ({})", msg["target"]["name"].as_str()?)
    };
    Some(Binary {
        label,
        executable,
        package_dir,
    })
}

fn run_one(
    bin: &Binary,
    test_args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    logs: &Path,
    print: &Mutex<()>,
) -> Outcome {
    let log = logs.join(
        bin.executable
            .file_name()
            .map_or_else(|| "test.log".into(), std::ffi::OsStr::to_os_string),
    );
    let started = Instant::now();
    let passed = File::create(&log)
        .and_then(|f| Ok((f.try_clone()?, f)))
        .and_then(|(out, err)| {
            let mut cmd = Command::new(&bin.executable);
            cmd.args(test_args)
                .current_dir(&bin.package_dir)
                .env("CARGO_MANIFEST_DIR", &bin.package_dir)
                .stdout(out)
                .stderr(err);
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd.status()
        })
        .is_ok_and(|s| s.success());
    let took = started.elapsed();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _one_at_a_time = print.lock();
    println!(
        "\n     Running {} ({}) — {:.1} s, {}",
        bin.label,
        bin.executable.display(),
        took.as_secs_f64(),
        if passed { "passed" } else { "FAILED" }
    );
    print!("{text}");
    Outcome {
        label: bin.label.clone(),
        took,
        passed,
    }
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = crate::target_dir().join("test-logs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// The previous run's seconds per binary (`label\tseconds` lines), to order the next.
fn read_durations(path: &Path) -> BTreeMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (label, secs) = l.rsplit_once('\t')?;
            Some((label.to_owned(), secs.parse().ok()?))
        })
        .collect()
}

fn write_durations(path: &Path, outcomes: &[Outcome]) {
    let mut previous = read_durations(path);
    for o in outcomes {
        previous.insert(o.label.clone(), o.took.as_secs());
    }
    let mut text = String::new();
    for (label, secs) in &previous {
        let _ = writeln!(text, "{label}\t{secs}");
    }
    let _ = std::fs::write(path, text);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_test_artifact_is_a_binary_labelled_as_cargo_labels_it_and_others_are_not() {
        let msg = |kind: &str, test: bool, exe: Option<&str>| {
            serde_json::json!({
                "reason": "compiler-artifact",
                "manifest_path": "/w/tests/Cargo.toml",
                "target": {"kind": [kind], "name": "tenant", "src_path": "/w/tests/tests/tenant.rs"},
                "profile": {"test": test},
                "executable": exe,
            })
        };
        let bin = binary(&msg("test", true, Some("/w/target/debug/deps/tenant-1"))).unwrap();
        assert_eq!(bin.label, "tests/tenant.rs");
        assert_eq!(bin.package_dir, PathBuf::from("/w/tests"));
        assert_eq!(
            binary(&msg("lib", true, Some("/x"))).unwrap().label,
            "unittests tests/tenant.rs (tenant)"
        );
        assert!(
            binary(&msg("test", false, Some("/x"))).is_none(),
            "not built for test"
        );
        assert!(binary(&msg("test", true, None)).is_none(), "no executable");
    }

    #[test]
    fn durations_are_kept_across_runs_and_updated_per_binary() {
        let dir = std::env::temp_dir().join(format!("xtask-durations-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("d.tsv");
        let run = |label: &str, secs: u64| Outcome {
            label: label.to_owned(),
            took: Duration::from_secs(secs),
            passed: true,
        };
        write_durations(
            &file,
            &[run("tests/a.rs", 5), run("unittests src/lib.rs (x)", 1)],
        );
        write_durations(&file, &[run("tests/a.rs", 7)]);
        let got = read_durations(&file);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(got.get("tests/a.rs"), Some(&7));
        assert_eq!(got.get("unittests src/lib.rs (x)"), Some(&1));
    }
}
