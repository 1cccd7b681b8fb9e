//! What the namespaces behind the host's veth/netkit interfaces really hold,
//! read from the host namespace: for every host link with `IFLA_LINK_NETNSID`,
//! an `RTM_GETLINK` and an `RTM_GETADDR` dump carrying `IFLA_TARGET_NETNSID` /
//! `IFA_TARGET_NETNSID` = that nsid. No setns, no /proc, no runtime socket;
//! `CAP_NET_ADMIN` in the host namespace suffices.
//!
//! The socket has `NETLINK_GET_STRICT_CHK` set: without it the kernel parses
//! an address dump request as a bare `rtgenmsg`, never sees the target nsid,
//! and silently answers for the host namespace. Both need Linux 4.20
//! ([`MIN_KERNEL`]); on an older kernel the socket option fails with
//! `ENOPROTOOPT` and the read is skipped with that reason. Every answer must
//! carry the target nsid back; one that does not is refused, never taken for
//! the pod's.
//!
//! A namespace is read again only when the host interfaces leading to it
//! changed (appeared, changed state, master or peer) or after [`Peers::expire`]
//! (the agent's resync): what a pod changes inside its own namespace sends no
//! notification to the host namespace, so the resync bounds how long such a
//! change stays unseen, while a node's usual churn costs one host link dump
//! plus the namespaces that came and went. The resync's re-reads go
//! [`STALE_PER_PASS`] at a time, so no one reconcile pays for a whole node
//! (the agent reconciles again at once until none is left).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use futures::{StreamExt as _, TryStreamExt as _, stream};
use netlink_packet_route::link::{LinkAttribute, LinkExtentMask, LinkMessage};
use rtnetlink::Handle;

use crate::inventory::{HostIface, OperState, PeerNamespace, PodNamespaces, Unread, lock};

/// The first kernel that reads a peer namespace's addresses by nsid with
/// strict checking: `IFA_TARGET_NETNSID` (IPv4 and IPv6) and
/// `NETLINK_GET_STRICT_CHK` were both merged for Linux 4.20.
pub const MIN_KERNEL: &str = "4.20";

/// At most this many host interfaces with a peer are looked at.
pub const MAX_IFACES: usize = 8192;
/// At most this many peer namespaces are read per pass.
pub const MAX_NAMESPACES: usize = 4096;
/// At most this many addresses are kept per namespace.
pub const MAX_ADDRESSES: usize = 256;
/// How many namespace reads are in flight on the socket at once: one. The
/// kernel runs one dump per socket at a time and refuses (EBUSY) a dump
/// request while another's answer is still being read.
const PIPELINE: usize = 1;

/// Reading the peer namespaces failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel has no `NETLINK_GET_STRICT_CHK`.
    #[error(
        "this kernel does not support NETLINK_GET_STRICT_CHK (Linux {MIN_KERNEL} or later): the \
         addresses inside pod namespaces cannot be read from the host namespace, so the \
         kernel-truth checks are skipped; upgrade the node's kernel to use them"
    )]
    KernelTooOld,
    /// The socket could not be opened.
    #[error(
        "opening an rtnetlink socket with NETLINK_GET_STRICT_CHK failed: {}; ipshadow \
         must run in the node's network namespace (hostNetwork: true) with CAP_NET_ADMIN",
        crate::report::chain::Chain(.cause)
    )]
    Connect {
        /// What the kernel said.
        cause: std::io::Error,
    },
    /// The host's own link dump failed.
    #[error(
        "dumping the host's links (to find veth/netkit peers) failed: {}; retried on the next resync",
        crate::report::chain::Chain(.cause)
    )]
    HostLinks {
        /// rtnetlink's error.
        cause: rtnetlink::Error,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why one namespace could not be read (kept in [`PodNamespaces::unread`]).
#[derive(Debug, thiserror::Error)]
enum NsError {
    #[error(
        "the {what} dump for nsid {nsid} failed: {}; the namespace may have been deleted \
         meanwhile (a pod torn down): the next resync reads it again",
        crate::report::chain::Chain(.cause)
    )]
    Dump {
        what: &'static str,
        nsid: i32,
        cause: rtnetlink::Error,
    },
    #[error(
        "the kernel refused or left unanswered the request for the peer (ifindex {peer}) in \
         nsid {nsid}: reading another namespace by nsid needs CAP_NET_ADMIN, checked for the \
         process at every request; grant it (the DaemonSet adds NET_ADMIN)"
    )]
    Empty { nsid: i32, peer: u32 },
    #[error(
        "the kernel answered the {what} dump for nsid {nsid} without the target nsid: it \
         answered for the host namespace, so the answer was dropped; this needs Linux \
         {MIN_KERNEL} or later with NETLINK_GET_STRICT_CHK"
    )]
    TargetIgnored { what: &'static str, nsid: i32 },
}

/// A strict-checking rtnetlink socket for reading peer namespaces, and what
/// each namespace held at its last read.
#[derive(Debug)]
pub struct Peers {
    handle: Handle,
    kept: Mutex<BTreeMap<i32, Kept>>,
}

/// A namespace as last read, the host interfaces it was read through then,
/// and whether a resync wants it read again.
#[derive(Debug)]
struct Kept {
    through: Vec<Through>,
    ns: Arc<PeerNamespace>,
    stale: bool,
}

/// At most this many namespaces a resync wants read again are read in one
/// pass (about 8 ms here at 62 µs each); new and changed ones are always read.
pub const STALE_PER_PASS: usize = 128;

/// What of a host interface says its namespace may have changed since: a new
/// veth (a pod started; an nsid reused), its state (the peer went down), its
/// bridge, its peer's ifindex (the peer was moved or replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Through {
    index: u32,
    peer_index: u32,
    state: OperState,
    master: Option<u32>,
}

impl From<&HostIface> for Through {
    fn from(i: &HostIface) -> Self {
        Self {
            index: i.index,
            peer_index: i.peer_index,
            state: i.state,
            master: i.master,
        }
    }
}

impl Peers {
    /// Opens the socket; [`Error::KernelTooOld`] below [`MIN_KERNEL`].
    pub fn connect() -> Result<Self> {
        let (conn, handle, _) =
            rtnetlink::new_connection_with_strict_check().map_err(|source| {
                if source.raw_os_error() == Some(libc::ENOPROTOOPT) {
                    Error::KernelTooOld
                } else {
                    Error::Connect { cause: source }
                }
            })?;
        drop(tokio::spawn(conn));
        Ok(Self {
            handle,
            kept: Mutex::default(),
        })
    }

    /// Marks every namespace read so far for reading again (the agent's
    /// resync, a notification overrun): the next reads re-read them,
    /// [`STALE_PER_PASS`] per read, serving the last read until then.
    pub fn expire(&self) {
        for k in lock(&self.kept).values_mut() {
            k.stale = true;
        }
    }

    /// Every host interface with a peer elsewhere, and what each peer namespace
    /// holds: read afresh where the interfaces leading to it changed since the
    /// last read (or after [`expire`](Self::expire)), kept from then otherwise.
    #[tracing::instrument(skip_all)]
    pub async fn read(&self) -> Result<PodNamespaces> {
        let ifaces = self.host_ifaces().await?;
        Ok(self.read_behind(ifaces).await)
    }

    /// What the namespaces behind `ifaces` (the host's interfaces with a peer
    /// elsewhere, from a link dump the caller made anyway) hold: as
    /// [`read`](Self::read), without a link dump of its own.
    pub async fn read_behind(&self, ifaces: Vec<HostIface>) -> PodNamespaces {
        // A dropped read (cancelled mid-way) leaves nothing kept: the next one reads all.
        let kept = std::mem::take(&mut *lock(&self.kept));
        let (mut now, wanted, stale_left) = plan(kept, &ifaces);
        let reread = wanted.len();
        let reads: Vec<_> = stream::iter(wanted)
            .map(|(nsid, through)| async move {
                let peer = through.first().map_or(0, |t| t.peer_index);
                let read = self.namespace(nsid, peer).await;
                (nsid, through, read)
            })
            .buffer_unordered(PIPELINE)
            .collect()
            .await;
        let mut out = PodNamespaces {
            read: true,
            reread,
            stale_left,
            ..PodNamespaces::default()
        };
        for (nsid, through, read) in reads {
            match read {
                Ok(ns) => {
                    now.insert(
                        nsid,
                        Kept {
                            through,
                            ns: Arc::new(ns),
                            stale: false,
                        },
                    );
                }
                Err(e) => {
                    let iface = ifaces
                        .iter()
                        .find(|i| i.nsid == nsid)
                        .map(|i| i.name.clone())
                        .unwrap_or_default();
                    tracing::warn!(nsid, iface = %iface, error = %e, "a pod namespace was not read");
                    out.unread.push(Unread {
                        nsid,
                        iface,
                        reason: e.to_string(),
                    });
                }
            }
        }
        out.unread.sort_by_key(|u| u.nsid);
        out.namespaces = now
            .iter()
            .map(|(nsid, k)| (*nsid, Arc::clone(&k.ns)))
            .collect();
        out.ifaces = ifaces;
        // A namespace holding nothing yet may be mid-ADD (its veth up before the
        // plugin puts the address in, which tells the host nothing): read it again.
        now.retain(|_, k| !k.ns.addresses.is_empty());
        *lock(&self.kept) = now;
        out
    }

    /// The host's interfaces with a peer in another namespace.
    pub async fn host_ifaces(&self) -> Result<Vec<HostIface>> {
        let mut req = self.handle.link().get();
        skip_stats(req.message_mut());
        req.execute()
            .try_filter_map(|m| async move { Ok(host_iface(&m)) })
            .take(MAX_IFACES)
            .try_collect()
            .await
            .map_err(|source| Error::HostLinks { cause: source })
    }
}

/// A pass's plan: the namespaces kept, those to read, how many marked are left.
type Plan = (BTreeMap<i32, Kept>, Vec<(i32, Vec<Through>)>, usize);

/// What a pass keeps and reads: namespaces whose interfaces are unchanged
/// are kept; new and changed ones are read, and [`STALE_PER_PASS`] of those a
/// resync marked (the others kept, still marked, for the next passes).
fn plan(mut kept: BTreeMap<i32, Kept>, ifaces: &[HostIface]) -> Plan {
    let (mut now, mut wanted, mut stale) = (BTreeMap::new(), Vec::new(), 0);
    for (nsid, through) in namespaces_of(ifaces) {
        match kept.remove(&nsid) {
            Some(k) if k.through == through && k.stale && stale < STALE_PER_PASS => {
                stale += 1;
                wanted.push((nsid, through));
            }
            Some(k) if k.through == through => {
                now.insert(nsid, k);
            }
            _ => wanted.push((nsid, through)),
        }
    }
    let left = now.values().filter(|k| k.stale).count();
    (now, wanted, left)
}

/// Asks a link dump to leave out each link's counters and its IPv4/IPv6 ones
/// (`RTEXT_FILTER_SKIP_STATS`, Linux 4.18; an older kernel ignores the bit),
/// nothing here reads them, and on a node of 1,000 veths they
/// are a good part of what the kernel writes and the adapter parses.
pub fn skip_stats(req: &mut LinkMessage) {
    req.attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
}

/// Each peer namespace (at most [`MAX_NAMESPACES`]) with the host interfaces
/// leading to it, in the order the host lists them.
fn namespaces_of(ifaces: &[HostIface]) -> BTreeMap<i32, Vec<Through>> {
    let mut out: BTreeMap<i32, Vec<Through>> = BTreeMap::new();
    for i in ifaces {
        if let Some(through) = out.get_mut(&i.nsid) {
            through.push(i.into());
        } else if out.len() < MAX_NAMESPACES {
            out.insert(i.nsid, vec![i.into()]);
        }
    }
    out
}

mod parse;
mod read;

pub use parse::{
    address_answers_for, dad_failed, host_iface, link_answers_for, ns_address, ns_addresses,
    ns_link,
};
pub use read::MAX_SECONDARY_LINKS;

#[cfg(test)]
mod tests;
