//! The `ipshadow` binary: parses the command line, sets up logging, runs.
//! Exit codes of `check`: 0 no findings, 1 findings, 2 error.

use std::{io::IsTerminal as _, process::ExitCode};

use anyhow::Context as _;
use clap::Parser as _;
#[cfg(target_os = "linux")]
use ipshadow::check::{self, Outcome};
use ipshadow::cli::{Cli, Command, LogArgs, LogFormat, PluginCli};
use tracing_subscriber::EnvFilter;

const EXIT_ERROR: u8 = 2;

fn init_logging(args: &LogArgs) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&args.log_level)
        .with_context(|| format!("invalid --log-level {:?}", args.log_level))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}

#[cfg(target_os = "linux")]
async fn run_check(args: check::Args) -> anyhow::Result<ExitCode> {
    let mut report = check::run(&args).await.context("ipshadow check failed")?;
    if args.watch_seconds > 0 {
        let window = std::time::Duration::from_secs(args.watch_seconds);
        tracing::info!(
            seconds = args.watch_seconds,
            "watching host traffic to shadowed IPs"
        );
        let outcome = check::watch(&mut report, window, &args.ebpf)
            .await
            .context("the eBPF observer is required (--ebpf=required) but failed")?;
        match outcome {
            Outcome::Watched { ips, stale } => {
                if stale > 0 {
                    tracing::warn!(
                        removed = stale,
                        "removed tc filters an earlier ipshadow left on lo"
                    );
                }
                tracing::info!(ips, "eBPF observer detached");
            }
            Outcome::Off => tracing::info!("eBPF is off (--ebpf=off): no traffic evidence"),
            Outcome::Unavailable(e) => {
                tracing::warn!(reason = %e, "eBPF unavailable, running netlink-only: no traffic evidence");
            }
        }
    }
    for bad in &report.invalid {
        tracing::warn!(resource = bad.resource, object = %bad.object, problem = %bad.problem, "skipping malformed input");
    }
    let text = ipshadow::report::output::render(&report, args.output)?;
    println!("{}", text.trim_end());
    Ok(ExitCode::from(u8::from(!report.findings.is_empty())))
}

async fn run_audit(args: ipshadow::audit::Args) -> anyhow::Result<ExitCode> {
    let (audit, invalid) = ipshadow::audit::run(&args)
        .await
        .context("ipshadow audit failed")?;
    for bad in &invalid {
        tracing::warn!(resource = bad.resource, object = %bad.object, problem = %bad.problem, "skipping malformed input");
    }
    let text = ipshadow::report::audit::render(&audit, args.output)?;
    println!("{}", text.trim_end());
    Ok(ExitCode::from(u8::from(
        audit.findings().next().is_some() || !audit.plan.is_empty(),
    )))
}

/// `ipshadow docs` (hidden): the flag reference, printed or written into a file.
fn docs(args: &ipshadow::cli::reference::Args) -> anyhow::Result<ExitCode> {
    use ipshadow::cli::reference::{
        BEGIN, CNIS_BEGIN, CNIS_END, END, KINDS_BEGIN, KINDS_END, markdown, splice,
    };
    let Some(path) = &args.write else {
        print!("{}", markdown());
        return Ok(ExitCode::SUCCESS);
    };
    let doc =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let new = splice(&doc).with_context(|| {
        format!(
            "{} lacks the lines {BEGIN:?} and {END:?}, {KINDS_BEGIN:?} and {KINDS_END:?}, or \
             {CNIS_BEGIN:?} and {CNIS_END:?} (each pair in that order)",
            path.display()
        )
    })?;
    if new != doc {
        std::fs::write(path, new).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("{} rewritten", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The command line; as the kubectl plugin (`kubectl-ipshadow`, found on PATH
/// by `kubectl ipshadow …`) only the audit, its help saying `kubectl ipshadow`.
fn parse() -> Cli {
    let plugin = std::env::args_os().next().is_some_and(|a| {
        std::path::Path::new(&a)
            .file_stem()
            .is_some_and(|n| n == "kubectl-ipshadow")
    });
    if plugin {
        PluginCli::parse().into()
    } else {
        Cli::parse()
    }
}

fn main() -> ExitCode {
    let cli = parse();
    let result = init_logging(&cli.log).and_then(|()| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime failed")?;
        runtime.block_on(async {
            match cli.command {
                #[cfg(target_os = "linux")]
                Command::Check(args) => run_check(args).await,
                Command::Audit(args) => run_audit(args).await,
                #[cfg(target_os = "linux")]
                Command::Agent(args) => ipshadow::daemon::run(*args)
                    .await
                    .map(|()| ExitCode::SUCCESS)
                    .context("ipshadow agent failed"),
                Command::Docs(args) => docs(&args),
            }
        })
    });
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::from(EXIT_ERROR)
    })
}
