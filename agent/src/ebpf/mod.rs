//! eBPF observer: the TC classifier on `lo`, its `SHADOWED` map and `SAMPLES`
//! ring buffer — the program, its maps and their userspace readers behind one
//! small lifecycle.
//!
//! Why `lo` ingress: a packet the host sends to one of its own addresses is
//! looped back through `lo` — it passes `lo`'s egress hook and then its ingress
//! hook — whatever device holds the address (`cilium_host`, `kube-ipvs0`, …).
//! So every host-to-"pod" packet that is really delivered locally crosses `lo`,
//! and one hook (ingress) sees each of them exactly once.
//!
//! Lifecycle: [`Observer::load`] (verifier), [`Observer::attach`] (removes what
//! a killed ipshadow left behind first), [`Observer::sync`] keeps the map equal
//! to the watched IPs, [`Observer::counters`] and [`Observer::drain_samples`]
//! read the evidence, decoded here into the reporting layer's types. Dropping
//! the observer detaches the program.

pub mod decode;
#[cfg(feature = "bench")]
mod floor;
mod observer;
mod owner;
mod prefilter;

pub use owner::Ownership;

use std::net::IpAddr;

use aya::{
    Ebpf,
    programs::{
        SchedClassifier, TcAttachType,
        tc::{NlOptions, TcAttachOptions},
    },
};
pub use decode::{ip_of, key};
#[cfg(feature = "bench")]
pub use floor::Floor;
use ipshadow_common::PROGRAM_NAME;
pub use observer::Observer;

use crate::report::chain::Chain;

/// The interface every locally delivered packet crosses.
pub const LOOPBACK: &str = "lo";

/// The object built by `agent/build.rs`; empty when built with `AYA_BUILD_SKIP=1`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ipshadow"));

/// What went wrong loading, attaching or reading the program.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Built with `AYA_BUILD_SKIP=1`.
    #[error("this ipshadow binary was built without its eBPF program (AYA_BUILD_SKIP=1)")]
    NotBuilt,
    #[error(
        "loading the eBPF object failed: {}; the kernel needs BPF and BTF, and the process \
         CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)",
        Chain(.cause)
    )]
    /// The kernel refused the object.
    Load {
        /// aya's error.
        cause: aya::EbpfError,
    },
    #[error(
        "the eBPF object has no {what} named {name}; the binary and its program are out of step"
    )]
    /// The object lacks a program or map the agent expects.
    Missing {
        /// `program` or `map`.
        what: &'static str,
        /// Its name.
        name: &'static str,
    },
    /// Loading, attaching or reading the program failed.
    #[error("{action} failed: {}", Chain(.cause))]
    Program {
        /// What was being done.
        action: &'static str,
        /// aya's error.
        cause: aya::programs::ProgramError,
    },
    /// A tc (netlink) request failed.
    #[error("{action} failed: {}", Chain(.cause))]
    Tc {
        /// What was being done.
        action: &'static str,
        /// aya's error.
        cause: aya::programs::tc::TcError,
    },
    /// A map operation on one IP failed.
    #[error("{action} for {ip} failed: {}", Chain(.cause))]
    Map {
        /// What was being done.
        action: &'static str,
        /// The IP.
        ip: IpAddr,
        /// aya's error.
        cause: aya::maps::MapError,
    },
    /// Opening or writing a map failed.
    #[error("{action} failed: {}", Chain(.cause))]
    MapOpen {
        /// What was being done.
        action: &'static str,
        /// aya's error.
        cause: aya::maps::MapError,
    },
    /// Another live ipshadow process has its classifier on the interface.
    #[error(
        "another ipshadow process (the agent, or another check) has its classifier on {iface} in \
         this network namespace; check does not attach over it. The agent's traffic evidence is in \
         its metrics (ipshadow_blackholed_packets_total) and Events; or run check without \
         --watch-seconds"
    )]
    Busy {
        /// The interface.
        iface: &'static str,
    },
    /// The claim on the interface could not be taken.
    #[error("claiming {iface}'s classifier (an abstract Unix socket) failed: {}", Chain(.cause))]
    Claim {
        /// The interface.
        iface: &'static str,
        /// What the kernel said.
        cause: std::io::Error,
    },
    /// The possible CPUs could not be counted.
    #[error("counting possible CPUs failed ({what}): {}", Chain(.cause))]
    Cpus {
        /// Which count.
        what: &'static str,
        /// What the kernel said.
        cause: std::io::Error,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The [`Error::Program`] of `action`.
fn program_failed(action: &'static str) -> impl FnOnce(aya::programs::ProgramError) -> Error {
    move |cause| Error::Program { action, cause }
}

/// The [`Error::MapOpen`] of `action`.
fn map_failed(action: &'static str) -> impl FnOnce(aya::maps::MapError) -> Error {
    move |cause| Error::MapOpen { action, cause }
}

/// The [`Error::Map`] of `action` on `ip`.
fn ip_map_failed(action: &'static str, ip: IpAddr) -> impl FnOnce(aya::maps::MapError) -> Error {
    move |cause| Error::Map { action, ip, cause }
}

/// How the classifier is attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachMode {
    /// TCX on kernels ≥ 6.6, else a legacy tc filter on a clsact qdisc.
    #[default]
    Auto,
    /// TCX links: owned by the process, gone when it dies.
    Tcx,
    /// Legacy tc filter (netlink); survives the process, so a restart removes leftovers.
    Netlink,
}

/// Whether and how to use the eBPF observer.
#[derive(Debug, clap::Args)]
#[group(id = "ebpf")]
pub struct Args {
    /// eBPF observer: `auto` uses it when the kernel and capabilities allow and
    /// runs netlink-only otherwise; `required` fails without it; `off` never loads it.
    #[arg(long = "ebpf", env = "IPSHADOW_EBPF", value_enum, default_value_t = Mode::Auto)]
    pub mode: Mode,
    /// How to attach the classifier to `lo`: `tcx` (kernel ≥ 6.6), `netlink` (legacy tc), or `auto`.
    #[arg(long, env = "IPSHADOW_TC_ATTACH", value_enum, default_value_t = AttachMode::Auto)]
    pub tc_attach: AttachMode,
}

/// `--ebpf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Use it when possible, else run netlink-only.
    Auto,
    /// Fail without it.
    Required,
    /// Never load it.
    Off,
}

/// What became of the observer at start.
#[derive(Debug)]
pub enum Started {
    /// Loaded and attached; `stale` leftover tc filters were removed first.
    Attached {
        /// The observer.
        observer: Box<Observer>,
        /// Legacy filters of an earlier ipshadow removed from `lo`.
        stale: usize,
    },
    /// `--ebpf=off`.
    Off,
    /// `--ebpf=auto` and it could not be used: the reason, for one log line.
    Unavailable(Error),
}

/// Loads and attaches the observer on [`LOOPBACK`] as `args` say. `Err` only
/// in `required` mode.
pub fn start(args: &Args, ownership: Ownership) -> Result<Started> {
    if args.mode == Mode::Off {
        return Ok(Started::Off);
    }
    let attached = Observer::load().and_then(|mut observer| {
        let stale = observer.attach(LOOPBACK, args.tc_attach, ownership)?;
        Ok(Started::Attached {
            observer: Box::new(observer),
            stale,
        })
    });
    match (attached, args.mode) {
        (Ok(started), _) => Ok(started),
        (Err(e), Mode::Required) => Err(e),
        (Err(e), _) => Ok(Started::Unavailable(e)),
    }
}

/// A program's kernel id, run count and total run time.
#[derive(Clone, Copy, Debug)]
pub struct ProgramStats {
    /// The program's kernel id.
    pub id: u32,
    /// Runs counted while BPF statistics were on.
    pub run_count: u64,
    /// Total run time while BPF statistics were on.
    pub run_time: std::time::Duration,
}

fn program_stats(prog: &SchedClassifier) -> Result<ProgramStats> {
    let info = prog
        .info()
        .map_err(program_failed("reading the program's info"))?;
    Ok(ProgramStats {
        id: info.id(),
        run_count: info.run_count(),
        run_time: info.run_time(),
    })
}

pub(crate) fn load_object() -> Result<Ebpf> {
    if OBJECT.is_empty() {
        return Err(Error::NotBuilt);
    }
    Ebpf::load(OBJECT).map_err(|cause| Error::Load { cause })
}

fn take_map<M>(ebpf: &mut Ebpf, name: &'static str) -> Result<M>
where
    M: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf
        .take_map(name)
        .ok_or(Error::Missing { what: "map", name })?;
    M::try_from(map).map_err(map_failed("opening a map of the eBPF object"))
}

/// TCX where asked for or (in auto mode) where the kernel has it; else legacy tc
/// on a clsact qdisc, which is added if missing.
fn attach_options(iface: &str, mode: AttachMode) -> TcAttachOptions {
    let tcx = match mode {
        AttachMode::Auto => aya::util::KernelVersion::current()
            .is_ok_and(|v| v >= aya::util::KernelVersion::new(6, 6, 0)),
        AttachMode::Tcx => true,
        AttachMode::Netlink => false,
    };
    if tcx {
        TcAttachOptions::TcxOrder(aya::programs::links::LinkOrder::default())
    } else {
        // EEXIST when the qdisc is already there: fine.
        let _ = aya::programs::tc::qdisc_add_clsact(iface);
        TcAttachOptions::Netlink(NlOptions::default())
    }
}

fn classifier(ebpf: &mut Ebpf) -> Result<&mut SchedClassifier> {
    program(ebpf, PROGRAM_NAME)
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut SchedClassifier> {
    ebpf.program_mut(name)
        .ok_or(Error::Missing {
            what: "program",
            name,
        })?
        .try_into()
        .map_err(program_failed("reading the classifier"))
}

/// Removes legacy tc filters named like our program from the ingress of
/// `iface`. TCX links need no such care: they die with the process holding them.
fn remove_stale_filters(iface: &str) -> Result<usize> {
    let mut removed = 0;
    loop {
        match aya::programs::tc::qdisc_detach_program(iface, TcAttachType::Ingress, PROGRAM_NAME) {
            Ok(()) => removed += 1,
            Err(aya::programs::tc::TcError::IoError(e))
                if e.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(removed);
            }
            // No clsact qdisc at all: nothing can be attached the legacy way.
            Err(aya::programs::tc::TcError::NetlinkError(e))
                if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) =>
            {
                return Ok(removed);
            }
            Err(source) => {
                return Err(Error::Tc {
                    action: "removing leftover ipshadow tc filters",
                    cause: source,
                });
            }
        }
        if removed > 64 {
            return Ok(removed);
        }
    }
}
