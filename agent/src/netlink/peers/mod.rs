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

use std::{collections::BTreeSet, net::IpAddr};

use futures::{StreamExt as _, TryStreamExt as _, stream};
use netlink_packet_route::{
    address::{AddressAttribute, AddressMessage},
    link::{InfoKind, LinkAttribute, LinkInfo, LinkLayerType, LinkMessage, State},
};
use rtnetlink::Handle;

use crate::inventory::{
    HostIface, NsAddress, NsLink, OperState, PeerNamespace, PodNamespaces, Unread,
};

/// The first kernel that reads a peer namespace's addresses by nsid with
/// strict checking: `IFA_TARGET_NETNSID` (IPv4 and IPv6) and
/// `NETLINK_GET_STRICT_CHK` were both merged for Linux 4.20.
pub const MIN_KERNEL: &str = "4.20";

/// At most this many host interfaces with a peer are looked at.
pub const MAX_IFACES: usize = 8192;
/// At most this many peer namespaces are read per pass.
pub const MAX_NAMESPACES: usize = 4096;
/// At most this many links are kept per namespace.
pub const MAX_LINKS: usize = 64;
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
        "opening an rtnetlink socket with NETLINK_GET_STRICT_CHK failed: {source}; ipshadow \
         must run in the node's network namespace (hostNetwork: true) with CAP_NET_ADMIN"
    )]
    Connect {
        /// What the kernel said.
        #[source]
        source: std::io::Error,
    },
    /// The host's own link dump failed.
    #[error(
        "dumping the host's links (to find veth/netkit peers) failed: {source}; retried on the next resync"
    )]
    HostLinks {
        /// rtnetlink's error.
        #[source]
        source: rtnetlink::Error,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why one namespace could not be read (kept in [`PodNamespaces::unread`]).
#[derive(Debug, thiserror::Error)]
enum NsError {
    #[error(
        "the {what} dump for nsid {nsid} failed: {source}; the namespace may have been deleted \
         meanwhile (a pod torn down): the next resync reads it again"
    )]
    Dump {
        what: &'static str,
        nsid: i32,
        #[source]
        source: rtnetlink::Error,
    },
    #[error(
        "the kernel answered the link dump for nsid {nsid} with no link, not even the peer \
         (ifindex {peer}): the dump by target nsid needs CAP_NET_ADMIN, checked for the \
         process at every dump; grant it (the DaemonSet adds NET_ADMIN)"
    )]
    Empty { nsid: i32, peer: u32 },
    #[error(
        "the kernel answered the {what} dump for nsid {nsid} without the target nsid: it \
         answered for the host namespace, so the answer was dropped; this needs Linux \
         {MIN_KERNEL} or later with NETLINK_GET_STRICT_CHK"
    )]
    TargetIgnored { what: &'static str, nsid: i32 },
}

/// A strict-checking rtnetlink socket for reading peer namespaces.
#[derive(Debug)]
pub struct Peers {
    handle: Handle,
}

impl Peers {
    /// Opens the socket; [`Error::KernelTooOld`] below [`MIN_KERNEL`].
    pub fn connect() -> Result<Self> {
        let (conn, handle, _) =
            rtnetlink::new_connection_with_strict_check().map_err(|source| {
                if source.raw_os_error() == Some(libc::ENOPROTOOPT) {
                    Error::KernelTooOld
                } else {
                    Error::Connect { source }
                }
            })?;
        drop(tokio::spawn(conn));
        Ok(Self { handle })
    }

    /// Every host interface with a peer elsewhere, and what each peer namespace holds.
    #[tracing::instrument(skip_all)]
    pub async fn read(&self) -> Result<PodNamespaces> {
        let ifaces: Vec<HostIface> = self
            .handle
            .link()
            .get()
            .execute()
            .try_filter_map(|m| async move { Ok(host_iface(&m)) })
            .take(MAX_IFACES)
            .try_collect()
            .await
            .map_err(|source| Error::HostLinks { source })?;
        let mut nsids = BTreeSet::new();
        let mut wanted = Vec::new();
        for i in &ifaces {
            if nsids.insert(i.nsid) && wanted.len() < MAX_NAMESPACES {
                wanted.push((i.nsid, i.peer_index, i.name.clone()));
            }
        }
        let reads: Vec<_> =
            stream::iter(wanted)
                .map(|(nsid, peer, iface)| async move {
                    (nsid, iface, self.namespace(nsid, peer).await)
                })
                .buffer_unordered(PIPELINE)
                .collect()
                .await;
        let mut out = PodNamespaces {
            read: true,
            ifaces,
            ..PodNamespaces::default()
        };
        for (nsid, iface, read) in reads {
            match read {
                Ok(ns) => {
                    out.namespaces.insert(nsid, ns);
                }
                Err(e) => out.unread.push({
                    tracing::warn!(nsid, iface = %iface, error = %e, "a pod namespace was not read");
                    Unread {
                    nsid,
                    iface,
                    reason: e.to_string(),
                }
                }),
            }
        }
        out.unread.sort_by_key(|u| u.nsid);
        Ok(out)
    }

    /// One peer namespace's links and addresses, by nsid; `peer`: the ifindex
    /// there of the host interface's peer, which the answer must hold.
    async fn namespace(&self, nsid: i32, peer: u32) -> Result<PeerNamespace, NsError> {
        let mut req = self.handle.link().get();
        req.message_mut()
            .attributes
            .push(LinkAttribute::IfNetnsId(nsid));
        let msgs: Vec<LinkMessage> = req
            .execute()
            .take(MAX_LINKS + 1)
            .try_collect()
            .await
            .map_err(|source| NsError::Dump {
                what: "link",
                nsid,
                source,
            })?;
        if msgs.iter().any(|m| !link_answers_for(m, nsid)) {
            return Err(NsError::TargetIgnored { what: "link", nsid });
        }
        // Without the capability the kernel ends the dump at once, with no error.
        if !msgs.iter().any(|m| m.header.index == peer) {
            return Err(NsError::Empty { nsid, peer });
        }
        let mut ns = PeerNamespace {
            truncated: msgs.len() > MAX_LINKS,
            links: msgs.iter().take(MAX_LINKS).filter_map(ns_link).collect(),
            ..PeerNamespace::default()
        };
        let mut req = self.handle.address().get();
        req.message_mut()
            .attributes
            .push(AddressAttribute::TargetNetNsId(nsid));
        let msgs: Vec<AddressMessage> = req
            .execute()
            .take(MAX_ADDRESSES + 1)
            .try_collect()
            .await
            .map_err(|source| NsError::Dump {
            what: "address",
            nsid,
            source,
        })?;
        if msgs.iter().any(|m| !address_answers_for(m, nsid)) {
            return Err(NsError::TargetIgnored {
                what: "address",
                nsid,
            });
        }
        ns.truncated |= msgs.len() > MAX_ADDRESSES;
        ns.addresses = msgs
            .iter()
            .take(MAX_ADDRESSES)
            .filter_map(ns_address)
            .collect();
        Ok(ns)
    }
}

/// A host link whose peer is in another namespace (`IFLA_LINK_NETNSID` and `IFLA_LINK`).
pub fn host_iface(msg: &LinkMessage) -> Option<HostIface> {
    let (mut name, mut nsid, mut peer_index, mut master) = (None, None, None, None);
    let (mut kind, mut state) = (String::new(), OperState::Unknown);
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => name = Some(crate::inventory::text::cleaned(n)),
            LinkAttribute::LinkNetNsId(id) => nsid = Some(*id),
            LinkAttribute::Link(i) => peer_index = Some(*i),
            LinkAttribute::Controller(i) => master = Some(*i),
            LinkAttribute::OperState(s) => state = oper_state(*s),
            LinkAttribute::LinkInfo(infos) => {
                if let Some(k) = infos.iter().find_map(|i| match i {
                    LinkInfo::Kind(k) => Some(k),
                    _ => None,
                }) {
                    kind = kind_name(k);
                }
            }
            _ => {}
        }
    }
    Some(HostIface {
        index: msg.header.index,
        name: name?,
        kind,
        state,
        master,
        nsid: nsid.filter(|n| *n >= 0)?,
        peer_index: peer_index.filter(|i| *i > 0)?,
    })
}

fn kind_name(k: &InfoKind) -> String {
    match k {
        InfoKind::Veth => "veth".to_owned(),
        InfoKind::Netkit => "netkit".to_owned(),
        other => crate::inventory::text::cleaned(&other.to_string()),
    }
}

/// A link of a peer namespace; `None` for loopback and unnamed links.
pub fn ns_link(msg: &LinkMessage) -> Option<NsLink> {
    if msg.header.link_layer_type == LinkLayerType::Loopback {
        return None;
    }
    let mut name = None;
    let mut state = OperState::Unknown;
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => name = Some(crate::inventory::text::cleaned(n)),
            LinkAttribute::OperState(s) => state = oper_state(*s),
            _ => {}
        }
    }
    Some(NsLink {
        index: msg.header.index,
        name: name?,
        state,
    })
}

/// An address of a peer namespace that can carry pod traffic; `None` for
/// loopback, IPv6 link-local and multicast addresses.
pub fn ns_address(msg: &AddressMessage) -> Option<NsAddress> {
    let (mut address, mut local) = (None, None);
    for attr in &msg.attributes {
        match attr {
            AddressAttribute::Address(a) => address = Some(*a),
            AddressAttribute::Local(a) => local = Some(*a),
            _ => {}
        }
    }
    let ip = local.or(address)?;
    let carries = match ip {
        // 169.254/16 too: KubeVirt's bridge binding leaves 169.254.75.10 on the
        // pod's veth when it hands the pod address to the VM.
        IpAddr::V4(v4) => {
            !v4.is_loopback() && !v4.is_multicast() && !v4.is_unspecified() && !v4.is_link_local()
        }
        IpAddr::V6(v6) => {
            !v6.is_loopback()
                && !v6.is_multicast()
                && !v6.is_unspecified()
                && !v6.is_unicast_link_local()
        }
    };
    carries.then_some(NsAddress {
        ip,
        prefix_len: msg.header.prefix_len,
        index: msg.header.index,
    })
}

/// Whether a link answer says it is about namespace `nsid`.
pub fn link_answers_for(msg: &LinkMessage, nsid: i32) -> bool {
    msg.attributes
        .iter()
        .any(|a| matches!(a, LinkAttribute::IfNetnsId(n) if *n == nsid))
}

/// Whether an address answer says it is about namespace `nsid`.
pub fn address_answers_for(msg: &AddressMessage, nsid: i32) -> bool {
    msg.attributes
        .iter()
        .any(|a| matches!(a, AddressAttribute::TargetNetNsId(n) if *n == nsid))
}

fn oper_state(s: State) -> OperState {
    match s {
        State::Up => OperState::Up,
        State::Down => OperState::Down,
        State::LowerLayerDown => OperState::LowerLayerDown,
        State::Unknown => OperState::Unknown,
        _ => OperState::Other,
    }
}

#[cfg(test)]
mod tests;
