//! Connections per peer, so that one client cannot hold every slot of the
//! metrics listener: each peer holds at most `--http-max-connections-per-peer`.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};

/// The open connections of each peer of one listener. A peer is in the table
/// only while it holds a connection, so it never holds more entries than the
/// listener serves connections.
#[derive(Debug)]
pub(super) struct Peers {
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in its peer's count, given back when dropped.
#[derive(Debug)]
pub(super) struct Slot {
    peers: Arc<Peers>,
    peer: IpAddr,
}

impl Peers {
    pub(super) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for one more connection of `peer`, unless it holds its cap.
    pub(super) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Slot> {
        let mut open = crate::inventory::lock(&self.open);
        let n = open.entry(peer).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Slot {
            peers: Arc::clone(self),
            peer,
        })
    }

    #[cfg(test)]
    fn peers(&self) -> usize {
        crate::inventory::lock(&self.open).len()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = crate::inventory::lock(&self.peers.open);
        if let Some(n) = open.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn a_peer_holds_its_cap_at_most_and_leaves_no_entry_once_gone() {
        let peers = Peers::new(2);
        let (a, b) = (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        );
        let held: Vec<Slot> = (0..5).filter_map(|_| peers.admit(a)).collect();
        assert_eq!(held.len(), 2);
        let other = peers.admit(b);
        assert!(other.is_some(), "another peer has its own");
        drop(held);
        assert!(peers.admit(a).is_some());
        drop(other);
        assert_eq!(peers.peers(), 0, "a refused peer leaves no entry either");
    }
}
