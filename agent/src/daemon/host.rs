//! The host source: netlink notifications of address, route and link changes
//! (both families), each a reason to reconcile. Nothing here polls.

use futures::{StreamExt as _, channel::mpsc::UnboundedReceiver};
use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use rtnetlink::{MulticastGroup, sys::SocketAddr};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Why a reconcile is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// Something in the node's network changed.
    Netlink,
    /// The kernel dropped notifications (ENOBUFS): only a full resync is safe.
    NetlinkOverrun,
    /// An input file changed.
    Files,
    /// A watched Kubernetes object changed.
    Kube,
}

/// The multicast subscription, made in `new` so a failure stops the start.
pub(crate) struct HostSource {
    connection: rtnetlink::proto::Connection<RouteNetlinkMessage>,
    messages: UnboundedReceiver<(NetlinkMessage<RouteNetlinkMessage>, SocketAddr)>,
    tx: mpsc::Sender<Trigger>,
}

impl HostSource {
    /// Subscribes to address, route and link changes of both families.
    pub(crate) fn new(tx: mpsc::Sender<Trigger>) -> std::io::Result<Self> {
        let groups = [
            MulticastGroup::Link,
            MulticastGroup::Ipv4Ifaddr,
            MulticastGroup::Ipv6Ifaddr,
            MulticastGroup::Ipv4Route,
            MulticastGroup::Ipv6Route,
        ];
        let (connection, _handle, messages) = rtnetlink::new_multicast_connection(&groups)?;
        Ok(Self {
            connection,
            messages,
            tx,
        })
    }

    /// Sends a trigger for each notification until `token` is cancelled.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        loop {
            let msg = tokio::select! {
                () = token.cancelled() => return,
                () = &mut self.connection => {
                    tracing::error!("the netlink notification socket closed; changes are seen at the next resync only");
                    return;
                }
                msg = self.messages.next() => msg,
            };
            let Some((msg, _)) = msg else { return };
            let trigger = match msg.payload {
                NetlinkPayload::Overrun(_) => Trigger::NetlinkOverrun,
                _ => Trigger::Netlink,
            };
            // A full channel already holds a pending trigger: this one adds nothing,
            // except an overrun, which must not be lost.
            let open = if trigger == Trigger::NetlinkOverrun {
                self.tx.send(trigger).await.is_ok()
            } else {
                !matches!(
                    self.tx.try_send(trigger),
                    Err(mpsc::error::TrySendError::Closed(_))
                )
            };
            if !open {
                return;
            }
        }
    }
}
