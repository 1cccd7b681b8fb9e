//! One peer namespace's read: its peer link, its addresses, and the links
//! beyond the peer that hold an address.

use futures::{StreamExt as _, TryStreamExt as _};
use netlink_packet_route::{
    address::{AddressAttribute, AddressMessage},
    link::{LinkAttribute, LinkMessage},
};

use super::{
    MAX_ADDRESSES, NsError, Peers, address_answers_for, link_answers_for, ns_addresses, ns_link,
    skip_stats,
};
use crate::inventory::PeerNamespace;

/// The [`NsError::Dump`] of the `what` dump for `nsid`.
fn dump_failed(what: &'static str, nsid: i32) -> impl FnOnce(rtnetlink::Error) -> NsError {
    move |cause| NsError::Dump { what, nsid, cause }
}

/// At most this many links beyond the peer are read per namespace.
pub const MAX_SECONDARY_LINKS: usize = 8;

impl Peers {
    /// The peer link alone, by ifindex: a link dump of the namespace costs the
    /// kernel several times more (measured: 180 µs against 28 µs per
    /// namespace), and what the namespace holds is in its address dump.
    async fn peer_link(&self, nsid: i32, peer: u32) -> Result<Vec<LinkMessage>, NsError> {
        let msgs = self.link_at(nsid, peer).await?;
        // Without the capability the kernel answers nothing, or refuses.
        if !msgs.iter().any(|m| m.header.index == peer) {
            return Err(NsError::Empty { nsid, peer });
        }
        Ok(msgs)
    }

    /// The link with ifindex `index` in namespace `nsid`, as the kernel answers.
    async fn link_at(&self, nsid: i32, index: u32) -> Result<Vec<LinkMessage>, NsError> {
        let mut req = self.handle.link().get().match_index(index);
        req.message_mut()
            .attributes
            .push(LinkAttribute::IfNetnsId(nsid));
        skip_stats(req.message_mut());
        let msgs: Vec<LinkMessage> =
            req.execute()
                .take(1)
                .try_collect()
                .await
                .map_err(|source| match &source {
                    rtnetlink::Error::NetlinkError(e)
                        if e.raw_code() == -libc::EPERM || e.raw_code() == -libc::EACCES =>
                    {
                        NsError::Empty { nsid, peer: index }
                    }
                    _ => dump_failed("link", nsid)(source),
                })?;
        if msgs.iter().any(|m| !link_answers_for(m, nsid)) {
            return Err(NsError::TargetIgnored { what: "link", nsid });
        }
        Ok(msgs)
    }

    /// One peer namespace's links and addresses, by nsid; `peer`: the ifindex
    /// there of the host interface's peer, which the answer must hold.
    pub(super) async fn namespace(&self, nsid: i32, peer: u32) -> Result<PeerNamespace, NsError> {
        let msgs = self.peer_link(nsid, peer).await?;
        let mut ns = PeerNamespace {
            links: msgs.iter().filter_map(ns_link).collect(),
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
            .map_err(dump_failed("address", nsid))?;
        if msgs.iter().any(|m| !address_answers_for(m, nsid)) {
            return Err(NsError::TargetIgnored {
                what: "address",
                nsid,
            });
        }
        ns.truncated |= msgs.len() > MAX_ADDRESSES;
        ns.addresses = ns_addresses(&msgs[..msgs.len().min(MAX_ADDRESSES)]);
        self.secondary_links(nsid, &mut ns).await;
        Ok(ns)
    }

    /// The links beyond the peer that hold an address (a secondary network's
    /// `net1`), each alone, at most [`MAX_SECONDARY_LINKS`]: what they are
    /// stacked on tells whether two pods' are on one network. A namespace
    /// with addresses on its peer alone costs no request more. One that cannot
    /// be read (deleted meanwhile) is left out: its addresses are compared
    /// with nothing until the next read.
    async fn secondary_links(&self, nsid: i32, ns: &mut PeerNamespace) {
        let mut wanted: Vec<u32> = ns
            .addresses
            .iter()
            .map(|a| a.index)
            .filter(|i| ns.link(*i).is_none())
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        wanted.truncate(MAX_SECONDARY_LINKS);
        for index in wanted {
            if let Ok(msgs) = self.link_at(nsid, index).await {
                ns.links.extend(msgs.iter().filter_map(ns_link));
            }
        }
    }
}
