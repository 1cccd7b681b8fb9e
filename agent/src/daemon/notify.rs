//! Change notifications that trigger a reconcile: netlink (addresses, routes,
//! links, both families) and the input files. Nothing here polls.

use std::{ffi::OsString, path::Path};

use futures::StreamExt as _;
use netlink_packet_core::NetlinkPayload;
use rtnetlink::MulticastGroup;
use tokio::sync::mpsc;

/// Why a reconcile is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Something in the node's network changed.
    Netlink,
    /// The kernel dropped notifications (ENOBUFS): only a full resync is safe.
    NetlinkOverrun,
    /// An input file changed.
    Files,
    /// A watched Kubernetes object changed.
    Kube,
}

/// Subscribes to address, route and link changes of both families and sends a
/// trigger for each notification. The task ends when `tx` is closed.
pub fn netlink(tx: mpsc::Sender<Trigger>) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let groups = [
        MulticastGroup::Link,
        MulticastGroup::Ipv4Ifaddr,
        MulticastGroup::Ipv6Ifaddr,
        MulticastGroup::Ipv4Route,
        MulticastGroup::Ipv6Route,
    ];
    let (conn, _handle, mut messages) = rtnetlink::new_multicast_connection(&groups)?;
    let conn = tokio::spawn(conn);
    Ok(tokio::spawn(async move {
        while let Some((msg, _)) = messages.next().await {
            let trigger = match msg.payload {
                NetlinkPayload::Overrun(_) => Trigger::NetlinkOverrun,
                _ => Trigger::Netlink,
            };
            // A full channel already holds a pending trigger: this one adds nothing,
            // except an overrun, which must not be lost.
            let sent = if trigger == Trigger::NetlinkOverrun {
                tx.send(trigger).await.map_err(|_| ())
            } else {
                match tx.try_send(trigger) {
                    Err(mpsc::error::TrySendError::Closed(_)) => Err(()),
                    _ => Ok(()),
                }
            };
            if sent.is_err() {
                break;
            }
        }
        conn.abort();
    }))
}

/// Watches the directories of `paths` (a file replaced by rename, as editors,
/// `kubectl … > f` and ConfigMap mounts do, is seen too) and sends a trigger
/// when one of the files is written, created, moved in or removed.
pub fn files(
    paths: &[&Path],
    tx: mpsc::Sender<Trigger>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use inotify::{Inotify, WatchMask};
    let inotify = Inotify::init()?;
    let mut names: Vec<OsString> = Vec::new();
    for p in paths {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        inotify.watches().add(
            dir,
            WatchMask::CLOSE_WRITE | WatchMask::MOVED_TO | WatchMask::CREATE | WatchMask::DELETE,
        )?;
        names.extend(p.file_name().map(ToOwned::to_owned));
    }
    let mut events = inotify.into_event_stream(vec![0u8; 4096])?;
    Ok(tokio::spawn(async move {
        while let Some(ev) = events.next().await {
            let Ok(ev) = ev else { break };
            // `..data` is the ConfigMap mount's symlink swap; our names are the files themselves.
            let ours = ev
                .name
                .as_ref()
                .is_some_and(|n| names.iter().any(|x| x == n) || n == "..data");
            if ours
                && matches!(
                    tx.try_send(Trigger::Files),
                    Err(mpsc::error::TrySendError::Closed(_))
                )
            {
                break;
            }
        }
    }))
}
