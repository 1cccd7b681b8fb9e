//! Netlink adapter: reads this node's links, addresses, routes and FIB answers
//! into a [`HostNetwork`]. No shelling out to `ip`: everything goes over one
//! rtnetlink socket.

pub mod convert;
mod fib;
pub mod peers;

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::atomic::{AtomicU64, Ordering},
};

use futures::TryStreamExt as _;
use netlink_packet_route::link::LinkMessage;
use rtnetlink::{Handle, RouteMessageBuilder};

pub use convert::{address, fib_answer, link, route, route_kind};

use crate::inventory::{FibResult, HostIface, HostNetwork, PodNamespaces};
use crate::report::chain::Chain;

/// Reading this node over netlink failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "opening an rtnetlink socket failed: {}; ipshadow must run on the node itself \
         (hostNetwork: true in Kubernetes) on Linux",
        Chain(.cause)
    )]
    /// The socket could not be opened.
    Connect {
        /// What the kernel said.
        cause: std::io::Error,
    },
    /// A dump failed.
    #[error("reading {what} over netlink failed: {}", Chain(.cause))]
    Dump {
        /// Links, addresses or routes.
        what: &'static str,
        /// rtnetlink's error.
        cause: rtnetlink::Error,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The [`Error::Dump`] of reading `what`.
fn dump_failed(what: &'static str) -> impl FnOnce(rtnetlink::Error) -> Error {
    move |cause| Error::Dump { what, cause }
}

/// One rtnetlink connection, driven by a task on the current tokio runtime.
/// The task ends by itself when the handle is dropped (netlink-proto shuts a
/// connection down once no handle and no unsolicited-message receiver is left).
#[derive(Debug)]
pub struct Netlink {
    handle: Handle,
    /// The socket of the FIB lookups.
    fib: fib::Fib,
    /// The strict-checking socket for the pods' namespaces; `Err` says why they are not read.
    peers: std::result::Result<peers::Peers, String>,
    /// How many times the host's links, addresses and routes were read.
    host_reads: AtomicU64,
}

impl Netlink {
    /// Opens the socket in the calling thread's network namespace.
    pub fn connect() -> Result<Self> {
        let (conn, handle, _) =
            rtnetlink::new_connection().map_err(|source| Error::Connect { cause: source })?;
        drop(tokio::spawn(conn));
        let fib = fib::Fib::connect().map_err(|source| Error::Connect { cause: source })?;
        let peers = peers::Peers::connect().map_err(|e| {
            tracing::warn!(error = %e, "pod namespaces are not read");
            e.to_string()
        });
        Ok(Self {
            handle,
            fib,
            peers,
            host_reads: AtomicU64::new(0),
        })
    }

    /// How many times [`read_host`](Self::read_host) has read the host's
    /// links, addresses and routes: once per netlink change and per resync
    /// pass, however many slices the pass reads its namespaces in.
    pub fn host_reads(&self) -> u64 {
        self.host_reads.load(Ordering::Relaxed)
    }

    /// Links, addresses and routes of every table, plus a FIB lookup for each of `lookups`.
    #[tracing::instrument(skip_all, fields(lookups = lookups.len()))]
    pub async fn read_host(&self, lookups: &[IpAddr]) -> Result<HostNetwork> {
        self.host_reads.fetch_add(1, Ordering::Relaxed);
        let (links, ifaces) = self.links().await?;
        let addr_msgs: Vec<_> = self
            .handle
            .address()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(dump_failed("addresses"))?;
        let addresses = addr_msgs
            .iter()
            .filter_map(|m| convert::address(m, &links))
            .collect();
        // Global IPv6 addresses only: a link-local's DAD is no pod's concern.
        let dad_failed = addr_msgs
            .iter()
            .filter(|m| peers::dad_failed(m))
            .filter_map(convert::local_ip)
            .filter(|ip| matches!(ip, IpAddr::V6(v6) if !v6.is_unicast_link_local()))
            .collect();
        let mut routes = Vec::new();
        let v4 = RouteMessageBuilder::<Ipv4Addr>::new().build();
        let v6 = RouteMessageBuilder::<Ipv6Addr>::new().build();
        for (what, msg) in [("IPv4 routes", v4), ("IPv6 routes", v6)] {
            let mut dump = self.handle.route().get(msg).execute();
            while let Some(m) = dump.try_next().await.map_err(dump_failed(what))? {
                routes.extend(convert::route(&m));
            }
        }
        let fib = self.lookup(lookups).await;
        let namespaces = self.read_namespaces(ifaces).await;
        Ok(HostNetwork {
            links,
            addresses,
            routes,
            fib,
            namespaces,
            dad_failed,
        })
    }

    /// One link dump for the node's links and the pods' veths alike: the
    /// node's links, and those with a peer in another namespace.
    async fn links(&self) -> Result<(Vec<crate::inventory::Link>, Vec<HostIface>)> {
        let mut req = self.handle.link().get();
        peers::skip_stats(req.message_mut());
        let msgs: Vec<LinkMessage> = req
            .execute()
            .try_collect()
            .await
            .map_err(dump_failed("links"))?;
        let links = msgs.iter().filter_map(convert::link).collect();
        let ifaces = msgs
            .iter()
            .filter_map(peers::host_iface)
            .take(peers::MAX_IFACES)
            .collect();
        Ok((links, ifaces))
    }

    /// Whether the strict-checking socket for the pods' namespaces is open.
    pub fn reads_pod_namespaces(&self) -> bool {
        self.peers.is_ok()
    }

    /// Makes the next read of the pods' namespaces read every one of them
    /// again, not only those whose host interfaces changed.
    pub fn expire_namespaces(&self) {
        if let Ok(p) = &self.peers {
            p.expire();
        }
    }

    /// What the namespaces behind `ifaces` hold (those whose interfaces
    /// changed read afresh, and a slice of those a resync wants read again);
    /// empty with the reason when this kernel cannot read them.
    pub async fn read_namespaces(&self, ifaces: Vec<HostIface>) -> PodNamespaces {
        match &self.peers {
            Ok(p) => p.read_behind(ifaces).await,
            Err(why) => PodNamespaces {
                skipped: Some(why.clone()),
                ..PodNamespaces::default()
            },
        }
    }

    /// FIB lookups (`ip route get`) for `ips`, sent in batches on a socket of their own.
    pub async fn lookup(&self, ips: &[IpAddr]) -> BTreeMap<IpAddr, FibResult> {
        let mut unique: Vec<IpAddr> = ips.to_vec();
        unique.sort_unstable();
        unique.dedup();
        self.fib.lookup(&unique).await
    }
}
