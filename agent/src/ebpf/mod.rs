//! eBPF observer: the TC classifier on `lo`, its `SHADOWED` map and `SAMPLES`
//! ring buffer.
//!
//! Why `lo` ingress: a packet the host sends to one of its own addresses is
//! looped back through `lo` — it passes `lo`'s egress hook and then its ingress
//! hook — whatever device holds the address (`cilium_host`, `kube-ipvs0`, …).
//! So every host-to-"pod" packet that is really delivered locally crosses `lo`,
//! and one hook (ingress) sees each of them exactly once.
//!
//! Lifecycle: [`Observer::load`] (verifier), [`Observer::attach`] (removes what
//! a killed ipshadow left behind first), [`Observer::sync`] keeps the map equal
//! to the findings, [`Observer::counters`] and [`Observer::drain_samples`] read
//! the evidence. Dropping the observer detaches the program.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
};

pub use crate::evidence::{Evidence, Sample};
use aya::{
    Ebpf,
    maps::{Array, MapData, PerCpuHashMap, PerCpuValues, RingBuf},
    programs::{
        SchedClassifier, TcAttachType,
        tc::{NlOptions, TcAttachOptions},
    },
};
use ipshadow_common::{
    FILTER_MAP, FLOOR_PROGRAM_NAME, IpCounters, IpKey, PROGRAM_NAME, SAMPLES_MAP, SHADOWED_MAP,
    filter_bit,
};

/// The object built by `agent/build.rs`; empty when built with `AYA_BUILD_SKIP=1`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ipshadow"));

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("this ipshadow binary was built without its eBPF program (AYA_BUILD_SKIP=1)")]
    NotBuilt,
    #[error(
        "loading the eBPF object failed: {source}; the kernel needs BPF and BTF, and the process \
         CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)"
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
    #[error("{action} failed: {source}")]
    Tc {
        action: &'static str,
        #[source]
        source: aya::programs::tc::TcError,
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

/// The map key of an IP: IPv4 as IPv4-mapped IPv6.
pub fn key(ip: IpAddr) -> IpKey {
    match ip {
        IpAddr::V4(v4) => IpKey::from_v4_octets(v4.octets()),
        IpAddr::V6(v6) => IpKey::from_v6_octets(v6.octets()),
    }
}

/// The IP a map key stands for (IPv4-mapped IPv6 back to IPv4).
pub fn ip_of(addr: [u8; 16]) -> IpAddr {
    let v6 = std::net::Ipv6Addr::from(addr);
    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
}

fn tcx_supported() -> bool {
    aya::util::KernelVersion::current().is_ok_and(|v| v >= aya::util::KernelVersion::new(6, 6, 0))
}

pub struct Observer {
    ebpf: Ebpf,
    shadowed: PerCpuHashMap<MapData, IpKey, IpCounters>,
    samples: RingBuf<MapData>,
    filter: Prefilter,
    watched: BTreeSet<IpAddr>,
    cpus: usize,
    /// Attached as a legacy tc filter (removing it at exit needs CAP_NET_ADMIN).
    legacy: bool,
}

/// The userspace side of the program's prefilter bitmap: which bits the watched
/// IPs set (several IPs may share one), mirrored word by word into the map.
struct Prefilter {
    map: Array<MapData, u64>,
    bit_users: HashMap<u32, u32>,
    words: HashMap<u32, u64>,
}

impl Prefilter {
    /// Sets or clears the bit of `ip`; returns the word index that changed, if any.
    fn update(&mut self, ip: IpAddr, add: bool) -> Option<u32> {
        let bit = filter_bit(&key(ip));
        let users = self.bit_users.entry(bit).or_default();
        let before = *users > 0;
        if add {
            *users += 1;
        } else {
            *users = users.saturating_sub(1);
        }
        let after = *users > 0;
        if *users == 0 {
            self.bit_users.remove(&bit);
        }
        if before == after {
            return None;
        }
        let word = self.words.entry(bit >> 6).or_default();
        if after {
            *word |= 1 << (bit & 63);
        } else {
            *word &= !(1 << (bit & 63));
        }
        Some(bit >> 6)
    }

    fn write(&mut self, changed: &BTreeSet<u32>) -> Result<()> {
        for &i in changed {
            let value = self.words.get(&i).copied().unwrap_or(0);
            self.map.set(i, value, 0).map_err(|source| Error::MapOpen {
                action: "writing the FILTER bitmap",
                source,
            })?;
            if value == 0 {
                self.words.remove(&i);
            }
        }
        Ok(())
    }
}

impl Observer {
    /// Loads the embedded program into the kernel (runs the verifier); does not attach.
    pub fn load() -> Result<Self> {
        let mut ebpf = load_object()?;
        classifier(&mut ebpf)?
            .load()
            .map_err(|source| Error::Program {
                action: "loading the classifier into the kernel (verifier)",
                source,
            })?;
        let shadowed = take_map(&mut ebpf, SHADOWED_MAP)?;
        let samples = take_map(&mut ebpf, SAMPLES_MAP)?;
        let filter = Prefilter {
            map: take_map(&mut ebpf, FILTER_MAP)?,
            bit_users: HashMap::new(),
            words: HashMap::new(),
        };
        let cpus = aya::util::nr_cpus().map_err(|(what, source)| Error::Cpus { what, source })?;
        Ok(Self {
            ebpf,
            shadowed,
            samples,
            filter,
            watched: BTreeSet::new(),
            cpus,
            legacy: false,
        })
    }

    /// Attaches to the ingress of `iface`, first removing legacy tc filters an
    /// earlier ipshadow left there when it was killed. Returns how many it removed.
    pub fn attach(&mut self, iface: &str, mode: AttachMode) -> Result<usize> {
        let stale = remove_stale_filters(iface)?;
        let options = attach_options(iface, mode);
        self.legacy = matches!(options, TcAttachOptions::Netlink(_));
        classifier(&mut self.ebpf)?
            .attach_with_options(iface, TcAttachType::Ingress, options)
            .map_err(|source| Error::Program {
                action: "attaching the classifier to the interface's ingress",
                source,
            })?;
        Ok(stale)
    }

    /// Whether the program hangs on lo as a legacy tc filter rather than a TCX link.
    pub fn is_legacy(&self) -> bool {
        self.legacy
    }

    /// Writes one word of the prefilter with the value it already has: the
    /// cheapest map update, to learn whether updates still work (e.g. after a
    /// capability was dropped; kernels before 6.5 gate every bpf() call).
    pub fn probe_update(&mut self) -> Result<()> {
        let (index, value) = self
            .filter
            .words
            .iter()
            .next()
            .map_or((0, 0), |(i, v)| (*i, *v));
        self.filter
            .map
            .set(index, value, 0)
            .map_err(|source| Error::MapOpen {
                action: "rewriting a FILTER word",
                source,
            })
    }

    /// Makes the watched set equal to `want`: new IPs start at zero, IPs no
    /// longer wanted are removed. Returns the last counters of the removed ones.
    pub fn sync(&mut self, want: &BTreeSet<IpAddr>) -> Result<BTreeMap<IpAddr, IpCounters>> {
        let mut last = BTreeMap::new();
        let gone: Vec<IpAddr> = self.watched.difference(want).copied().collect();
        // Removal: the prefilter first (the program stops looking), then the entries.
        let changed: BTreeSet<u32> = gone
            .iter()
            .filter_map(|ip| self.filter.update(*ip, false))
            .collect();
        self.filter.write(&changed)?;
        for ip in gone {
            if let Some(c) = self.counters(ip)? {
                last.insert(ip, c);
            }
            match self.shadowed.remove(&key(ip)) {
                Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
                Err(source) => {
                    return Err(Error::Map {
                        action: "removing from SHADOWED",
                        ip,
                        source,
                    });
                }
            }
            self.watched.remove(&ip);
        }
        // Addition: the entries first, then the prefilter.
        let new: Vec<IpAddr> = want.difference(&self.watched).copied().collect();
        let mut changed = BTreeSet::new();
        for ip in new {
            insert_retrying(&mut self.shadowed, ip, self.cpus)?;
            self.watched.insert(ip);
            changed.extend(self.filter.update(ip, true));
        }
        self.filter.write(&changed)?;
        Ok(last)
    }

    /// Starts counting `ip` (a shorthand for adding it to the watched set).
    pub fn watch(&mut self, ip: IpAddr) -> Result<()> {
        let mut want = self.watched.clone();
        want.insert(ip);
        self.sync(&want).map(drop)
    }

    /// Stops counting `ip`, returning its last counters.
    pub fn unwatch(&mut self, ip: IpAddr) -> Result<Option<IpCounters>> {
        let mut want = self.watched.clone();
        want.remove(&ip);
        Ok(self.sync(&want)?.remove(&ip))
    }

    pub fn watched(&self) -> &BTreeSet<IpAddr> {
        &self.watched
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

    /// Every sample waiting in the ring buffer, oldest first. Records of the
    /// wrong size (a program of another version) are skipped and counted.
    pub fn drain_samples(&mut self) -> (Vec<Sample>, usize) {
        let mut out = Vec::new();
        let mut bad = 0;
        while let Some(item) = self.samples.next() {
            match Sample::decode(&item) {
                Some(s) => out.push(s),
                None => bad += 1,
            }
        }
        (out, bad)
    }

    /// The ring buffer's file descriptor, readable when samples wait (for epoll).
    pub fn samples_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd as _;
        self.samples.as_fd()
    }

    /// The kernel's id of the loaded program and its run statistics (run count
    /// and total run time; non-zero only while BPF stats are enabled).
    pub fn program_stats(&mut self) -> Result<ProgramStats> {
        program_stats(classifier(&mut self.ebpf)?)
    }
}

/// The empty classifier of the same object, attached like the real one: what
/// benchmarks compare against (the cost of the hook and of measuring it).
pub struct Floor {
    ebpf: Ebpf,
}

impl Floor {
    pub fn attach(iface: &str, mode: AttachMode) -> Result<Self> {
        let mut ebpf = load_object()?;
        let prog = program(&mut ebpf, FLOOR_PROGRAM_NAME)?;
        prog.load().map_err(|source| Error::Program {
            action: "loading the floor classifier",
            source,
        })?;
        prog.attach_with_options(iface, TcAttachType::Ingress, attach_options(iface, mode))
            .map_err(|source| Error::Program {
                action: "attaching the floor classifier",
                source,
            })?;
        Ok(Self { ebpf })
    }

    pub fn program_stats(&mut self) -> Result<ProgramStats> {
        program_stats(program(&mut self.ebpf, FLOOR_PROGRAM_NAME)?)
    }
}

/// A program's kernel id, run count and total run time.
#[derive(Clone, Copy, Debug)]
pub struct ProgramStats {
    pub id: u32,
    pub run_count: u64,
    pub run_time: std::time::Duration,
}

fn program_stats(prog: &SchedClassifier) -> Result<ProgramStats> {
    let info = prog.info().map_err(|source| Error::Program {
        action: "reading the program's info",
        source,
    })?;
    Ok(ProgramStats {
        id: info.id(),
        run_count: info.run_count(),
        run_time: info.run_time(),
    })
}

fn load_object() -> Result<Ebpf> {
    if OBJECT.is_empty() {
        return Err(Error::NotBuilt);
    }
    Ebpf::load(OBJECT).map_err(|source| Error::Load { source })
}

fn take_map<M>(ebpf: &mut Ebpf, name: &'static str) -> Result<M>
where
    M: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf
        .take_map(name)
        .ok_or(Error::Missing { what: "map", name })?;
    M::try_from(map).map_err(|source| Error::MapOpen {
        action: "opening a map of the eBPF object",
        source,
    })
}

/// TCX where asked for or (in auto mode) where the kernel has it; else legacy tc
/// on a clsact qdisc, which is added if missing.
fn attach_options(iface: &str, mode: AttachMode) -> TcAttachOptions {
    let tcx = match mode {
        AttachMode::Auto => tcx_supported(),
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

/// Inserts into SHADOWED, retrying briefly on ENOMEM: the kernel allocates a
/// non-preallocated entry's per-CPU value without sleeping, from chunks it
/// refills in the background, so a burst of inserts can run ahead of it.
fn insert_retrying(
    map: &mut PerCpuHashMap<MapData, IpKey, IpCounters>,
    ip: IpAddr,
    cpus: usize,
) -> Result<()> {
    const ATTEMPTS: u32 = 50;
    let mut attempt = 0;
    loop {
        let zeros =
            PerCpuValues::try_from(vec![IpCounters::default(); cpus]).map_err(|source| {
                Error::Cpus {
                    what: "per-CPU values",
                    source,
                }
            })?;
        match map.insert(key(ip), zeros, 0) {
            Ok(()) => return Ok(()),
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(libc::ENOMEM) && attempt < ATTEMPTS =>
            {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(u64::from(attempt)));
            }
            Err(source) => {
                return Err(Error::Map {
                    action: "adding to SHADOWED",
                    ip,
                    source,
                });
            }
        }
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
        .map_err(|source| Error::Program {
            action: "reading the classifier",
            source,
        })
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
                    source,
                });
            }
        }
        if removed > 64 {
            return Ok(removed);
        }
    }
}

/// The IPs whose locally delivered traffic is evidence: addresses this node
/// holds in its kernel (router, health, other local addresses) that a pod has.
/// The Ingress IP is not a kernel address, so host traffic to it never crosses `lo`.
pub fn watch_set(findings: &[crate::detect::Finding], node: &str) -> BTreeSet<IpAddr> {
    use crate::detect::{FindingKind, Role};
    findings
        .iter()
        .filter(|f| f.owner.node == node && f.owner.role != Role::Ingress)
        .filter(|f| f.kind != FindingKind::HostRouteBlackhole)
        .map(|f| f.ip)
        .collect()
}
