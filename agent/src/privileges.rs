//! Dropping the capabilities the agent no longer needs once it has started.
//!
//! CAP_PERFMON and CAP_BPF are needed to load the program, CAP_NET_ADMIN to
//! attach it. Afterwards the agent only updates maps through descriptors it
//! already holds, reads the ring buffer it already mapped, and reads netlink,
//! none of which needs a capability on kernels ≥ 6.5. What stays:
//! - CAP_BPF where the kernel still gates every bpf() call on it (before 6.5,
//!   with unprivileged BPF disabled): learned by trying a map update without it;
//! - CAP_NET_ADMIN while the program hangs on lo as a legacy tc filter, because
//!   removing that filter at exit is a netlink request that needs it (a TCX link
//!   goes when its descriptor is closed);
//! - CAP_NET_ADMIN while the pods' namespaces are read: the kernel checks it on
//!   every dump by target nsid, for the socket's opener *and* the calling task,
//!   and without it the dump comes back empty rather than failing.
//!
//! Dropped from the effective, permitted and inheritable sets and the ambient
//! set: a dropped capability cannot come back for this process. The bounding
//! set is left alone (changing it needs CAP_SETPCAP, which the DaemonSet does
//! not grant).

use caps::{CapSet, Capability, CapsHashSet};

use crate::report::chain::Chain;

/// A capability call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or changing a capability set failed.
    #[error("{action} failed: {}; run with the capabilities the manifest in deploy/ grants", Chain(.cause))]
    Caps {
        /// What was being done.
        action: &'static str,
        /// The caps crate's error.
        cause: caps::errors::CapsError,
    },
}

/// What the attached eBPF program still needs from the process.
pub trait Attached {
    /// Whether it hangs on `lo` as a legacy tc filter (removing it needs CAP_NET_ADMIN).
    fn is_legacy(&self) -> bool;
    /// Whether a map update works with the current effective set.
    fn map_update_works(&mut self) -> bool;
}

/// What [`drop_unneeded`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Capabilities still held (effective), by name.
    pub kept: Vec<String>,
    /// Capabilities given up, by name.
    pub dropped: Vec<String>,
}

fn names(set: &CapsHashSet) -> Vec<String> {
    let mut v: Vec<String> = set.iter().map(ToString::to_string).collect();
    v.sort();
    v
}

fn caps_err(action: &'static str) -> impl FnOnce(caps::errors::CapsError) -> Error {
    move |cause| Error::Caps { action, cause }
}

/// Gives up every capability the running agent no longer needs (see the module
/// docs). `observer` is the attached eBPF observer, if any; `pod_namespaces`:
/// whether the pods' namespaces are read (which keeps CAP_NET_ADMIN).
pub fn drop_unneeded(
    observer: Option<&mut dyn Attached>,
    pod_namespaces: bool,
) -> Result<Dropped, Error> {
    let before = caps::read(None, CapSet::Permitted).map_err(caps_err("reading capabilities"))?;
    let mut keep = CapsHashSet::new();
    if pod_namespaces {
        keep.insert(Capability::CAP_NET_ADMIN);
    }
    if let Some(observer) = observer {
        if observer.is_legacy() && before.contains(&Capability::CAP_NET_ADMIN) {
            keep.insert(Capability::CAP_NET_ADMIN);
        }
        if needs_cap_bpf(observer, &before)? {
            keep.insert(Capability::CAP_BPF);
            // Root without CAP_BPF in its set (older kernels' spelling) passes the gate with this.
            if !before.contains(&Capability::CAP_BPF) {
                keep.insert(Capability::CAP_SYS_ADMIN);
            }
        }
    }
    keep.retain(|c| before.contains(c));
    // Effective must stay a subset of permitted: shrink it first.
    caps::set(None, CapSet::Effective, &keep).map_err(caps_err("shrinking the effective set"))?;
    caps::set(None, CapSet::Permitted, &keep).map_err(caps_err("shrinking the permitted set"))?;
    caps::clear(None, CapSet::Inheritable).map_err(caps_err("clearing the inheritable set"))?;
    // The ambient set may be absent on old kernels; nothing to clear then.
    let _ = caps::clear(None, CapSet::Ambient);
    let dropped: CapsHashSet = before.difference(&keep).copied().collect();
    Ok(Dropped {
        kept: names(&keep),
        dropped: names(&dropped),
    })
}

/// Whether map updates still work without CAP_BPF (and CAP_SYS_ADMIN, which
/// also passes the kernel's gate): tried with both out of the effective set.
fn needs_cap_bpf(observer: &mut dyn Attached, permitted: &CapsHashSet) -> Result<bool, Error> {
    let gate = [Capability::CAP_BPF, Capability::CAP_SYS_ADMIN];
    let mut without =
        caps::read(None, CapSet::Effective).map_err(caps_err("reading capabilities"))?;
    let had: Vec<Capability> = gate.into_iter().filter(|c| without.contains(c)).collect();
    if had.is_empty() {
        return Ok(false);
    }
    for c in &gate {
        without.remove(c);
    }
    caps::set(None, CapSet::Effective, &without).map_err(caps_err("trying without CAP_BPF"))?;
    let works = observer.map_update_works();
    // Back as it was; the caller decides what to keep.
    for c in had {
        if permitted.contains(&c) {
            caps::raise(None, CapSet::Effective, c).map_err(caps_err("restoring CAP_BPF"))?;
        }
    }
    Ok(!works)
}
