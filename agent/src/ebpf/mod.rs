//! eBPF observer: the TC classifier on `lo` and its `SHADOWED` map.
//!
//! Lifecycle: [`Observer::load`] (verifier), [`Observer::attach`] (to the
//! ingress of `lo`: on `lo` every packet passes egress and then ingress, so one
//! hook sees each locally delivered packet once), [`Observer::watch`] /
//! [`Observer::unwatch`] to keep the map equal to the findings, and
//! [`Observer::counters`] to read the evidence. Dropping it detaches.

use std::net::IpAddr;

use aya::{
    Ebpf,
    maps::{MapData, PerCpuHashMap, PerCpuValues},
    programs::{SchedClassifier, TcAttachType},
};
use ipshadow_common::{IpCounters, IpKey, PROGRAM_NAME, SHADOWED_MAP};

/// The object built by `agent/build.rs`; empty when built with `AYA_BUILD_SKIP=1`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ipshadow"));

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "this ipshadow binary was built without its eBPF program (AYA_BUILD_SKIP); rebuild without it"
    )]
    NotBuilt,
    #[error(
        "loading the eBPF object failed: {source}; the kernel needs BPF support and BTF, and the \
         process CAP_BPF and CAP_PERFMON (or root)"
    )]
    Load {
        #[source]
        source: aya::EbpfError,
    },
    #[error(
        "the eBPF object has no {what} named {name}; the binary and its program are out of step"
    )]
    Missing {
        what: &'static str,
        name: &'static str,
    },
    #[error("{action} failed: {source}")]
    Program {
        action: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error("{action} for {ip} failed: {source}")]
    Map {
        action: &'static str,
        ip: IpAddr,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("{action} failed: {source}")]
    MapOpen {
        action: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("counting possible CPUs failed ({what}): {source}")]
    Cpus {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The map key of an IP: IPv4 as IPv4-mapped IPv6.
pub fn key(ip: IpAddr) -> IpKey {
    match ip {
        IpAddr::V4(v4) => IpKey::from_v4_octets(v4.octets()),
        IpAddr::V6(v6) => IpKey::from_v6_octets(v6.octets()),
    }
}

pub struct Observer {
    // Keeps the program (and its attachment) alive; dropped last.
    ebpf: Ebpf,
    shadowed: PerCpuHashMap<MapData, IpKey, IpCounters>,
    cpus: usize,
}

impl Observer {
    /// Loads the embedded program into the kernel (runs the verifier); does not attach.
    pub fn load() -> Result<Self> {
        if OBJECT.is_empty() {
            return Err(Error::NotBuilt);
        }
        let mut ebpf = Ebpf::load(OBJECT).map_err(|source| Error::Load { source })?;
        let prog: &mut SchedClassifier = ebpf
            .program_mut(PROGRAM_NAME)
            .ok_or(Error::Missing {
                what: "program",
                name: PROGRAM_NAME,
            })?
            .try_into()
            .map_err(|source| Error::Program {
                action: "reading the classifier",
                source,
            })?;
        prog.load().map_err(|source| Error::Program {
            action: "loading the classifier into the kernel",
            source,
        })?;
        let map = ebpf.take_map(SHADOWED_MAP).ok_or(Error::Missing {
            what: "map",
            name: SHADOWED_MAP,
        })?;
        let shadowed = PerCpuHashMap::try_from(map).map_err(|source| Error::MapOpen {
            action: "opening the SHADOWED map",
            source,
        })?;
        let cpus = aya::util::nr_cpus().map_err(|(what, source)| Error::Cpus { what, source })?;
        Ok(Self {
            ebpf,
            shadowed,
            cpus,
        })
    }

    /// Attaches to the ingress of `iface` (TCX on kernels ≥ 6.6, else clsact).
    pub fn attach(&mut self, iface: &str) -> Result<()> {
        let prog: &mut SchedClassifier = self
            .ebpf
            .program_mut(PROGRAM_NAME)
            .ok_or(Error::Missing {
                what: "program",
                name: PROGRAM_NAME,
            })?
            .try_into()
            .map_err(|source| Error::Program {
                action: "reading the classifier",
                source,
            })?;
        let tcx = aya::util::KernelVersion::current()
            .is_ok_and(|v| v >= aya::util::KernelVersion::new(6, 6, 0));
        if !tcx {
            // Legacy tc needs the clsact qdisc; it may already be there.
            let _ = aya::programs::tc::qdisc_add_clsact(iface);
        }
        prog.attach(iface, TcAttachType::Ingress)
            .map_err(|source| Error::Program {
                action: "attaching the classifier to the ingress of the interface",
                source,
            })?;
        Ok(())
    }

    /// Starts counting traffic to and from `ip` (counters start at zero).
    pub fn watch(&mut self, ip: IpAddr) -> Result<()> {
        let zeros =
            PerCpuValues::try_from(vec![IpCounters::default(); self.cpus]).map_err(|e| {
                Error::Cpus {
                    what: "per-CPU values",
                    source: e,
                }
            })?;
        self.shadowed
            .insert(key(ip), zeros, 0)
            .map_err(|source| Error::Map {
                action: "adding to SHADOWED",
                ip,
                source,
            })
    }

    /// Stops counting `ip`, returning its final counters.
    pub fn unwatch(&mut self, ip: IpAddr) -> Result<Option<IpCounters>> {
        let last = self.counters(ip)?;
        match self.shadowed.remove(&key(ip)) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(last),
            Err(source) => Err(Error::Map {
                action: "removing from SHADOWED",
                ip,
                source,
            }),
        }
    }

    /// The counters of `ip` summed over CPUs; `None` when it is not watched.
    pub fn counters(&self, ip: IpAddr) -> Result<Option<IpCounters>> {
        match self.shadowed.get(&key(ip), 0) {
            Ok(per_cpu) => {
                let mut sum = IpCounters::default();
                for c in per_cpu.iter() {
                    sum.accumulate(c);
                }
                Ok(Some(sum))
            }
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(source) => Err(Error::Map {
                action: "reading SHADOWED",
                ip,
                source,
            }),
        }
    }
}
