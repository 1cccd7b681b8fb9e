//! The loaded classifier and its maps: what the agent and `check` drive.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use aya::{
    Ebpf,
    maps::{MapData, PerCpuHashMap, PerCpuValues, RingBuf},
    programs::{TcAttachType, tc::TcAttachOptions},
};
use ipshadow_common::{FILTER_MAP, IpCounters, IpKey, SAMPLES_MAP, SHADOWED_MAP};

use super::{
    AttachMode, Error, Ownership, ProgramStats, Result, attach_options, classifier, decode,
    ip_map_failed, key, load_object, owner::OwnerLock, prefilter::Prefilter, program_failed,
    program_stats, remove_stale_filters, take_map,
};
use crate::report::{evidence::Sample, traffic::Counters};

/// The classifier, loaded (and once attached, hanging on an interface).
pub struct Observer {
    ebpf: Ebpf,
    shadowed: PerCpuHashMap<MapData, IpKey, IpCounters>,
    samples: RingBuf<MapData>,
    filter: Prefilter,
    watched: BTreeSet<IpAddr>,
    cpus: usize,
    /// Attached as a legacy tc filter (removing it at exit needs CAP_NET_ADMIN).
    legacy: bool,
    /// The claim on the interface, when this process is its owner.
    owner: Option<OwnerLock>,
}

impl Observer {
    /// Loads the embedded program into the kernel (runs the verifier); does not attach.
    pub fn load() -> Result<Self> {
        let mut ebpf = load_object()?;
        classifier(&mut ebpf)?.load().map_err(program_failed(
            "loading the classifier into the kernel (verifier)",
        ))?;
        let shadowed = take_map(&mut ebpf, SHADOWED_MAP)?;
        let samples = take_map(&mut ebpf, SAMPLES_MAP)?;
        let filter = Prefilter::new(take_map(&mut ebpf, FILTER_MAP)?);
        let cpus = aya::util::nr_cpus().map_err(|(what, cause)| Error::Cpus { what, cause })?;
        Ok(Self {
            ebpf,
            shadowed,
            samples,
            filter,
            watched: BTreeSet::new(),
            cpus,
            legacy: false,
            owner: None,
        })
    }

    /// Attaches to the ingress of `iface`. As its owner (no live ipshadow holds
    /// the claim) it first removes the legacy tc filters an earlier ipshadow left
    /// there when it was killed, and returns how many; beside a live owner it
    /// removes nothing, and `Exclusive` refuses to attach at all.
    pub fn attach(
        &mut self,
        iface: &'static str,
        mode: AttachMode,
        ownership: Ownership,
    ) -> Result<usize> {
        self.owner = OwnerLock::acquire(iface).map_err(|cause| Error::Claim { iface, cause })?;
        let stale = match (&self.owner, ownership) {
            (Some(_), _) => remove_stale_filters(iface)?,
            (None, Ownership::Exclusive) => return Err(Error::Busy { iface }),
            (None, Ownership::Shared) => {
                tracing::warn!(
                    iface,
                    "another ipshadow process has its classifier on this interface; attaching beside it, removing no filter"
                );
                0
            }
        };
        let options = attach_options(iface, mode);
        self.legacy = matches!(options, TcAttachOptions::Netlink(_));
        classifier(&mut self.ebpf)?
            .attach_with_options(iface, TcAttachType::Ingress, options)
            .map_err(program_failed(
                "attaching the classifier to the interface's ingress",
            ))?;
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
        self.filter.rewrite_one()
    }

    /// Makes the watched set equal to `want`: new IPs start at zero, IPs no
    /// longer wanted are removed. Returns the last counters of the removed ones.
    /// When the kernel has no memory for a new entry yet (ENOMEM), the rest are
    /// left out: the watched set is then short of `want`, and the caller tries
    /// again a little later rather than blocking here.
    pub fn sync(&mut self, want: &BTreeSet<IpAddr>) -> Result<BTreeMap<IpAddr, Counters>> {
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
                Err(e) => return Err(ip_map_failed("removing from SHADOWED", ip)(e)),
            }
            self.watched.remove(&ip);
        }
        // Addition: the entries first, then the prefilter.
        let new: Vec<IpAddr> = want.difference(&self.watched).copied().collect();
        let mut changed = BTreeSet::new();
        for ip in new {
            if !insert(&mut self.shadowed, ip, self.cpus)? {
                break;
            }
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
    pub fn unwatch(&mut self, ip: IpAddr) -> Result<Option<Counters>> {
        let mut want = self.watched.clone();
        want.remove(&ip);
        Ok(self.sync(&want)?.remove(&ip))
    }

    /// The IPs counted now.
    pub fn watched(&self) -> &BTreeSet<IpAddr> {
        &self.watched
    }

    /// The counters of `ip` summed over CPUs; `None` when it is not watched.
    pub fn counters(&self, ip: IpAddr) -> Result<Option<Counters>> {
        match self.shadowed.get(&key(ip), 0) {
            Ok(per_cpu) => Ok(Some(decode::counters(per_cpu.iter()))),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(ip_map_failed("reading SHADOWED", ip)(e)),
        }
    }

    /// Every sample waiting in the ring buffer, oldest first. Records of the
    /// wrong size (a program of another version) are skipped and counted.
    pub fn drain_samples(&mut self) -> (Vec<Sample>, usize) {
        let mut out = Vec::new();
        let mut bad = 0;
        while let Some(item) = self.samples.next() {
            match decode::sample(&item) {
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

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("watched", &self.watched.len())
            .field("legacy", &self.legacy)
            .finish_non_exhaustive()
    }
}

/// Inserts into SHADOWED; `false` on ENOMEM: the kernel allocates a
/// non-preallocated entry's per-CPU value without sleeping, from chunks it
/// refills in the background, so a burst of inserts can run ahead of it.
fn insert(
    map: &mut PerCpuHashMap<MapData, IpKey, IpCounters>,
    ip: IpAddr,
    cpus: usize,
) -> Result<bool> {
    let zeros =
        PerCpuValues::try_from(vec![IpCounters::default(); cpus]).map_err(|cause| Error::Cpus {
            what: "per-CPU values",
            cause,
        })?;
    match map.insert(key(ip), zeros, 0) {
        Ok(()) => Ok(true),
        Err(aya::maps::MapError::SyscallError(e))
            if e.io_error.raw_os_error() == Some(libc::ENOMEM) =>
        {
            Ok(false)
        }
        Err(e) => Err(ip_map_failed("adding to SHADOWED", ip)(e)),
    }
}
